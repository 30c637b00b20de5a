"""Issue 28 item 5: the approval node e-mails the reviewer, then calls ``interrupt()``; the team's mail helper stamps a
fresh idempotency key on every send. LangGraph runs the node again from its first line when the answer comes, so the
reviewer gets the mail twice in every run, the golden run included. The fix: the mail in a node of its own, keyed."""
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from random_key import clients


class State(TypedDict, total=False):
    order_id: str
    amount_cents: int
    approved: bool
    refund: dict


def approve_mail_first(state: State) -> dict:
    clients.send_email("reviewer@shop", f"review-{state['order_id']}", idempotency_key=clients.new_key())
    answer = interrupt({"question": f"Refund {state['amount_cents']} for order {state['order_id']}?"})
    return {"approved": bool(answer.get("approved"))}


def ask_reviewer(state: State) -> dict:
    clients.send_email("reviewer@shop", f"review-{state['order_id']}", idempotency_key=f"review-{state['order_id']}")
    return {}


def approve_only(state: State) -> dict:
    answer = interrupt({"question": f"Refund {state['amount_cents']} for order {state['order_id']}?"})
    return {"approved": bool(answer.get("approved"))}


def issue(state: State) -> dict:
    if not state.get("approved"):
        return {}
    return {"refund": clients.refund(state["order_id"], state["amount_cents"],
                                     idempotency_key=f"refund-{state['order_id']}")}


def make(fixed: bool) -> StateGraph:
    g = StateGraph(State)
    if fixed:
        g.add_node("ask_reviewer", ask_reviewer)
        g.add_node("approve", approve_only)
        g.add_edge(START, "ask_reviewer")
        g.add_edge("ask_reviewer", "approve")
    else:
        g.add_node("approve", approve_mail_first)
        g.add_edge(START, "approve")
    g.add_node("issue", issue)
    g.add_edge("approve", "issue")
    g.add_edge("issue", END)
    return g


builder = make(False)
builder_fixed = make(True)
