"""The refund agent: route -> (draft -> approval with re-ask on denial -> issue -> notify || notify "received").

* ``route`` decides whether the request qualifies for a refund at all;
* ``draft`` drafts the refund (``services.draft_refund``, keyed by order and draft version);
* ``approve`` asks a human (``interrupt()``); a denial goes to ``revise``, which lowers the amount and
  drafts again, then asks again (at most :data:`MAX_ASKS` times). An answer that names an earlier ask
  (``{"approved": true, "ask": 1}`` arriving while ask 2 waits: the reviewer clicked late) is not an answer
  to this ask: the node asks again;
* ``notify_received`` runs in parallel with the drafting: it tells the customer the request is in review;
* ``issue`` issues the approved draft (``services.issue_refund``, keyed by the draft), retried on
  transient payment errors (after a rate limit's ``retry_after``) and on an answer that is not a refund (an empty or
  garbled body: the same key gets the real answer);
* ``notify_done`` / ``notify_rejected`` tell the customer how it ended.
"""

from __future__ import annotations

import operator
import time
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_refund import services

try:  # langgraph >= 0.2.24 spells it retry_policy; older releases retry
    from langgraph.types import RetryPolicy
except ImportError:  # pragma: no cover - old releases
    from langgraph.pregel import RetryPolicy

MAX_ASKS = 3
#: Refunds above this need a human's approval.
APPROVAL_ABOVE_CENTS = 0


class RefundState(TypedDict, total=False):
    order_id: str
    amount_cents: int
    reason: str
    decision: str
    current_draft: dict[str, Any]
    version: int
    asks: int
    approval: dict[str, Any]
    refund: dict[str, Any]
    log: Annotated[list[str], operator.add]


def route(state: RefundState) -> dict[str, Any]:
    qualifies = state.get("reason") in ("damaged", "late", "missing") and state["amount_cents"] > 0
    return {"decision": "refund" if qualifies else "reject", "log": [f"route:{state.get('reason')}"]}


def draft(state: RefundState) -> dict[str, Any]:
    version = state.get("version", 0) + 1
    made = services.draft_refund(state["order_id"], state["amount_cents"],
                                 idempotency_key=f"draft-{state['order_id']}-v{version}")
    return {"current_draft": made, "version": version, "log": [f"draft:v{version}"]}


def approve(state: RefundState) -> dict[str, Any]:
    ask = state.get("asks", 0) + 1
    answer = interrupt({"question": "Issue this refund?", "draft": state["current_draft"], "ask": ask})
    if answer.get("ask", ask) != ask:  # a reviewer's answer to an earlier ask, arriving late: not an answer to this one
        return {"approval": {"stale": True}, "log": [f"approval:stale-ask-{answer.get('ask')}"]}
    return {"approval": dict(answer), "asks": ask, "log": [f"approval:{'yes' if answer.get('approved') else 'no'}"]}


def after_approval(state: RefundState) -> str:
    if state["approval"].get("stale"):
        return "approve"  # ask again: the answer that came was for another draft
    if state["approval"].get("approved"):
        return "issue"
    return "revise" if state["asks"] < MAX_ASKS else "notify_rejected"


def revise(state: RefundState) -> dict[str, Any]:
    return {"amount_cents": max(1, state["amount_cents"] // 2), "log": ["revise"]}


def notify_received(state: RefundState) -> dict[str, Any]:
    services.notify_customer(state["order_id"], "received", idempotency_key=f"notify-{state['order_id']}-received")
    return {"log": ["notified:received"]}


class UnreadableAnswer(RuntimeError):
    """The payments API answered something that is not a refund (an empty body, a proxy's error page): the refund
    may have been issued all the same, so the node is retried and asks again with the same idempotency key."""

    retryable = True


def issue(state: RefundState) -> dict[str, Any]:
    draft_ = state["current_draft"]
    try:
        refund = services.issue_refund(draft_["draft_id"], draft_["amount_cents"],
                                       idempotency_key=f"refund-{draft_['draft_id']}")
    except Exception as exc:
        time.sleep(getattr(exc, "retry_after", None) or 0)  # a 429 says how long to wait before the retry
        raise
    if not (isinstance(refund, dict) and refund.get("status") == "issued"):
        raise UnreadableAnswer(f"issue_refund answered {str(refund)[:80]!r}, not a refund")
    return {"refund": refund, "log": ["issued"]}


def notify_done(state: RefundState) -> dict[str, Any]:
    services.notify_customer(state["order_id"], "refunded", idempotency_key=f"notify-{state['order_id']}-refunded")
    return {"log": ["notified:refunded"]}


def notify_rejected(state: RefundState) -> dict[str, Any]:
    services.notify_customer(state["order_id"], "rejected", idempotency_key=f"notify-{state['order_id']}-rejected")
    return {"log": ["notified:rejected"]}


def is_transient(exc: Exception) -> bool:
    """Retry what the payments client marks retryable (timeouts included: LangGraph's default ``retry_on``
    does not retry a ``TimeoutError``, an ``OSError``)."""
    return bool(getattr(exc, "retryable", False)) or isinstance(exc, ConnectionError)


def add_node(graph: StateGraph, name: str, fn: Any, retry: Any = None) -> None:
    """``graph.add_node`` with a retry policy under either keyword langgraph has used for it."""
    if retry is None:
        graph.add_node(name, fn)
        return
    try:
        graph.add_node(name, fn, retry_policy=retry)
    except TypeError:  # pragma: no cover - old releases
        graph.add_node(name, fn, retry=retry)


def make_builder(nodes: dict[str, Any] | None = None, edges: list[tuple[str, str]] | None = None,
                 retry_on: Any = is_transient) -> StateGraph:
    """The graph builder; ``nodes`` replaces node functions, ``edges`` the plain edges and ``retry_on`` the
    retry policy's test (the broken variants)."""
    fns = {"route": route, "draft": draft, "approve": approve, "revise": revise, "notify_received": notify_received,
           "issue": issue, "notify_done": notify_done, "notify_rejected": notify_rejected, **(nodes or {})}
    graph = StateGraph(RefundState)
    transient = RetryPolicy(max_attempts=3, initial_interval=0.01, backoff_factor=1.0, jitter=False,
                            **({"retry_on": retry_on} if retry_on is not None else {}))
    for name, fn in fns.items():
        add_node(graph, name, fn, transient if name in ("issue", "draft", "notify_done") else None)
    graph.add_edge(START, "route")
    graph.add_conditional_edges("route", lambda s: ["draft", "notify_received"] if s["decision"] == "refund"
                                else ["notify_rejected"], ["draft", "notify_received", "notify_rejected"])
    for a, b in edges if edges is not None else [("draft", "approve"), ("revise", "draft"), ("issue", "notify_done")]:
        graph.add_edge(a, b)
    graph.add_conditional_edges("approve", after_approval, ["issue", "revise", "notify_rejected", "approve"])
    graph.add_edge("notify_received", END)
    graph.add_edge("notify_done", END)
    graph.add_edge("notify_rejected", END)
    return graph


builder = make_builder()


# ---------------------------------------------------------------- the next versions of the code (deploy cases)
def fraud_check(state: RefundState) -> dict[str, Any]:
    """v2: score the approved refund before it is issued (a node added between the approval and the issue)."""
    return {"log": [f"fraud:{'high' if state['current_draft']['amount_cents'] > 100_000 else 'low'}"]}


def make_builder_v2(rename_approve: bool = False) -> StateGraph:
    """The next version: ``fraud_check`` added between ``approve`` and ``issue`` (a compatible change: a thread
    waiting on the approval resumes in the new graph); with ``rename_approve``, also the approval node renamed
    ``review`` (an incompatible one: a thread waiting on ``approve`` waits on a node the new graph lacks)."""
    ask = "review" if rename_approve else "approve"
    fns = {"route": route, "draft": draft, ask: approve, "revise": revise, "notify_received": notify_received,
           "fraud_check": fraud_check, "issue": issue, "notify_done": notify_done, "notify_rejected": notify_rejected}
    graph = StateGraph(RefundState)
    transient = RetryPolicy(max_attempts=3, initial_interval=0.01, backoff_factor=1.0, jitter=False, retry_on=is_transient)
    for name, fn in fns.items():
        add_node(graph, name, fn, transient if name in ("issue", "draft", "notify_done") else None)
    graph.add_edge(START, "route")
    graph.add_conditional_edges("route", lambda s: ["draft", "notify_received"] if s["decision"] == "refund"
                                else ["notify_rejected"], ["draft", "notify_received", "notify_rejected"])
    for a, b in [("draft", ask), ("revise", "draft"), ("fraud_check", "issue"), ("issue", "notify_done")]:
        graph.add_edge(a, b)

    def after_approval_v2(state: RefundState) -> str:
        went = after_approval(state)
        return {"issue": "fraud_check", "approve": ask}.get(went, went)

    graph.add_conditional_edges(ask, after_approval_v2, ["fraud_check", "revise", "notify_rejected", ask])
    graph.add_edge("notify_received", END)
    graph.add_edge("notify_done", END)
    graph.add_edge("notify_rejected", END)
    return graph


#: v2 deployed the compatible way (a node added after the wait).
builder_v2 = make_builder_v2()
#: v2 with the waiting node renamed: running threads wait on a node that is gone.
builder_v2_renamed = make_builder_v2(rename_approve=True)
