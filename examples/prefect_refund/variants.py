"""Broken variants of the refund flow: mistakes a Prefect team could make, each caught by a named crashpoint rule
(tests/quality/test_prefect_variants.py). Each is :func:`prefect_refund.flows.refund_flow` with one task or hook
changed.

* :func:`refund_without_key`: issues the refund with no idempotency key. A kill after the payment and before the
  transaction committed its result makes the retried flow run issue it again (``side_effects.at_most_once``).
* :func:`refund_clock_key`: the draft's cache key holds the wall clock (a ``cache_key_fn`` that adds the time, or
  a timestamp passed in as an input): the retried flow run computes another key, misses the result the first
  attempt persisted and runs the draft again (``target.cached_not_rerun``).
* :func:`refund_hook_raises`: the draft's rollback hook reads a value the draft never set (``ValueError``): Prefect
  logs the hook's error and goes on, so the declined refund's draft is never voided (``target.rollback_complete``).
* :func:`refund_draft_first`: drafts the refund before asking for the approval (``target.approval_gate``: the
  draft is gated on the approval).
* :func:`refund_task_retries_in_transaction`: issues through a task that Prefect retries (``retries`` with a
  ``retry_condition_fn``) inside the transaction: the first attempt's timeout rolls the whole transaction back, so the
  draft's hook voids the draft, and then the retried attempt issues the refund
  (``target.invariant:issued_or_voided_never_both``).
* :func:`refund_declines_on_any_error`: takes every error of the payments API for a decline, a timeout or a lost
  answer included, and does not retry it: the answer of an issued refund lost on its way back voids the draft of a
  refund that was issued (``target.invariant:issued_or_voided_never_both``).
"""

from __future__ import annotations

import time
from typing import Any

from prefect import flow, task
from prefect.cache_policies import INPUTS
from prefect.flow_runs import suspend_flow_run
from prefect.transactions import Transaction, get_transaction, transaction

from prefect_refund import services
from prefect_refund.flows import (APPROVAL_TIMEOUT_S, RETRIES, RETRY_DELAY_S, Approval, PaymentDeclined, draft_refund,
                                  is_transient, issue_refund, notify_customer, retry_transient, with_retries)


@task(cache_policy=INPUTS, persist_result=True)
def issue_without_key(draft_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues the refund with no idempotency key: the payments API cannot tell a repeat."""
    try:
        return with_retries(lambda: services.issue_refund(draft_id, amount_cents))
    except Exception as exc:  # noqa: BLE001
        if is_transient(exc):
            raise
        raise PaymentDeclined(f"{draft_id}: {exc}") from exc


def _clock_key(context: Any, parameters: dict[str, Any]) -> str:
    """The draft's cache key: the order and the wall clock in nanoseconds (a key that changes between attempts)."""
    return f"draft-{parameters['order_id']}-{time.time_ns()}"


@task(cache_key_fn=_clock_key, persist_result=True)
def draft_clock_key(order_id: str, amount_cents: int) -> dict[str, Any]:
    """The draft, under a cache key with the wall clock in it."""
    drafted = with_retries(lambda: services.draft_refund(order_id, amount_cents, idempotency_key=f"draft-{order_id}"))
    get_transaction().set("draft_id", drafted["draft_id"])
    return drafted


@task(cache_policy=INPUTS, persist_result=True)
def draft_hook_raises(order_id: str, amount_cents: int) -> dict[str, Any]:
    """The draft, whose rollback hook reads a value it never set."""
    return with_retries(lambda: services.draft_refund(order_id, amount_cents, idempotency_key=f"draft-{order_id}"))


@draft_hook_raises.on_rollback
def void_unknown_draft(txn: Transaction) -> None:
    """Voids the draft named by ``txn.get("draft")``, which the draft task never set: Prefect raises ValueError
    ("Could not retrieve value for unknown key")."""
    draft_id = txn.get("draft")
    with_retries(lambda: services.void_draft(draft_id, idempotency_key=f"void-{draft_id}"))


def _refund(order_id: str, amount_cents: int, draft: Any, issue: Any) -> dict[str, Any]:
    """The example flow's body with its draft and issue tasks given."""
    decision = suspend_flow_run(wait_for_input=Approval, timeout=APPROVAL_TIMEOUT_S)
    if not decision.approved:
        notify_customer(order_id, "denied")
        return {"order_id": order_id, "status": "denied"}
    try:
        with transaction():
            drafted = draft(order_id, amount_cents)
            refund = issue(drafted["draft_id"], amount_cents)
    except PaymentDeclined:
        notify_customer(order_id, "declined")
        return {"order_id": order_id, "status": "declined"}
    notify_customer(order_id, "refunded")
    return {"order_id": order_id, "status": "issued", "refund_id": refund["refund_id"]}


@flow(name="refund-without-key", persist_result=True)
def refund_without_key(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues through :func:`issue_without_key`."""
    return _refund(order_id, amount_cents, draft_refund, issue_without_key)


@flow(name="refund-clock-key", persist_result=True)
def refund_clock_key(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Drafts through :func:`draft_clock_key`."""
    return _refund(order_id, amount_cents, draft_clock_key, issue_refund)


@flow(name="refund-hook-raises", persist_result=True)
def refund_hook_raises(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Drafts through :func:`draft_hook_raises`."""
    return _refund(order_id, amount_cents, draft_hook_raises, issue_refund)


@flow(name="refund-draft-first", persist_result=True)
def refund_draft_first(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Drafts the refund, outside any transaction, before it asks for the approval."""
    drafted = draft_refund(order_id, amount_cents)
    decision = suspend_flow_run(wait_for_input=Approval, timeout=APPROVAL_TIMEOUT_S)
    if not decision.approved:
        notify_customer(order_id, "denied")
        return {"order_id": order_id, "status": "denied"}
    refund = issue_refund(drafted["draft_id"], amount_cents)
    notify_customer(order_id, "refunded")
    return {"order_id": order_id, "status": "issued", "refund_id": refund["refund_id"]}


@task(cache_policy=INPUTS, persist_result=True)
def issue_declines_on_any_error(draft_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues the refund, and takes any error of the payments API for a decline (no retries)."""
    try:
        return services.issue_refund(draft_id, amount_cents, idempotency_key=f"issue-{draft_id}")
    except Exception as exc:  # noqa: BLE001
        raise PaymentDeclined(f"{draft_id}: {exc}") from exc


@flow(name="refund-declines-on-any-error", persist_result=True)
def refund_declines_on_any_error(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues through :func:`issue_declines_on_any_error`."""
    return _refund(order_id, amount_cents, draft_refund, issue_declines_on_any_error)


@task(cache_policy=INPUTS, persist_result=True, retries=RETRIES, retry_delay_seconds=RETRY_DELAY_S,
      retry_condition_fn=retry_transient)
def issue_retried_by_prefect(draft_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues the refund; a transient error is raised for Prefect to retry the task."""
    try:
        return services.issue_refund(draft_id, amount_cents, idempotency_key=f"issue-{draft_id}")
    except Exception as exc:  # noqa: BLE001
        if is_transient(exc):
            raise
        raise PaymentDeclined(f"{draft_id}: {exc}") from exc


@flow(name="refund-task-retries-in-transaction", persist_result=True)
def refund_task_retries_in_transaction(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Issues through :func:`issue_retried_by_prefect`, inside the transaction."""
    return _refund(order_id, amount_cents, draft_refund, issue_retried_by_prefect)
