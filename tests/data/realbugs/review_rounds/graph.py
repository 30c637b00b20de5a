"""A review node that asks up to three rounds with interrupt() and notifies the reviewer each round (keyed by round):
correct code, whose default sweep must pass (tests/adapters/test_review_rounds.py)."""
from typing import TypedDict

import crashpoint
from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy, interrupt


@crashpoint.effect("notify_reviewer", key="idempotency_key")
def notify_reviewer(order_id: str, round_: int, idempotency_key: str | None = None) -> dict:
    return {"sent": round_}


@crashpoint.effect("issue_refund", key="idempotency_key")
def issue_refund(order_id: str, idempotency_key: str | None = None) -> dict:
    return {"status": "issued"}


class State(TypedDict, total=False):
    order_id: str
    answers: list
    refund: dict


def retryable(exc: Exception) -> bool:
    return bool(getattr(exc, "retryable", False)) or isinstance(exc, ConnectionError)


def review(state: State) -> dict:
    answers = []
    for r in range(1, 4):
        notify_reviewer(state["order_id"], r, idempotency_key=f"notify-{state['order_id']}-{r}")
        ans = interrupt({"round": r})
        answers.append({"round": r, "answer": ans})
        if ans.get("approved"):
            break
    return {"answers": answers}


def issue(state: State) -> dict:
    last = state["answers"][-1]["answer"]
    if last.get("approved") and last.get("round") == len(state["answers"]):
        return {"refund": issue_refund(state["order_id"], idempotency_key=f"refund-{state['order_id']}")}
    return {"refund": {"status": "not issued"}}


g = StateGraph(State)
g.add_node("review", review, retry_policy=RetryPolicy(max_attempts=3, initial_interval=0.01, retry_on=retryable))
g.add_node("issue", issue)
g.add_edge(START, "review")
g.add_edge("review", "issue")
g.add_edge("issue", END)
builder = g
