"""The engine position follows the team's threads (issue 27 item 3): an effect called in a thread that code running
in a node started (``threading.Thread``, ``threading.Timer``, a ``ThreadPoolExecutor`` task, ``asyncio.to_thread``)
is placed in that node, where the engine's own context (a thread-local here, as DBOS's step record; LangGraph's config
and Temporal's activity info are context variables, which threads do not copy either) knows nothing. Before, such a
call was placed in thread ``None``. A pool thread reused by code outside any node places nothing there."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import crashpoint
import crashpoint.api as api
from crashpoint.harness.engines.effects import EffectSession, read_calls

_engine = threading.local()  # the engine's own record of the position: this thread only


def _where() -> dict:
    return dict(getattr(_engine, "at", None) or {})


@pytest.fixture()
def session(tmp_path: Path):
    s = EffectSession(tmp_path / "ledger.db", lambda point: None, _where, lambda thread: True)
    api._install(s)
    yield s
    api._install(None)


@crashpoint.effect("pay", key="k")
def pay(order: str, k: str | None = None) -> dict:
    return {"paid": order}


def _in_node(node: str, fn) -> None:
    """Run ``fn`` in a new thread whose engine position is ``o1@node`` (as an engine's worker thread would be)."""
    def body() -> None:
        _engine.at = {"thread": "o1", "node": node, "step": 2}
        fn()
    t = threading.Thread(target=body)
    t.start()
    t.join()


def test_effects_from_threads_a_node_starts_are_placed_in_the_node(session) -> None:
    pool = ThreadPoolExecutor(max_workers=1)

    def node() -> None:
        pool.submit(pay, "1", k="a").result()
        t = threading.Thread(target=pay, args=("2",), kwargs={"k": "b"})
        t.start()
        t.join()
        timer = threading.Timer(0.01, pay, args=("3",), kwargs={"k": "c"})
        timer.start()
        timer.join()
        asyncio.run(asyncio.to_thread(pay, "4", k="d"))

    _in_node("issue", node)
    pool.submit(pay, "5", k="e").result()  # the same pool thread, used outside any node: no position
    placed = [(c.key, c.thread, c.node, c.step) for c in read_calls(session.ledger)]
    assert placed == [("a", "o1", "issue", 2), ("b", "o1", "issue", 2), ("c", "o1", "issue", 2),
                      ("d", "o1", "issue", 2), ("e", None, None, None)], placed
    pool.shutdown()


def test_the_engines_own_position_comes_first(session) -> None:
    """A thread where the engine knows its position (LangGraph's own branch threads copy its context) keeps it."""
    def node() -> None:
        def branch() -> None:
            _engine.at = {"thread": "o1", "node": "notify", "step": 3}
            pay("6", k="f")
        t = threading.Thread(target=branch)
        t.start()
        t.join()

    _in_node("issue", node)
    assert [(c.thread, c.node) for c in read_calls(session.ledger)] == [("o1", "notify")]


def _in_thread_node(thread: str, fn) -> None:
    """Run ``fn`` in a new thread whose engine position is ``THREAD@issue``."""
    def body() -> None:
        _engine.at = {"thread": thread, "node": "issue", "step": 2}
        fn()
    t = threading.Thread(target=body)
    t.start()
    t.join()


def test_a_thread_pool_task_takes_the_position_of_the_code_that_submitted_it(session) -> None:
    """attack 27 N3: a lazily made global ``multiprocessing.pool.ThreadPool`` used from two threads' nodes. Its worker
    threads, started in o1's node, kept o1's position, so o2's charge was placed in o1 (a false
    ``target.expected_effects`` on correct code); each task now takes its submitter's position (apply, apply_async,
    map, starmap, imap, imap_unordered), and none outside any node."""
    from multiprocessing.pool import ThreadPool

    pools: list[ThreadPool] = []

    def pool() -> ThreadPool:
        if not pools:
            pools.append(ThreadPool(1))
        return pools[0]

    _in_thread_node("o1", lambda: pool().apply(pay, ("1",), {"k": "a"}))
    _in_thread_node("o2", lambda: pool().apply(pay, ("2",), {"k": "b"}))
    _in_thread_node("o3", lambda: pool().map(lambda o: pay(o, k="c"), ["3"]))
    _in_thread_node("o4", lambda: pool().starmap(pay, [("4", "d")]))
    _in_thread_node("o5", lambda: list(pool().imap(lambda o: pay(o, k="e"), ["5"])))
    _in_thread_node("o6", lambda: list(pool().imap_unordered(lambda o: pay(o, k="f"), ["6"])))
    _in_thread_node("o7", lambda: pool().apply_async(pay, ("7",), {"k": "g"}).get())
    pool().apply(pay, ("8",), {"k": "h"})  # outside any node: no position
    placed = [(c.key, c.thread) for c in read_calls(session.ledger)]
    assert placed == [("a", "o1"), ("b", "o2"), ("c", "o3"), ("d", "o4"), ("e", "o5"), ("f", "o6"), ("g", "o7"),
                      ("h", None)], placed
    pool().terminate()


def test_a_thread_a_node_started_keeps_no_stale_position_once_the_node_ended(session) -> None:
    """A long-lived thread that o1's node started (a queue consumer made on first use) and that works for o2's node
    after o1's node returned: its call is not placed in o1 (before: it was); the engine's context here knows nothing,
    so it is unplaced. While o1's node runs, its calls are o1's."""
    import queue

    jobs: queue.Queue = queue.Queue()
    done: queue.Queue = queue.Queue()

    def consume() -> None:
        while (job := jobs.get()) is not None:
            pay(job, k=job)
            done.put(job)

    def first() -> None:
        threading.Thread(target=consume, daemon=True).start()
        jobs.put("1")
        done.get()

    def second() -> None:
        jobs.put("2")
        done.get()

    _in_thread_node("o1", first)
    _in_thread_node("o2", second)
    jobs.put(None)
    placed = [(c.key, c.thread) for c in read_calls(session.ledger)]
    assert placed == [("1", "o1"), ("2", None)], placed
