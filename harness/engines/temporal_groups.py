"""Crash groups: several server-crash runs of a sweep share one dev server and one crash of it.

A case with a server crash needs the server SIGKILLed and restarted on its database while the run's workflows wait
(:meth:`crashpoint.harness.run.target_driver._Run.crash_server`). With a server of its own per run, each such run
pays two server starts (0.6 to 0.8 CPU seconds each, about four normal runs' CPU). A **crash group** shares them:

* **Membership.** A run joins the open group when it takes its server (:meth:`GroupLease.start`), getting a namespace
  of its own on the group's server (Temporal's unit of isolation: its own workflow ids, task queues and histories;
  the server is started, ahead of need, with :data:`GROUP_SIZE` namespaces made at its launch). The group closes to
  newcomers once full or once its first member arrives at the crash: the crash never waits on a run not started yet.
* **The crash.** A member *arrives* when its run is where its case's crash happens (its workers at rest, its
  workflows waiting: where a run of its own restarts its server) and *departs* when its run ends (whatever way: the
  driver gives its server back in a ``finally``). Once every member arrived or departed, the last one to see it
  SIGKILLs the group's server and starts a new one on the same database file and port (:meth:`RunServer.restart`:
  the old pid checked gone, the new one listening): one kill and one restart for the whole group, and each arrived
  member records it as its own crash (the killed and the new pid).
* **A member that does not come.** An arrived member waits at most :data:`WAIT_SHARE` of its run's remaining budget;
  then the crash goes ahead without the members still on their way. Such a member's server crashed at a moment it
  did not choose (a worker of its may have been running): it did not test what its case claims, so its run is an
  ``error`` (:meth:`GroupLease.untested`, and :class:`MissedCrash` when it arrives after all), never a pass or a fail.

From a member's own point of view the crash is the same event as on a server of its own: its workers at rest, its
workflows waiting, the server gone and back on the same database. Only the wait before it (the server alive, no worker
of the run) and the other namespaces on the server differ. ``CRASHPOINT_TEMPORAL_GROUPS`` (:data:`ENV`) switches it:
``0`` gives each server-crash run a server of its own again (started ahead, :mod:`.temporal_ahead`), ``N`` caps a
group at N members (default :data:`GROUP_SIZE`).
"""

from __future__ import annotations

import atexit
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Callable, Protocol

from crashpoint.harness.engines import temporal_ahead
from crashpoint.harness.engines.temporal import TEMPORAL_DB, RunServer

#: Members a group holds at most: the namespaces its server is started with (one per member).
GROUP_SIZE = 10
#: Share of its run's remaining budget an arrived member waits at most for the others; the rest is left for its run.
WAIT_SHARE = 0.5
#: The environment switch: ``0`` (no groups: a server of its own per server-crash run), or the members at most.
ENV = "CRASHPOINT_TEMPORAL_GROUPS"


def group_size() -> int:
    """Members per group from :data:`ENV` (``0``: no groups), :data:`GROUP_SIZE` when unset.

    Raises:
        ValueError: it is set to something other than a whole number >= 0.
    """
    text = os.environ.get(ENV, "").strip()
    size = int(text) if text else GROUP_SIZE
    if size < 0:
        raise ValueError(f"{ENV} must be 0 (no crash groups) or the members per group, got {text!r}")
    return size


class MissedCrash(RuntimeError):
    """The group's server crashed without this member (it had not arrived within the others' wait): the member did
    not test what its case claims (its run is an ``error``)."""


class Restartable(Protocol):
    """What a group crashes: ``restart()`` (SIGKILL, a new server on the same state, verified) and ``pids`` (every
    server process started, the live one last)."""

    pids: list[int]

    def restart(self) -> None: ...


class CrashGroup:
    """The barrier of one group over a server (:class:`Restartable`): members join, arrive at the crash, depart.

    Thread-safe; knows nothing of Temporal but ``server.restart()`` and ``server.pids``.

    Attributes:
        server: what it crashes. capacity: members at most. members: members joined so far (numbered 0, 1, ...).
        arrived / departed: member numbers. closed: no newcomers. crash: ``(killed pid, new pid)`` once it crashed.
        missed: members neither arrived nor departed when the crash went ahead. error: what the restart raised.
    """

    def __init__(self, server: Restartable, capacity: int, restart: Callable[[], None] | None = None) -> None:
        self.server, self.capacity = server, capacity
        self._restart = restart or server.restart  # the crash: SIGKILL, a new server on the same state (verified)
        self.members = 0
        self.arrived: set[int] = set()
        self.departed: set[int] = set()
        self.missed: set[int] = set()
        self.closed = False
        self.crashing = False
        self.crash: tuple[int, int] | None = None
        self.error: BaseException | None = None
        self._cond = threading.Condition()

    def join(self) -> int | None:
        """A new member's number, or ``None`` when the group is closed (full, or a member arrived)."""
        with self._cond:
            if self.closed or self.members >= self.capacity:
                self.closed = True
                return None
            self.members += 1
            return self.members - 1

    def arrive(self, member: int, wait_s: float | None) -> tuple[int, int]:
        """``member`` is at the crash: wait until every member arrived or departed (at most ``wait_s`` seconds; then
        the crash goes ahead without those on their way), the crash done by whichever member saw that first.

        Returns:
            ``(killed pid, new pid)`` of the group's crash.

        Raises:
            MissedCrash: the group crashed before ``member`` arrived.
            Exception: what the server's restart raised (every member waiting gets it).
        """
        with self._cond:
            self.closed = True
            if self.crash is not None or self.crashing:
                raise MissedCrash(self.missed_text())
            self.arrived.add(member)
            self._cond.notify_all()
            deadline = None if wait_s is None else time.monotonic() + wait_s
            while not self.crashing:
                left = None if deadline is None else deadline - time.monotonic()
                if self.arrived | self.departed >= set(range(self.members)) or (left is not None and left <= 0):
                    self.crashing = True
                    self.missed = set(range(self.members)) - self.arrived - self.departed
                    break
                self._cond.wait(left)
            else:  # another member crashes it
                while self.crash is None and self.error is None:
                    self._cond.wait()
                return self._result()
            old = self.server.pids[-1]
        try:
            self._restart()
        except BaseException as exc:  # noqa: BLE001 - handed to every member, raised below
            error: BaseException | None = exc
        else:
            error = None
        with self._cond:
            self.crash, self.error = (old, self.server.pids[-1]), error
            self._cond.notify_all()
            return self._result()

    def _result(self) -> tuple[int, int]:
        if self.error is not None:
            raise self.error
        assert self.crash is not None
        return self.crash

    def depart(self, member: int) -> bool:
        """``member``'s run ended; ``True`` when the group is spent (closed, every member departed): the server may
        be killed."""
        with self._cond:
            self.departed.add(member)
            self._cond.notify_all()
            return self.closed and len(self.departed) == self.members

    def close(self) -> bool:
        """Take no newcomers; ``True`` when no member is in it any more (its server may be killed)."""
        with self._cond:
            self.closed = True
            return len(self.departed) == self.members

    def missed_text(self) -> str:
        """Why a member the crash went ahead without did not test what it claims."""
        killed = f" (pid {self.crash[0]}, restarted as {self.crash[1]})" if self.crash else ""
        return (f"the crash group's server{killed} was SIGKILLed before this run came to its server crash (the group "
                f"waited for it in vain): its server crashed at a moment it did not choose, maybe under one of its "
                f"workers, so the run did not test its case's server crash")


_lock = threading.Lock()
_open: CrashGroup | None = None  # the group newcomers join
_live: set[CrashGroup] = set()  # every group whose server runs
#: Restarts the groups' servers: a thread that lives as long as the process (``PR_SET_PDEATHSIG`` follows the thread
#: that started a server: restarted from a run's thread, the new server would die with that thread, under the others).
_restarter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crashpoint-temporal-crash")


def _namespaces(size: int) -> tuple[str, ...]:
    """The namespaces of a group's server (each server has a database of its own: the same names on every one)."""
    return tuple(f"crashpoint-group-{n}" for n in range(size))


class GroupLease:
    """A run's membership of a crash group, with a run server's interface: ``start()`` joins the open group (or opens
    one, its server taken from the pool started ahead), ``restart(wait_s)`` arrives at the group's crash (see
    :meth:`CrashGroup.arrive`), ``kill()`` departs (the server is killed, verified, once the group is spent);
    ``address``, ``namespace`` (the run's own), ``pids`` (the group's server's), ``database``.

    Raises:
        RuntimeError: (``start``) no server could be started. MissedCrash: (``restart``) see CrashGroup.arrive.
    """

    def __init__(self, run_dir: Path, size: int | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.size = size or group_size() or 1
        self.group: CrashGroup | None = None
        self.member = -1
        self.namespace = ""
        self.pids: list[int] = []
        self.departed = False

    @property
    def server(self) -> RunServer:
        """The group's server."""
        assert self.group is not None
        server = self.group.server
        assert isinstance(server, RunServer)
        return server

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the group's server."""
        return self.server.address

    @property
    def database(self) -> Path:
        """The group's database file (every member's namespace in it; removed with the group)."""
        return self.server.run_dir / TEMPORAL_DB

    def start(self) -> "GroupLease":
        global _open
        with _lock:
            member = _open.join() if _open is not None else None
            if member is None:  # none open, or it closed meanwhile: the next group, its server started ahead
                server = temporal_ahead.take(_namespaces(self.size), keep=1)
                _open = CrashGroup(server, self.size, lambda s=server: _restarter.submit(s.restart).result())
                _live.add(_open)
                member = _open.join()
                assert member is not None
            self.group, self.member = _open, member
        self.namespace = _namespaces(self.size)[member]
        self.pids = self.server.pids  # the same list: the group's restart appends the new pid
        return self

    def restart(self, wait_s: float | None = None) -> None:
        """Arrive at the group's crash and come back once it happened (at most ``wait_s`` s waiting for others)."""
        assert self.group is not None
        self.group.arrive(self.member, wait_s)

    def kill(self) -> None:
        """Depart; the last member of a closed group kills its server (verified) and removes its folder."""
        group = self.group
        if group is None or self.departed:
            return
        self.departed = True
        if group.depart(self.member):
            _retire(group)

    def notes(self) -> list[str]:
        """What the run says of its group (once it departed): how many runs shared its crash."""
        group = self.group
        if group is None or group.crash is None or self.member in group.missed:
            return []
        return [f"its server crash was shared by a crash group of {group.members} run(s) on one server, each in a "
                f"namespace of its own (this run's: {self.namespace}): {len(group.arrived)} of them at rest there, "
                f"{len(group.missed)} did not come"]

    def untested(self) -> list[str]:
        """Why the run did not test what it claims: the crash went ahead without it (``[]``: it did not)."""
        group = self.group
        return [group.missed_text()] if group is not None and self.member in group.missed else []


def _retire(group: CrashGroup) -> None:
    """Kill a spent group's server (verified) and remove its folder."""
    global _open
    with _lock:
        if group not in _live:
            return  # retired already (its last departure and a sweep's end at once)
        _live.discard(group)
        if _open is group:
            _open = None
    temporal_ahead.drop(group.server)  # type: ignore[arg-type]


def close_groups() -> int:
    """Close every group and kill the servers of those no run is in (a sweep's end); returns how many were killed.
    A group a run is still in dies with its last member."""
    global _open
    with _lock:
        _open = None
        idle = [group for group in list(_live) if group.close()]
    for group in idle:
        _retire(group)
    return len(idle)


def _close_all() -> None:
    """At exit: every group's server, a member's included (its folder removed too)."""
    with _lock:
        every = list(_live)
        _live.clear()
    for group in every:
        temporal_ahead.drop(group.server)  # type: ignore[arg-type]


atexit.register(_close_all)
