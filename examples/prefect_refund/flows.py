"""The refund flow: one Prefect flow run per refund request, run from a deployment.

A reviewer approves the request first: the flow run **suspends** for the answer
(``suspend_flow_run(wait_for_input=Approval)``: its process exits; the answer, given with ``resume_flow_run``,
reschedules the run, and the run executes again from the top, its answer returned by the suspend). Approved, the
flow drafts the refund and issues it inside one ``transaction()``: when issuing fails (the payments API declines),
the transaction rolls back, and the draft task's rollback hook voids the draft. Then it tells the customer.

Every task persists its result under a cache key made from its inputs (``cache_policy=INPUTS``), and every
payments call carries an idempotency key made from the order: a flow run retried after a crash finds the results
of the tasks it had finished (Prefect does not run them again), and a task it runs again sends the same key.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, task
from prefect.cache_policies import INPUTS
from prefect.flow_runs import suspend_flow_run
from prefect.input import RunInput
from prefect.transactions import Transaction, get_transaction, transaction

from prefect_refund import services

#: Seconds a refund waits for its approval before Prefect fails the suspended run.
APPROVAL_TIMEOUT_S = 3600


class Approval(RunInput):
    """A reviewer's answer."""

    approved: bool


class PaymentDeclined(Exception):
    """The payments API refused to issue the refund."""


@task(cache_policy=INPUTS, persist_result=True)
def draft_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Draft the refund (its rollback hook voids the draft)."""
    drafted = services.draft_refund(order_id, amount_cents, idempotency_key=f"draft-{order_id}")
    get_transaction().set("draft_id", drafted["draft_id"])  # what the rollback hook needs
    return drafted


@draft_refund.on_rollback
def void_the_draft(txn: Transaction) -> None:
    """The transaction failed after the draft was made: void it."""
    draft_id = txn.get("draft_id")
    services.void_draft(draft_id, idempotency_key=f"void-{draft_id}")


@task(cache_policy=INPUTS, persist_result=True)
def issue_refund(draft_id: str, amount_cents: int) -> dict[str, Any]:
    """Issue the drafted refund (raises :class:`PaymentDeclined` when the payments API declines it)."""
    try:
        return services.issue_refund(draft_id, amount_cents, idempotency_key=f"issue-{draft_id}")
    except Exception as exc:  # noqa: BLE001 - the payments client's errors, as the team maps them
        raise PaymentDeclined(f"{draft_id}: {exc}") from exc


@task(cache_policy=INPUTS, persist_result=True)
def notify_customer(order_id: str, template: str) -> dict[str, Any]:
    """Tell the customer how their refund ended."""
    return services.notify_customer(order_id, template, idempotency_key=f"notify-{order_id}-{template}")


@flow(persist_result=True)
def refund_flow(order_id: str, amount_cents: int) -> dict[str, Any]:
    """One refund request: approval, then draft and issue in one transaction, then the customer is told.

    Returns ``{"order_id", "status": "issued" | "denied" | "declined", ...}``."""
    decision = suspend_flow_run(wait_for_input=Approval, timeout=APPROVAL_TIMEOUT_S)
    if not decision.approved:
        notify_customer(order_id, "denied")
        return {"order_id": order_id, "status": "denied"}
    try:
        with transaction():
            drafted = draft_refund(order_id, amount_cents)
            refund = issue_refund(drafted["draft_id"], amount_cents)
    except PaymentDeclined:
        notify_customer(order_id, "declined")
        return {"order_id": order_id, "status": "declined"}
    notify_customer(order_id, "refunded")
    return {"order_id": order_id, "status": "issued", "refund_id": refund["refund_id"]}
