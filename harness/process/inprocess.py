"""Simulated crashes: the worker runs inside the harness process and a crash is an exception.

A fast approximation of the real thing, for quick local loops: no process is started or
killed. The worker's ``main(argv)`` is called in this process with a probe that raises
:class:`~crashpoint.harness.process.crashpoints.SimulatedCrash` at the crash point instead of sending
SIGKILL. The exception unwinds the worker: an open SQLite transaction is rolled back (as the
WAL's uncommitted frames are ignored after a kill), connections close, and the next "process"
is a new engine object on the same files. What it cannot show: state that lives only in a
process (a buffer not yet written, a thread, a child process) surviving where a kill would
destroy it, and a hung worker (there is no process to time out). So it is opt-in
(``crashpoint run --crash-mode inprocess``), and ``tests/integration/test_crash_modes.py`` checks that its
verdicts equal the real kills' on every built-in case.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import threading
import traceback
from pathlib import Path
from typing import Any, Iterator

from crashpoint.harness.process.crashpoints import SimulatedCrash

#: The return code a simulated crash reports, as a SIGKILL's ``Popen.returncode``.
KILLED = -9
_route = threading.local()
_install_lock = threading.Lock()


class _PerThreadStream(io.TextIOBase):
    """``sys.stdout``/``sys.stderr`` stand-in: a thread with a sink set writes there, others to ``base``.

    ``contextlib.redirect_stdout`` swaps one process-wide object, so two in-process workers on two
    threads would write into each other's logs (or a closed one)."""

    def __init__(self, base: Any) -> None:
        self.base = base

    def write(self, text: str) -> int:
        sink = getattr(_route, "sink", None)
        return (sink or self.base).write(text)

    def flush(self) -> None:
        (getattr(_route, "sink", None) or self.base).flush()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.base, name)


def _install() -> None:
    with _install_lock:
        if not isinstance(sys.stdout, _PerThreadStream):
            sys.stdout = _PerThreadStream(sys.stdout)
        if not isinstance(sys.stderr, _PerThreadStream):
            sys.stderr = _PerThreadStream(sys.stderr)


@contextlib.contextmanager
def _routed(sink: Any) -> Iterator[None]:
    _route.sink = sink
    try:
        yield
    finally:
        _route.sink = None


def run_worker(module: str, args: list[str], log: Path | None = None, env: dict[str, str] | None = None) -> int:
    """Call ``module.main(args)`` here, stdout and stderr to ``log``; ``-9`` when a simulated crash ended it.

    ``env`` is accepted for the same call shape as a process start and must not be needed by the
    worker (in-process workers share this process's environment).

    Any other exception is written to ``log`` with its traceback and gives ``1``, as a worker process
    that dies of it exits 1.
    """
    main: Any = getattr(importlib.import_module(module), "main")
    _install()
    with open(log if log else os.devnull, "w") as sink, _routed(sink):
        try:
            return int(main(args) or 0)
        except SimulatedCrash:
            return KILLED
        except SystemExit as exc:
            return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
        except Exception:  # noqa: BLE001 - reported like a worker process dying of it
            traceback.print_exc()
            return 1
