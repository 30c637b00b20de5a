"""Worker processes: start one, wait for it, reap what it left; a launcher per crash mode.

A worker is started one of three ways, one :class:`Launcher` each (the crash modes of
:mod:`crashpoint.harness.run.modes`):

* ``kill`` (:class:`ForkLauncher`): forked from this thread's warm zygote
  (:mod:`crashpoint.harness.process.forkserver`) when the adapter allows it (``fork_workers``) and the
  command runs a Python module; a real SIGKILL ends it at its crash point;
* ``kill-cold`` (:class:`ColdLauncher`): a new interpreter per worker (forked and ``exec``-ed by the
  zygote, its subreaper), the naive way the benchmark compares with, and what every adapter without
  ``fork_workers`` gets;
* ``inprocess`` (:class:`InProcessLauncher`): the worker runs in this process and a crash is simulated
  (:mod:`crashpoint.harness.process.inprocess`); a worker that must be held at a point is forked instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from crashpoint.api import RUN_MARKER  # noqa: F401  (the harness's name for it: launch.RUN_MARKER)
from crashpoint.errors import WorkerTimeout
from crashpoint.harness.process import inprocess
from crashpoint.harness.process import forkserver
from crashpoint.harness.process.forkserver import forkable

Poll = Callable[[], None]


#: :data:`RUN_MARKER` (defined in :mod:`crashpoint.api`, whose effect decorator reads it) is set for every worker of
#: a run; its value is the run folder. Children inherit it, so the harness finds and kills whatever a worker left
#: behind, even in a new session.


def run_process(argv: list[str], timeout_s: float, env: dict[str, str] | None = None,
                log: Path | None = None, poll: Callable[[], None] | None = None,
                on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
    """Run ``argv`` in its own process group, stdout and stderr to ``log`` (or discarded).

    Returns ``(returncode, leftovers)``: ``leftovers`` describes processes still alive after it
    ended that belong to its group or carry its :data:`RUN_MARKER` value; they are SIGKILLed.
    Output goes to a file, not a pipe, so a child that keeps the pipe open cannot hang the harness.
    ``poll``, when given, is called about every 2 ms while the process runs (to serve held workers);
    ``on_start``, when given, gets the process's pid as soon as it runs.

    Raises:
        WorkerTimeout: it ran longer than ``timeout_s`` wall seconds (it and its leftovers are killed).
        Exception: what ``poll`` or ``on_start`` raised (the process and its leftovers are killed first).
    """
    env = {**os.environ, **(env or {})}
    marker = env.get(RUN_MARKER)
    with open(log if log else os.devnull, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env=env)
        try:
            if on_start is not None:
                on_start(proc.pid)
            if poll is None:
                proc.wait(timeout=timeout_s)
            else:
                deadline = time.monotonic() + timeout_s
                while proc.poll() is None:
                    poll()
                    if time.monotonic() > deadline:
                        raise subprocess.TimeoutExpired(argv, timeout_s)
                    time.sleep(0.002)
        except BaseException as exc:  # a timeout, or poll/on_start raising, or Ctrl-C: it must not run on
            _kill_group(proc.pid)
            proc.wait()
            reap(marker, proc.pid)
            if isinstance(exc, subprocess.TimeoutExpired):
                raise WorkerTimeout(f"worker did not exit within {timeout_s:.1f} s (killed with its process group)") \
                    from None
            raise
    return proc.returncode, reap(marker, proc.pid)


def reap(marker: str | None, pgid: int) -> list[str]:
    """SIGKILL every process in group ``pgid`` or whose environment has ``RUN_MARKER=marker``.

    Returns ``"PID COMMAND"`` descriptions of what was killed (Linux ``/proc``; elsewhere only the group).
    """
    killed = []
    needle = f"{RUN_MARKER}={marker}".encode() if marker else None
    me = os.getpid()
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        pid = int(entry.name)
        try:
            ours = os.getpgid(pid) == pgid
            if not ours and needle:
                ours = needle in (entry / "environ").read_bytes().split(b"\0")
            if not ours:
                continue
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(pid, signal.SIGKILL)
            killed.append(f"{pid} {cmd[:80]}")
        except (ProcessLookupError, PermissionError, FileNotFoundError, OSError):
            continue
    _kill_group(pgid)
    return killed


def reap_under(root: Path, wait_s: float = 0.0, holders: bool = False) -> list[str]:
    """SIGKILL every process whose :data:`RUN_MARKER` names a run folder under ``root`` (a sweep's folder):
    what the workers of an interrupted sweep left, whatever group or session they are in. Linux ``/proc``;
    returns ``"PID COMMAND"`` descriptions. ``holders``: also every process with a file open under ``root``
    (its cwd or a descriptor): a forked worker, which no marker shows (its ``/proc`` environ is its zygote's:
    the marker was set after the fork), still dying after its zygote. With ``wait_s`` > 0, waits (at most
    that many seconds) until none of them runs any more (gone or a zombie), so that none writes into ``root``
    once it is removed."""
    killed = _kill_marked(root, holders)
    deadline = time.monotonic() + wait_s
    while killed and time.monotonic() < deadline and _marked(root, holders):
        time.sleep(0.02)
        _kill_marked(root, holders)
    return killed


@contextlib.contextmanager
def reaping(root: Path | None, every_s: float = 0.05) -> Iterator[None]:
    """While the block runs, SIGKILL what carries a marker of a run under ``root`` (``None``: skipped) and this
    process's zygotes
    (:func:`~crashpoint.harness.process.forkserver.kill_zygotes`: the forked workers die with them) every ``every_s``
    seconds (a thread): for a block that waits for runs on this process's threads to end after Ctrl-C or
    SIGTERM (a thread pool's close). A worker that a run starts after one look dies at the next, so no run
    waits for a hung worker."""
    done = threading.Event()

    def loop() -> None:
        while not done.is_set():
            if root is not None:
                _kill_marked(root)
            forkserver.kill_zygotes()
            done.wait(every_s)

    reaper = threading.Thread(target=loop, name="crashpoint-reaper", daemon=True)
    reaper.start()
    try:
        yield
    finally:
        done.set()
        reaper.join()


def _marked(root: Path, holders: bool = False) -> list[int]:
    """The pids of running processes (not zombies: a zombie's environ and descriptors read empty) carrying
    ``root``'s marker, or (``holders``) with their cwd or a file descriptor under ``root``."""
    folder = str(Path(root).resolve())
    prefix = f"{RUN_MARKER}={folder}".encode()
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else ():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(v == prefix or v.startswith(prefix + b"/") for v in (entry / "environ").read_bytes().split(b"\0")) \
                    or holders and _holds_under(entry, folder):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _holds_under(entry: Path, folder: str) -> bool:
    """Whether the process ``/proc/PID`` has its cwd or an open file in ``folder`` (a removed file too)."""
    def inside(link: Path) -> bool:
        try:
            target = os.readlink(link)
        except OSError:
            return False
        return target == folder or target.startswith(folder + os.sep)

    return inside(entry / "cwd") or any(inside(fd) for fd in (entry / "fd").iterdir())


def _kill_marked(root: Path, holders: bool = False) -> list[str]:
    killed = []
    for pid in _marked(root, holders):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            os.kill(pid, signal.SIGKILL)
            killed.append(f"{pid} {cmd[:80]}")
        except OSError:
            continue
    return killed


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Launcher:
    """Starts one worker and waits for it (the base class: a new interpreter, :func:`run_process`).

    Args:
        adapter: the engine's adapter (its ``fork_workers`` says whether its workers may be forked).
        timeout_s: wall seconds a worker may take.
    """

    #: The worker's crash is simulated (it runs in this process): the probe is told so.
    simulates = False

    def __init__(self, adapter: Any, timeout_s: float) -> None:
        self.adapter = adapter
        self.timeout_s = timeout_s

    def _target(self, argv: list[str]) -> tuple[str, list[str]] | None:
        return forkable(argv) if getattr(self.adapter, "fork_workers", False) else None

    def launch(self, argv: list[str], env: dict[str, str], log: Path, poll: Poll | None,
               on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        """Run the worker ``argv``; returns ``(returncode, leftovers)`` as :func:`run_process`. Here: a new
        program that this thread's zygote forks and ``exec``-s (so every launch mode has a subreaper above
        the worker). ``poll`` is called about every 2 ms while it runs; ``on_start`` gets the worker's pid
        (this process's own for a worker run in-process).

        Raises:
            WorkerTimeout: it ran longer than ``timeout_s``.
            OSError: the zygote died (what carries the run's marker is killed first).
        """
        return self._zygote(env, lambda server: server.exec(argv, self.timeout_s, env, log, poll,
                                                                 on_start=on_start))

    @staticmethod
    def _zygote(env: dict[str, str], call: Callable[[Any], tuple[int, list[str]]]) -> tuple[int, list[str]]:
        try:
            return call(forkserver.for_this_thread())
        except OSError:  # the zygote died (a worker that killed it): what carries the run's marker dies too
            if env.get(RUN_MARKER):
                reap_under(Path(env[RUN_MARKER]))
            raise


class ColdLauncher(Launcher):
    """``kill-cold``: a new interpreter per worker (``exec``-ed by the zygote)."""


class ForkLauncher(Launcher):
    """``kill``: forked from this thread's warm zygote when the adapter allows it, else a new interpreter."""

    def launch(self, argv: list[str], env: dict[str, str], log: Path, poll: Poll | None,
               on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        target = self._target(argv)
        if target is None:
            return super().launch(argv, env, log, poll, on_start)
        return self._zygote(env, lambda server: server.run(target[0], target[1], self.timeout_s, env, log, poll,
                                                           on_start=on_start))


class InProcessLauncher(ForkLauncher):
    """``inprocess``: the worker runs here with a simulated crash; a held worker (``poll``) is forked."""

    @property
    def simulates(self) -> bool:  # type: ignore[override]
        return bool(getattr(self.adapter, "fork_workers", False))

    def launch(self, argv: list[str], env: dict[str, str], log: Path, poll: Poll | None,
               on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        target = self._target(argv)
        if target is not None and poll is None:
            if on_start is not None:
                on_start(os.getpid())
            return inprocess.run_worker(target[0], target[1], log), []
        return super().launch(argv, env, log, poll, on_start)


#: The launcher of each crash mode.
LAUNCHERS: dict[str, type[Launcher]] = {"kill": ForkLauncher, "kill-cold": ColdLauncher,
                                        "inprocess": InProcessLauncher}


def launcher(crash_mode: str, adapter: Any, timeout_s: float) -> Launcher:
    """The launcher of ``crash_mode`` for ``adapter``.

    Raises:
        ValueError: an unknown crash mode.
    """
    if crash_mode not in LAUNCHERS:
        raise ValueError(f"crash mode must be one of {', '.join(LAUNCHERS)}, got {crash_mode!r}")
    return LAUNCHERS[crash_mode](adapter, timeout_s)
