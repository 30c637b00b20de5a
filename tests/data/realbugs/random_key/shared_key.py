"""Issue 28 item 5: the refund key is built from the customer and the day ("one refund per customer per day" was the
thinking), so a customer's second order refunded the same day reuses the first order's key with other arguments. A
payments API refuses that (conflict); crashpoint's ledger answers the same by default. ``issue_fixed`` keys by order."""
import datetime
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

from random_key import clients


class State(TypedDict, total=False):
    customer_id: str
    order_id: str
    amount_cents: int
    refund: dict


def issue_shared(state: State) -> dict:
    key = f"refund-{state['customer_id']}-{datetime.date.today().isoformat()}"
    return {"refund": clients.refund(state["order_id"], state["amount_cents"], idempotency_key=key)}


def issue_fixed(state: State) -> dict:
    return {"refund": clients.refund(state["order_id"], state["amount_cents"],
                                     idempotency_key=f"refund-{state['order_id']}")}


def issue_shared_replaying(state: State) -> dict:
    key = f"refund-{state['customer_id']}-{datetime.date.today().isoformat()}"
    return {"refund": clients.refund_replaying(state["order_id"], state["amount_cents"], idempotency_key=key)}


def make(issue) -> StateGraph:
    g = StateGraph(State)
    g.add_node("issue", issue)
    g.add_edge(START, "issue")
    g.add_edge("issue", END)
    return g


builder = make(issue_shared)
builder_fixed = make(issue_fixed)
builder_replaying = make(issue_shared_replaying)
