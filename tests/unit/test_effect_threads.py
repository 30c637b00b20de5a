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
