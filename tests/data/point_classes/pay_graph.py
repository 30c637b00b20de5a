"""Three interchangeable refund threads, one node each that pays (tests/integration/test_point_classes.py).

``keyed`` passes the payment's idempotency key, so a kill after the payment and before the node's checkpoint does
not pay twice; ``unkeyed`` passes none (the bug: the recovery pays again, rule side_effects.at_most_once)."""

from __future__ import annotations

from typing import TypedDict

import crashpoint
from langgraph.graph import END, START, StateGraph


@crashpoint.effect("pay", key="key")
def pay(order: str, cents: int, key: str | None = None) -> dict:
    """The payment provider (a fake): pays ``cents`` for ``order``."""
    return {"paid": order, "cents": cents}


class State(TypedDict, total=False):
    order: str
    cents: int
    paid: bool


def _builder(keyed: bool) -> StateGraph:
    def pay_node(state: State) -> dict:
        pay(state["order"], state["cents"], key=f"pay-{state['order']}" if keyed else None)
        return {"paid": True}

    builder = StateGraph(State)
    builder.add_node("pay", pay_node)
    builder.add_edge(START, "pay")
    builder.add_edge("pay", END)
    return builder


keyed = _builder(True)
unkeyed = _builder(False)
