"""Broken variants of the refund agent: mistakes a LangGraph team makes, each caught by a named crashpoint rule.

Each is a builder like :data:`langgraph_refund.graph.builder` (point a target's ``entry`` at it):

* ``no_key``: ``issue`` calls the payments API without an idempotency key. A kill after the refund and
  before the step's checkpoint re-runs the node: the customer is refunded twice.
  Caught by ``side_effects.at_most_once`` (``--crash-point after_effect:issue_refund``).
* ``wall_clock``: ``draft`` builds its idempotency key from the wall clock. The re-run after a kill sends
  a new key, so the payments API drafts again. Caught by ``differential.same_effects``
  (``--crash-point after_effect:draft_refund``).
* ``email_before_interrupt``: ``approve`` e-mails the reviewer *before* ``interrupt()`` in the same node;
  LangGraph re-runs the node from its first line on resume, so the e-mail goes out twice with no crash at
  all. Caught by ``target.repeats_explained`` in the golden run.
* ``ignores_denial``: the edge after the approval issues the refund whatever the human answered.
  Caught by ``target.approval_gate`` (case ``denied-then-approved``, golden run).
* ``trusts_any_answer``: ``approve`` takes whatever ``Command(resume=...)`` arrives as the answer to the
  current ask. A reviewer's grant of the first draft that arrives late, after a denial (the deadline's)
  sent the workflow on to a revised draft, approves the revised one: the refund is issued with no timely
  grant. Caught by ``target.approval_gate`` (case ``approval-late``, golden run).
* ``default_retry``: the payments node keeps LangGraph's default ``retry_on``, which does not retry a
  ``TimeoutError``; one timeout of the payments API leaves the thread stuck. Caught by
  ``target.ends_within_budget`` (case ``issue-flaky``, golden run), quoting LangGraph's error.
* ``swallows_errors``: ``issue`` catches every error of the payments call and returns a made-up "issued" refund,
  so the thread finishes as if the money had moved. Caught by the default sweep's effect fault
  ``fault:issue_refund#1=timeout`` (nothing applied): ``target.expected_effects`` and ``differential.same_effects``.
* ``trusts_the_answer``: ``issue`` keeps whatever the payments API answered (``resp = issue_refund(...); return
  {"refund": resp}``): an empty answer (``{}``) or a garbled one (an HTML error page) after the refund went out is
  kept as the refund. Caught by ``target.expected_end`` (a fault ``{kind: tool, tool: issue_refund, call: 1,
  outcome: empty_answer}``) and ``differential.same_end`` (``fault:issue_refund#1=malformed_answer``).
"""

from __future__ import annotations

import time
from typing import Any

from langgraph.types import interrupt

from langgraph_refund import graph, services


def _issue_without_key(state: graph.RefundState) -> dict[str, Any]:
    draft = state["current_draft"]
    return {"refund": services.issue_refund(draft["draft_id"], draft["amount_cents"]), "log": ["issued"]}


def _draft_keyed_by_clock(state: graph.RefundState) -> dict[str, Any]:
    version = state.get("version", 0) + 1
    made = services.draft_refund(state["order_id"], state["amount_cents"],
                                 idempotency_key=f"draft-{state['order_id']}-{time.time_ns()}")
    return {"current_draft": made, "version": version, "log": [f"draft:v{version}"]}


def _approve_after_emailing(state: graph.RefundState) -> dict[str, Any]:
    services.notify_customer("reviewer", f"review-{state['order_id']}")  # runs again on every resume
    answer = interrupt({"question": "Issue this refund?", "draft": state["current_draft"]})
    return {"approval": dict(answer), "asks": state.get("asks", 0) + 1,
            "log": [f"approval:{'yes' if answer.get('approved') else 'no'}"]}


def _approve_any_answer(state: graph.RefundState) -> dict[str, Any]:
    answer = interrupt({"question": "Issue this refund?", "draft": state["current_draft"],
                        "ask": state.get("asks", 0) + 1})
    return {"approval": dict(answer), "asks": state.get("asks", 0) + 1,
            "log": [f"approval:{'yes' if answer.get('approved') else 'no'}"]}


def _issue_swallowing_errors(state: graph.RefundState) -> dict[str, Any]:
    draft = state["current_draft"]
    try:
        refund = services.issue_refund(draft["draft_id"], draft["amount_cents"],
                                       idempotency_key=f"refund-{draft['draft_id']}")
    except Exception:  # noqa: BLE001 - the mistake this variant is made of
        refund = {"status": "issued", "amount_cents": draft["amount_cents"]}
    return {"refund": refund, "log": ["issued"]}


def _issue_trusting_the_answer(state: graph.RefundState) -> dict[str, Any]:
    draft = state["current_draft"]
    resp = services.issue_refund(draft["draft_id"], draft["amount_cents"], idempotency_key=f"refund-{draft['draft_id']}")
    return {"refund": resp, "log": ["issued"]}


no_key = graph.make_builder(nodes={"issue": _issue_without_key})
trusts_the_answer = graph.make_builder(nodes={"issue": _issue_trusting_the_answer})
swallows_errors = graph.make_builder(nodes={"issue": _issue_swallowing_errors})
wall_clock = graph.make_builder(nodes={"draft": _draft_keyed_by_clock})
email_before_interrupt = graph.make_builder(nodes={"approve": _approve_after_emailing})
default_retry = graph.make_builder(retry_on=None)
trusts_any_answer = graph.make_builder(nodes={"approve": _approve_any_answer})


def _ignores_denial() -> Any:
    original = graph.after_approval
    graph.after_approval = lambda state: "issue"
    try:
        return graph.make_builder()
    finally:
        graph.after_approval = original


ignores_denial = _ignores_denial()
