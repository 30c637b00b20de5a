"""Servers of a run's own, started ahead: a run whose case crashes the server gets one already listening.

A case with a server crash needs a dev server of the run's own (the crash kills it, a new one starts on the same
database file). Started when the run begins, the server costs the run its start (0.6 to 1.5 s to listen under load)
and then slows the run's first workflow tasks with its own start-up work (about 3 s, most of its 0.8 to 1.4 CPU
seconds). :func:`ahead` hands out a server from a small pool (:data:`AHEAD`) of lean servers
(:data:`~crashpoint.harness.engines.temporal.LEAN_CONFIG`) started in the background, **each on a fresh copy of the
template database in a folder of its own, handed out once and never returned to the pool**; every hand-out starts
the next one. The run's database and server log are moved into the run folder once the run killed its server.

Pool servers are started from the long-lived starter thread (``PR_SET_PDEATHSIG`` follows it: they die with the
process) and killed (verified) by :func:`close_ahead` (a sweep's end) or at exit.
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path

from crashpoint.harness.engines.temporal import SERVER_LOG, TEMPORAL_DB, RunServer, _starter

#: Servers kept started ahead (or starting): a sweep hands one out every 1 to 3 s with 6 runs at once.
AHEAD = 3

_lock = threading.Lock()
_pool: list[Future[RunServer]] = []


def _fresh() -> RunServer:
    """A lean server on a fresh template copy in a new folder under the temp folder (removed if it fails)."""
    folder = Path(tempfile.mkdtemp(prefix="crashpoint-temporal-ahead-"))
    try:
        return RunServer(folder, lean=True).start()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def _take() -> RunServer:
    """The oldest server of the pool (a new one when the pool is empty or its server died), the pool topped up."""
    with _lock:
        future = _pool.pop(0) if _pool else _starter.submit(_fresh)
        while len(_pool) < AHEAD:
            _pool.append(_starter.submit(_fresh))
    server = future.result()
    if server.proc is None or server.proc.poll() is not None:  # died while it waited: never hand out a dead one
        _drop(server)
        server = _starter.submit(_fresh).result()
    return server


def _drop(server: RunServer) -> None:
    try:
        server.kill()
    finally:
        shutil.rmtree(server.run_dir, ignore_errors=True)


class AheadServer:
    """A run's own server taken from the pool, with :class:`~crashpoint.harness.engines.temporal.RunServer`'s
    interface: ``start()`` takes one (waits if it is still starting), ``restart()`` (a server crash: SIGKILL, a new
    server on the same database file and port), ``kill()`` (SIGKILL of its group, the pid checked gone, then its
    ``temporal.db`` and log moved to ``run_dir``), ``address``, ``namespace`` (``default``), ``pids``.

    Attributes:
        run_dir: the run folder. ``server``: the RunServer taken (``None`` before ``start``); its ``run_dir`` is the
            folder holding the database while the server runs.

    Raises:
        RuntimeError: (``start``) no server could be started (see RunServer.start).
    """

    namespace = RunServer.namespace

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.server: RunServer | None = None
        self.pids: list[int] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        assert self.server is not None
        return self.server.address

    @property
    def database(self) -> Path:
        """The database file the server runs on (in the pool folder until :meth:`kill`)."""
        assert self.server is not None
        return self.server.run_dir / TEMPORAL_DB

    def start(self) -> "AheadServer":
        self.server = _take()
        self.pids = self.server.pids  # the same list: a restart's pid is appended to it
        return self

    def restart(self) -> None:
        assert self.server is not None
        self.server.restart()

    def kill(self) -> None:
        server = self.server
        if server is None:
            return
        server.kill()
        for name in (TEMPORAL_DB, SERVER_LOG):
            if (server.run_dir / name).exists():
                shutil.move(server.run_dir / name, self.run_dir / name)
        shutil.rmtree(server.run_dir, ignore_errors=True)


def ahead(run_dir: Path) -> AheadServer:
    """A run's own server from the pool of servers started ahead (not taken yet: call ``start()``)."""
    return AheadServer(run_dir)


def close_ahead() -> int:
    """Kill (verified) and remove every server of the pool not handed out; returns how many."""
    with _lock:
        every = list(_pool)
        _pool.clear()
    killed = 0
    for future in every:
        try:
            server = future.result()
        except Exception:  # noqa: BLE001 - it never started: its folder is already gone
            continue
        _drop(server)
        killed += 1
    return killed


atexit.register(close_ahead)
