"""The refund team's tests: plain unit tests of the graph, and its chaos tests (``pytest --chaos``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import MemorySaver
from langgraph.types import Command

from langgraph_refund.graph import builder

TARGET = Path(__file__).resolve().parents[1] / "target.yaml"


def test_an_approved_refund_is_issued_and_the_customer_told() -> None:
    app = builder.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    waiting = app.invoke({"order_id": "7", "amount_cents": 900, "reason": "damaged"}, config)
    assert waiting["__interrupt__"][0].value["draft"]["amount_cents"] == 900
    done = app.invoke(Command(resume={"approved": True}), config)
    assert done["refund"]["status"] == "issued" and "notified:refunded" in done["log"]


def test_a_denied_refund_is_revised_and_asked_again() -> None:
    app = builder.compile(checkpointer=MemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    app.invoke({"order_id": "7", "amount_cents": 900, "reason": "late"}, config)
    again = app.invoke(Command(resume={"approved": False}), config)
    assert again["__interrupt__"][0].value["draft"]["amount_cents"] == 450


def test_the_refund_agent_survives_a_kill_at_every_crash_point(crashpoint_sweep) -> None:
    """Every case of target.yaml, with LangGraph's durability="sync": a real SIGKILL at each crash point."""
    result = crashpoint_sweep(TARGET, durability=["sync"], workers=2)
    assert result.passed, result.summary


def test_async_durability_loses_the_refund_step(crashpoint_sweep) -> None:
    """The default durability ("async") is known to lose a step's checkpoint when the next step has begun."""
    result = crashpoint_sweep(TARGET, cases=["approved"], durability=["async"], write_latency_ms=300,
                              crash_points=["node:order-1001@notify_done"], repeat=3, workers=2)
    assert result.findings().get("target.repeats_explained") == 3, result.summary
