"""A refund agent as a team writes it: look the order up, refund it, e-mail a receipt.

The team runs it with ``graph.invoke(inp, config, durability="sync")`` because the refund must not be
issued twice: LangGraph documents sync as "changes are persisted synchronously before the next step starts".
"""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from sync_refund import payments


class State(TypedDict, total=False):
    order_id: str
    amount_cents: int
    refund: dict
    receipt: dict


def lookup(state: State) -> dict:
    return {"amount_cents": state.get("amount_cents", 0)}


def issue_refund(state: State) -> dict:
    return {"refund": payments.refund(state["order_id"], state["amount_cents"],
                                      idempotency_key=f"refund-{state['order_id']}")}


def issue_refund_nokey(state: State) -> dict:
    # the same node before the team added the key (the API call the docs show)
    return {"refund": payments.refund(state["order_id"], state["amount_cents"])}


def email_receipt(state: State) -> dict:
    return {"receipt": payments.send_email(state["order_id"], "refund-receipt",
                                           idempotency_key=f"receipt-{state['order_id']}")}


def make(issue=issue_refund) -> StateGraph:
    g = StateGraph(State)
    g.add_node("lookup", lookup)
    g.add_node("issue_refund", issue)
    g.add_node("email_receipt", email_receipt)
    g.add_edge(START, "lookup")
    g.add_edge("lookup", "issue_refund")
    g.add_edge("issue_refund", "email_receipt")
    g.add_edge("email_receipt", END)
    return g


builder = make()
builder_nokey = make(issue_refund_nokey)
