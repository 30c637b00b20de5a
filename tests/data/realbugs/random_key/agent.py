"""A refund graph as a team writes it: the node retries transient payment errors (``RetryPolicy``) and takes the
idempotency key from the SDK's helper, a fresh UUID per call (``issue_random``). After a lost response the retry sends
a new key and the customer is refunded twice, with no kill at all. ``issue_fixed`` derives the key from the order."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy

from random_key import clients


class State(TypedDict, total=False):
    order_id: str
    amount_cents: int
    refund: dict


def retryable(exc: Exception) -> bool:
    return bool(getattr(exc, "retryable", False))


def issue_random(state: State) -> dict:
    return {"refund": clients.refund(state["order_id"], state["amount_cents"], idempotency_key=clients.new_key())}


def issue_fixed(state: State) -> dict:
    return {"refund": clients.refund(state["order_id"], state["amount_cents"],
                                     idempotency_key=f"refund-{state['order_id']}")}


def make(issue) -> StateGraph:
    g = StateGraph(State)
    g.add_node("issue", issue, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, retry_on=retryable))
    g.add_edge(START, "issue")
    g.add_edge("issue", END)
    return g


builder = make(issue_random)
builder_fixed = make(issue_fixed)
