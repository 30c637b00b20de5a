"""Servers of a run's own, started ahead: a run whose case crashes the server gets one already listening.

A case with a server crash needs a dev server of the run's own (the crash kills it, a new one starts on the same
database file). Started when the run begins, the server costs the run its start (0.6 to 1.5 s to listen under load)
and then slows the run's first workflow tasks with its own start-up work (about 3 s, most of its 0.8 to 1.4 CPU
seconds). :func:`ahead` hands out a server from a small pool (:data:`AHEAD`) of lean servers
(:data:`~crashpoint.harness.engines.temporal.LEAN_CONFIG`) started in the background, **each on a fresh copy of the
template database in a folder of its own, handed out once and never returned to the pool**; every hand-out starts
the next one. The run's database and server log are moved into the run folder once the run killed its server.

Pool servers are started from the long-lived starter thread (``PR_SET_PDEATHSIG`` follows it: they die with the
process) and killed (verified) by :func:`close_ahead` (a sweep's end) or at exit. A crash group's server
(:mod:`.temporal_groups`) comes from a pool of its own (:func:`take`: servers started with the group's namespaces).
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
_pool: list[Future[RunServer]] = []  # servers with no namespace but ``default``
#: The pools, by the namespaces their servers are started with (``--namespace``): ``()`` is :data:`_pool`.
_pools: dict[tuple[str, ...], list[Future[RunServer]]] = {(): _pool}


def _fresh(namespaces: tuple[str, ...] = ()) -> RunServer:
    """A lean server (with ``namespaces`` made at its launch) on a fresh template copy in a new folder under the temp
    folder (removed if it fails)."""
    folder = Path(tempfile.mkdtemp(prefix="crashpoint-temporal-ahead-"))
    try:
        return RunServer(folder, namespaces=namespaces, lean=True).start()
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise


def take(namespaces: tuple[str, ...] = (), keep: int | None = None) -> RunServer:
    """The oldest server of the pool of servers started with ``namespaces`` (a new one when that pool is empty or its
    server died), the pool topped up to ``keep`` servers (default :data:`AHEAD`). The caller owns the server: it
    kills it (:meth:`RunServer.kill`) and removes its folder (``server.run_dir``).

    Raises:
        RuntimeError: no server could be started (see RunServer.start).
    """
    with _lock:
        pool = _pools.setdefault(namespaces, [])
        future = pool.pop(0) if pool else _starter.submit(_fresh, namespaces)
        while len(pool) < (AHEAD if keep is None else keep):
            pool.append(_starter.submit(_fresh, namespaces))
    server = future.result()
    if server.proc is None or server.proc.poll() is not None:  # died while it waited: never hand out a dead one
        drop(server)
        server = _starter.submit(_fresh, namespaces).result()
    return server


def drop(server: RunServer) -> None:
    """SIGKILL ``server`` (verified) and remove its folder."""
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
        self.server = take()
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
    """Kill (verified) and remove every server of the pools not handed out; returns how many."""
    with _lock:
        every = [f for pool in _pools.values() for f in pool]
        for pool in _pools.values():
            pool.clear()
    killed = 0
    for future in every:
        try:
            server = future.result()
        except Exception:  # noqa: BLE001 - it never started: its folder is already gone
            continue
        drop(server)
        killed += 1
    return killed


atexit.register(close_ahead)
