"""Broken variants of the refund flow: mistakes a DBOS team could make, each caught by a named crashpoint rule
(tests/quality/test_dbos_variants.py)."""

from __future__ import annotations

import time
from typing import Any

from dbos import DBOS

from dbos_refund import services
from dbos_refund.app import APPROVAL_TIMEOUT_S, draft, issue, notify, void


@DBOS.step()
def issue_without_key(draft_: dict[str, Any]) -> dict[str, Any]:
    """Issues the refund with no idempotency key: when DBOS runs the step again after a crash between the
    payment and the step's recorded result, the payments API cannot recognise the repeat."""
    return services.issue_refund(draft_["draft_id"], draft_["amount_cents"])


@DBOS.step()
def issue_with_clock_key(draft_: dict[str, Any]) -> dict[str, Any]:
    """Issues the refund with a key made from the wall clock: a step DBOS runs again sends a new key."""
    return services.issue_refund(draft_["draft_id"], draft_["amount_cents"], idempotency_key=f"issue-{time.time_ns()}")


def _refund(order: dict[str, Any], issue: Any) -> dict[str, Any]:
    return _after_draft(order, draft(order), issue)


def _after_draft(order: dict[str, Any], drafted: dict[str, Any], issue: Any) -> dict[str, Any]:
    decision = DBOS.recv("approval", timeout_seconds=APPROVAL_TIMEOUT_S)
    if decision and decision.get("approved"):
        refund = issue(drafted)
        notify(order["order_id"], "refunded")
        return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"]}
    void(drafted)
    notify(order["order_id"], "denied")
    return {"order_id": order["order_id"], "status": "denied", "draft_id": drafted["draft_id"]}


@DBOS.workflow()
def refund_without_key(order: dict[str, Any]) -> dict[str, Any]:
    """The refund flow with :func:`issue_without_key` (caught by side_effects.at_most_once)."""
    return _refund(order, issue_without_key)


@DBOS.workflow()
def refund_with_clock_key(order: dict[str, Any]) -> dict[str, Any]:
    """The refund flow with :func:`issue_with_clock_key` (caught by differential.same_effects)."""
    return _refund(order, issue_with_clock_key)


#: Seconds of drafting after which the timed variant asks for a manual review.
SLOW_DRAFT_S = 0.25


@DBOS.step()
def flag_for_review(order: dict[str, Any]) -> dict[str, Any]:
    """Flag the refund for a manual review (no side effect here)."""
    return {"order_id": order["order_id"], "review": True}


@DBOS.workflow()
def refund_timed_review(order: dict[str, Any]) -> dict[str, Any]:
    """Times the draft with the wall clock in the workflow body and flags slow drafts for review: when DBOS runs
    the workflow again, the recorded draft returns at once, the branch goes the other way, and the steps no
    longer line up with the recorded ones (caught by target.replay_deterministic)."""
    began = time.time()
    drafted = draft(order)
    if time.time() - began > SLOW_DRAFT_S:
        flag_for_review(order)
    return _after_draft(order, drafted, issue)


@DBOS.workflow()
def refund_without_void(order: dict[str, Any]) -> dict[str, Any]:
    """Forgets the compensation on the denial path: the draft stays open when the reviewer denies or the approval
    expires (caught by target.compensated, from the target file's ``compensations``)."""
    drafted = draft(order)
    decision = DBOS.recv("approval", timeout_seconds=APPROVAL_TIMEOUT_S)
    if decision and decision.get("approved"):
        refund = issue(drafted)
        notify(order["order_id"], "refunded")
        return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"]}
    notify(order["order_id"], "denied")
    return {"order_id": order["order_id"], "status": "denied", "draft_id": drafted["draft_id"]}


@DBOS.step()
def issue_swallowing_errors(draft_: dict[str, Any]) -> dict[str, Any]:
    """Issues the refund, and on any error of the payments call logs it and returns a made-up "issued" answer, so
    the workflow goes on as if the money had moved (the step never fails, so DBOS never retries it)."""
    try:
        return services.issue_refund(draft_["draft_id"], draft_["amount_cents"],
                                     idempotency_key=f"issue-{DBOS.workflow_id}")
    except Exception:  # noqa: BLE001 - the mistake this variant is made of
        return {"refund_id": f"rf-{draft_['draft_id']}", "amount_cents": draft_["amount_cents"], "status": "issued"}


@DBOS.workflow()
def refund_swallowing_errors(order: dict[str, Any]) -> dict[str, Any]:
    """The refund flow with :func:`issue_swallowing_errors`: a payments timeout (nothing applied) ends "issued"
    with no refund made (caught by the default sweep's effect faults: target.expected_effects,
    differential.same_effects)."""
    return _refund(order, issue_swallowing_errors)
