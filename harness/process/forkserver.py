"""Worker processes forked from a warm parent (a zygote) instead of started as new interpreters.

Starting ``python -m crashpoint.engine.worker`` costs about 100 ms on this machine (the
interpreter, then the imports); a ``fork()`` of a process that has already imported the
engine costs about 1 ms. The zygote is a small helper process started once per harness
thread: it imports the worker's modules, then, for each request, forks a child that runs
the worker's ``main(argv)`` in a new session (its own process group), with stdout and stderr
in the run's log file, and reports the child's exit status. The child is an ordinary OS
process: the crash probe's ``SIGKILL`` kills it for real, and the resumed worker is another
child that reads only the files.

The zygote never opens a database or a run folder itself, so a child inherits no open file
or lock of a previous run. Source: the *zygote* of Android and the fork server of AFL
(Zalewski, "Fuzzing random programs without execve()", 2014), and the ``forkserver`` start
method of :mod:`multiprocessing`.

Every launch mode goes through a zygote, so that each worker has a subreaper above it: a worker
that is not a warm Python module (``--crash-mode kill-cold``, an adapter without ``fork_workers``,
any non-Python engine) is forked and then ``exec``-ed as a new program (:meth:`ForkServer.exec`): same
pid, same session and log handling, and whatever it leaves behind (even a daemon in a new session
with an empty environment, which neither the worker's group nor the run's marker finds) is
reparented to the zygote and killed once the worker exits.

Protocol (one JSON object per line): the harness writes ``{"module", "argv", "env", "log",
"warm"}`` (or ``{"exec": argv, "env", "log"}``); the zygote answers ``{"pid": N}`` as soon as the child runs, then ``{"rc": R}``
when it exits (``R`` as :attr:`subprocess.Popen.returncode`: ``-9`` for a SIGKILL).
"""

from __future__ import annotations

import gc
import importlib
import json
import os
import re
import select
import signal
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Callable, Sequence

from crashpoint.errors import WorkerTimeout

#: Modules every zygote imports before its first fork (the reference worker's whole import graph).
PRELOAD = ("crashpoint.engine.worker", "crashpoint.engine.engine", "crashpoint.fakes.world",
           "crashpoint.harness.process.crashpoints")
_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")
#: Environment every worker process (and every zygote) starts with: ``python -m`` must not put the
#: working directory first on ``sys.path``, or a ``crashpoint/`` (or engine) folder there would be
#: imported instead of the installed package (``PYTHONSAFEPATH``, Python 3.11+). ``PYTHONPATH`` still applies.
ISOLATED_ENV = {"PYTHONSAFEPATH": "1"}


def forkable(argv: Sequence[str]) -> tuple[str, list[str]] | None:
    """``(module, args)`` when ``argv`` is ``[sys.executable, "-m", MODULE, *args]`` (a Python module
    run with this interpreter, which a warm fork can run), else ``None``."""
    if len(argv) >= 3 and argv[0] == sys.executable and argv[1] == "-m":
        return argv[2], list(argv[3:])
    return None


def warm_modules(module: str, args: Sequence[str]) -> list[str]:
    """The modules a worker will import: ``module`` and those named by ``MODULE:ATTR`` arguments
    (``--engine``, ``--world``, ``--probe``), imported by the zygote once so each child starts warm."""
    return [module] + [a.split(":", 1)[0] for a in args if _SPEC.fullmatch(a)]


class ForkServer:
    """The harness side of one zygote. Not thread-safe: use one per thread (:func:`for_this_thread`).

    Raises:
        OSError: the zygote could not be started.
    """

    def __init__(self) -> None:
        self.proc = subprocess.Popen([sys.executable, "-m", "crashpoint.harness.process.forkserver", *PRELOAD],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env={**os.environ, **ISOLATED_ENV})
        ZYGOTES.add(self.proc.pid)
        self._buffer = b""

    def alive(self) -> bool:
        """``True`` while the zygote process runs."""
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL the zygote (its running worker, if any, dies with it) and reap it."""
        ZYGOTES.discard(self.proc.pid)
        try:
            self.proc.kill()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired):
            pass

    def close(self) -> None:
        """Stop the zygote (closing its stdin ends it; a stuck one is killed)."""
        ZYGOTES.discard(self.proc.pid)
        try:
            self.proc.stdin.close()
            self.proc.wait(timeout=2)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()

    def _send(self, message: dict[str, Any]) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()

    def _receive(self, timeout_s: float | None) -> dict[str, Any] | None:
        """The zygote's next message, or ``None`` if none came within ``timeout_s`` seconds."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        fd = self.proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                return None
            chunk = os.read(fd, 65536)
            if not chunk:
                raise OSError("the worker fork server exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def run(self, module: str, args: list[str], timeout_s: float, env: dict[str, str] | None = None,
            log: Path | None = None, poll: Callable[[], None] | None = None,
            on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        """Fork a child that runs ``module.main(args)``; wait for it like :func:`~crashpoint.harness.process.launch.run_process`
        (``on_start`` gets the child's pid as soon as it runs).

        Returns ``(returncode, leftovers)``: ``-9`` after a SIGKILL; ``leftovers`` describes processes the
        worker left running (the zygote is their subreaper: it SIGKILLs them). ``poll`` is called about every 2 ms.

        Raises:
            WorkerTimeout: the child ran longer than ``timeout_s`` wall seconds (its group is killed).
            OSError: the zygote died.
        """
        return self._serve({"module": module, "argv": args, "env": env or {}, "log": str(log) if log else os.devnull,
                            "warm": warm_modules(module, args)}, timeout_s, poll, on_start)

    def exec(self, argv: list[str], timeout_s: float, env: dict[str, str] | None = None,
             log: Path | None = None, poll: Callable[[], None] | None = None,
             on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        """Fork a child that ``exec``-s ``argv`` (a new program: a cold interpreter, any engine's binary), with
        this zygote as its subreaper (the same pid runs the program); otherwise as :meth:`run`."""
        return self._serve({"exec": list(argv), "env": env or {}, "log": str(log) if log else os.devnull},
                           timeout_s, poll, on_start)

    def _serve(self, request: dict[str, Any], timeout_s: float, poll: Callable[[], None] | None,
               on_start: Callable[[int], None] | None = None) -> tuple[int, list[str]]:
        try:
            self._send(request)
            started = self._receive(30.0)
            if started is None or "pid" not in started:
                raise OSError(f"the worker fork server did not start a worker: {started!r}")
        except (OSError, ValueError):
            self.kill()  # out of step with this side: never reuse it (for_this_thread starts another)
            raise
        pid = started["pid"]
        answered = False
        try:
            if on_start is not None:
                on_start(pid)
            deadline = time.monotonic() + timeout_s
            while True:
                try:
                    message = self._receive(0.002 if poll else max(0.0, deadline - time.monotonic()))
                except (OSError, ValueError):
                    answered = True
                    self.kill()  # the zygote died (its worker dies with it: PR_SET_PDEATHSIG)
                    raise
                if message is not None:
                    answered = True
                    return int(message["rc"]), list(message.get("leftovers", ()))
                if poll:
                    poll()
                if time.monotonic() > deadline:
                    answered = True
                    self._abandon(pid)
                    raise WorkerTimeout(f"worker did not exit within {timeout_s:.1f} s (killed with its process group)")
        finally:
            if not answered:
                self._abandon(pid)

    def _abandon(self, pid: int) -> None:
        """Stop waiting for the running worker ``pid``: kill its group and read the zygote's answer about it,
        so that the next request's answers are its own; a zygote that does not answer in time is killed.

        Whatever ends a wait early (a timeout; ``poll`` or ``on_start`` raising, say an adapter's error while
        a held event is delivered; Ctrl-C) goes through here: the worker's ``{"rc": ...}`` would otherwise be
        read as the next request's first answer ("the worker fork server did not start a worker: {'rc': 0,
        ...}", once the abandoned worker's hold had timed out and it had finished)."""
        try:
            answer = self._receive(0.0)  # it may have exited already (its pid is then free for reuse)
            if answer is None:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                answer = self._receive(30.0)
        except (OSError, ValueError):
            answer = None
        if answer is None or "rc" not in answer:
            self.kill()


_local = threading.local()
#: Pids of this process's zygotes (never strays: see :func:`reap_strays`).
ZYGOTES: set[int] = set()
_SUBREAPER = False


def become_subreaper() -> bool:
    """Make this harness process the subreaper of its orphaned descendants and enable :func:`reap_strays`.
    For a process that runs one run at a time (a pool process): whatever the run's harness-side code
    starts is then this process's child, or becomes one when its parent exits."""
    global _SUBREAPER
    _SUBREAPER = _subreaper()
    return _SUBREAPER


def reap_strays() -> list[str]:
    """In a subreaper harness process (:func:`become_subreaper`), once a run is over: SIGKILL and reap every
    child of this process but its zygotes and multiprocessing's helpers (a daemon started by harness-side
    adapter or engine code). ``"PID COMMAND"`` each; ``[]`` elsewhere."""
    if not _SUBREAPER:
        return []
    killed = []
    for pid in _children(all_threads=True):
        if pid in ZYGOTES:
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
            if "multiprocessing" in cmd:
                continue
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            killed.append(f"{pid} {cmd[:80]}")
        except (OSError, ChildProcessError):
            continue
    return killed


def kill_zygotes() -> None:
    """SIGKILL every zygote of this process: their running workers die with them (``PR_SET_PDEATHSIG``), and a
    thread waiting for one gets ``OSError`` (the run is an error, and no other worker of it starts). For a
    command that stops (Ctrl-C, SIGTERM) while runs on its threads wait for forked workers, which no marker
    scan finds (a forked worker's ``/proc/PID/environ`` is the zygote's: its marker was set after the fork)."""
    for pid in list(ZYGOTES):
        if not _our_child(pid):  # gone (a zygote dies with the thread that started it): its pid may be another's now
            ZYGOTES.discard(pid)
            continue
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _our_child(pid: int) -> bool:
    """Whether process ``pid`` is a child of this process (Linux ``/proc``; ``True`` where it cannot be read)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return int(f.read().rsplit(b")", 1)[1].split()[1]) == os.getpid()
    except FileNotFoundError:
        return False
    except (OSError, ValueError, IndexError):
        return True


def for_this_thread() -> ForkServer:
    """This thread's zygote, started on first use (and again if it died)."""
    server = getattr(_local, "server", None)
    if server is None or not server.alive():
        server = _local.server = ForkServer()
    return server


# ---------------------------------------------------------------------------- the zygote
def _child(request: dict[str, Any]) -> None:
    """In the forked child: become a worker process and never return."""
    rc = 1
    try:
        _die_with_parent()
        os.setsid()
        out = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.close(out)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        signal.signal(signal.SIGPIPE, signal.SIG_DFL)
        os.environ.update(request["env"])
        if "exec" in request:  # a new program in this process (same pid), the zygote staying its subreaper
            try:
                os.execvpe(request["exec"][0], request["exec"], dict(os.environ))
            except OSError as exc:
                print(f"cannot start worker {request['exec'][:1]}: {exc}", file=sys.stderr)
                rc = 127
                return
        sys.argv = [request["module"], *request["argv"]]
        main = getattr(importlib.import_module(request["module"]), "main")
        try:
            rc = main(request["argv"]) or 0
        except SystemExit as exc:
            rc = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BaseException:  # noqa: BLE001 - a worker's crash is reported through its exit code and log
        traceback.print_exc()
        rc = 1
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(rc)


def _die_with_parent() -> None:
    """Have the kernel SIGKILL this process when its parent dies (Linux ``PR_SET_PDEATHSIG``): a zygote
    whose harness was killed, and a worker whose zygote was, do not outlive them. Exits at once if the
    parent is already gone."""
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        return
    if os.getppid() != parent or parent == 1:
        os._exit(1)


def _subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``):
    whatever a worker leaves running, even in a new session, becomes this process's child."""
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _children(all_threads: bool = False) -> list[int]:
    """This process's children (``all_threads``: of every thread, else of the main thread), Linux ``/proc``."""
    me = os.getpid()
    tasks = [p.name for p in Path(f"/proc/{me}/task").iterdir()] if all_threads else [str(me)]
    kids: list[int] = []
    for tid in tasks:
        try:
            kids += [int(p) for p in Path(f"/proc/{me}/task/{tid}/children").read_text().split()]
        except OSError:
            continue
    return kids


def _reap_orphans() -> list[str]:
    """SIGKILL and reap every process left under this zygote once a worker exited; ``"PID COMMAND"`` each."""
    killed: list[str] = []
    for _ in range(50):
        while True:  # collect what already exited
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid = 0
            if pid == 0:
                break
        kids = _children()
        if not kids:
            return killed
        for pid in kids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                if cmd:
                    killed.append(f"{pid} {cmd[:80]}")
            except (OSError, ChildProcessError):
                continue
    return killed


def _warm_up() -> None:
    """Do once here what every child would otherwise do first: initialise SQLite (most workers keep
    their state in it), then move every object to the collector's permanent generation
    (:func:`gc.freeze`, meant for pre-fork servers) so that a child's collections do not touch, and so
    copy, the pages it shares with this process. Measured: a reference worker's pass from a snapshot, fork
    to exit, 17.2 -> 12.3 ms (in-process: 5.1 ms)."""
    import sqlite3

    sqlite3.connect(":memory:").execute("SELECT 1").fetchone()
    gc.collect()
    gc.freeze()


def serve(preload: Sequence[str]) -> None:
    """The zygote's loop: import ``preload``, then fork one child per request line on stdin."""
    _die_with_parent()
    _subreaper()
    for name in preload:
        importlib.import_module(name)
    _warm_up()
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    warmed: set[str] = set(preload)
    while True:
        line = inp.readline()
        if not line:
            return
        request = json.loads(line)
        for name in request.get("warm", ()):
            if name not in warmed:
                warmed.add(name)
                try:
                    importlib.import_module(name)
                except Exception:  # the child imports it again and reports the error in its log
                    pass
                gc.freeze()
        pid = os.fork()
        if pid == 0:
            _child(request)
        out.write(json.dumps({"pid": pid}).encode() + b"\n")
        out.flush()
        _, status = os.waitpid(pid, 0)
        leftovers = _reap_orphans()
        out.write(json.dumps({"rc": os.waitstatus_to_exitcode(status), "leftovers": leftovers}).encode() + b"\n")
        out.flush()


if __name__ == "__main__":
    serve(sys.argv[1:])
