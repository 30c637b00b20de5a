"""The barrier of a crash group (harness/engines/temporal_groups.py) with threads and a fake server: one restart for
the whole group, only once every member arrived or departed; a member that does not come is left out after the
others' wait, and its run is told so."""

from __future__ import annotations

import threading
import time

import pytest

from crashpoint.harness.engines.temporal_groups import ENV, CrashGroup, MissedCrash, group_size


class FakeServer:
    """A server whose restart appends a new pid and records who had arrived by then."""

    def __init__(self, group_of: list[CrashGroup] | None = None) -> None:
        self.pids = [100]
        self.restarts: list[set[int]] = []
        self.group_of = group_of if group_of is not None else []

    def restart(self) -> None:
        self.restarts.append(set(self.group_of[0].arrived) if self.group_of else set())
        time.sleep(0.05)
        self.pids.append(self.pids[-1] + 1)


def _group(capacity: int = 4) -> tuple[CrashGroup, FakeServer]:
    holder: list[CrashGroup] = []
    server = FakeServer(holder)
    group = CrashGroup(server, capacity)
    holder.append(group)
    return group, server


def _arrive(group: CrashGroup, member: int, wait_s: float | None, results: dict[int, object]) -> threading.Thread:
    def go() -> None:
        try:
            results[member] = group.arrive(member, wait_s)
        except Exception as exc:  # noqa: BLE001 - what the member's run would see
            results[member] = exc
    thread = threading.Thread(target=go)
    thread.start()
    return thread


def test_every_member_at_the_crash_then_one_restart_for_all() -> None:
    group, server = _group()
    members = [group.join() for _ in range(3)]
    assert members == [0, 1, 2]
    results: dict[int, object] = {}
    first = _arrive(group, 0, 30, results)
    time.sleep(0.1)
    assert group.join() is None and group.closed  # closed once its first member arrived
    assert server.restarts == [] and first.is_alive()  # waits for the two on their way
    second = _arrive(group, 1, 30, results)
    time.sleep(0.1)
    assert server.restarts == []
    third = _arrive(group, 2, 30, results)
    for t in (first, second, third):
        t.join(5)
    assert server.restarts == [{0, 1, 2}]  # once, with every member at rest
    assert results == {0: (100, 101), 1: (100, 101), 2: (100, 101)} and group.missed == set()


def test_a_departed_member_is_not_waited_for_and_its_departure_can_complete_the_group() -> None:
    group, server = _group()
    for _ in range(3):
        group.join()
    assert group.depart(1) is False  # its run ended before the crash (it never needed it)
    results: dict[int, object] = {}
    waiting = _arrive(group, 0, 30, results)
    time.sleep(0.1)
    assert server.restarts == []
    assert group.depart(2) is False  # the last one on its way leaves: the waiting member crashes the server
    waiting.join(5)
    assert results == {0: (100, 101)} and server.restarts == [{0}]
    assert group.depart(0) is True  # closed, every member gone: the server may be killed


def test_a_member_that_never_arrives_is_left_out_after_the_wait_and_told_so() -> None:
    group, server = _group()
    for _ in range(3):
        group.join()
    results: dict[int, object] = {}
    began = time.monotonic()
    a, b = _arrive(group, 0, 0.5, results), _arrive(group, 1, 60, results)
    a.join(5), b.join(5)
    assert 0.4 < time.monotonic() - began < 3  # the shortest wait of those arrived bounds the crash
    assert results == {0: (100, 101), 1: (100, 101)} and server.restarts == [{0, 1}]
    assert group.missed == {2}
    with pytest.raises(MissedCrash, match="did not test its case's server crash"):
        group.arrive(2, 30)  # it came after all: the crash it meant to test has happened without it
    assert "pid 100, restarted as 101" in group.missed_text()


def test_a_group_of_one_crashes_at_once() -> None:
    group, server = _group(capacity=1)
    assert group.join() == 0 and group.join() is None  # full
    assert group.arrive(0, 30) == (100, 101) and server.restarts == [{0}]


def test_a_restart_that_fails_fails_every_member_waiting() -> None:
    class Broken(FakeServer):
        def restart(self) -> None:
            raise RuntimeError("temporal dev server did not listen")

    group = CrashGroup(Broken(), 2)
    group.join(), group.join()
    results: dict[int, object] = {}
    threads = [_arrive(group, n, 30, results) for n in (0, 1)]
    for t in threads:
        t.join(5)
    assert [type(results[n]).__name__ for n in (0, 1)] == ["RuntimeError", "RuntimeError"]


def test_the_switch_reads_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV, raising=False)
    assert group_size() == 10
    monkeypatch.setenv(ENV, "0")
    assert group_size() == 0
    monkeypatch.setenv(ENV, "-1")
    with pytest.raises(ValueError, match=ENV):
        group_size()
