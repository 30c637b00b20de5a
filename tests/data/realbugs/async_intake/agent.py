"""A support-intake agent as a team writes it (LangGraph's default durability, "async"):
the first node opens a ticket in the helpdesk and e-mails the customer its number, then the agent
classifies the request and drafts a reply. The team resubmits a request whose thread has no checkpoint
("it never started"), as its HTTP handler does when the client retries."""
from typing import TypedDict

import crashpoint
from langgraph.graph import END, START, StateGraph


@crashpoint.effect("open_ticket", key="idempotency_key")
def open_ticket(customer: str, subject: str, idempotency_key: str | None = None) -> dict:
    return {"ticket": f"T-{customer}", "subject": subject}


@crashpoint.effect("send_email", key="idempotency_key")
def send_email(to: str, template: str, idempotency_key: str | None = None) -> dict:
    return {"message_id": f"msg-{to}-{template}"}


class State(TypedDict, total=False):
    customer: str
    subject: str
    ticket: str
    category: str
    reply: str


def intake(state: State) -> dict:
    t = open_ticket(state["customer"], state["subject"], idempotency_key=f"ticket-{state['customer']}-{state['subject']}")
    send_email(state["customer"], "ticket-opened", idempotency_key=f"opened-{t['ticket']}")
    return {"ticket": t["ticket"]}


def classify(state: State) -> dict:
    return {"category": "billing" if "refund" in state["subject"] else "other"}


def draft_reply(state: State) -> dict:
    return {"reply": f"About {state['ticket']}: we are on it ({state['category']})."}


def make() -> StateGraph:
    g = StateGraph(State)
    g.add_node("intake", intake)
    g.add_node("classify", classify)
    g.add_node("draft_reply", draft_reply)
    g.add_edge(START, "intake")
    g.add_edge("intake", "classify")
    g.add_edge("classify", "draft_reply")
    g.add_edge("draft_reply", END)
    return g


builder = make()
