"""The refund flow: one Prefect flow run per refund request, run from a deployment.

A reviewer approves the request first: the flow run **suspends** for the answer
(``suspend_flow_run(wait_for_input=Approval)``: its process exits; the answer, given with ``resume_flow_run``,
reschedules the run, and the run executes again from the top, its answer returned by the suspend). Approved, the
flow drafts the refund and issues it inside one ``transaction()``: when issuing fails (the payments API declines),
the transaction rolls back, and the draft task's rollback hook voids the draft. Then it tells the customer.

Every task persists its result under a cache key made from its inputs (``cache_policy=INPUTS``), and every
payments call carries an idempotency key made from the order: a flow run retried after a crash finds the results
of the tasks it had finished (Prefect does not run them again), and a task it runs again sends the same key.

A payments call that fails transiently (a timeout, an answer lost on the way back, a rate limit: the client marks
them ``retryable``) is sent again with the same key; only a refusal declines the refund (a timeout taken for a
decline voids the draft of a refund that may have been issued: :func:`prefect_refund.variants.refund_declines_on_any_error`).
``notify_customer``, outside the transaction, has Prefect retry it (``retries`` with a ``retry_condition_fn``). The
tasks inside the transaction retry in their own body instead: a failed attempt of a task with ``retries`` inside a
``transaction()`` rolls the whole transaction back before Prefect retries it (the draft's hook voids the draft, then
the retried issue succeeds: :func:`prefect_refund.variants.refund_task_retries_in_transaction`). The rollback hook
retries in its body too (Prefect does not retry hooks).
"""

from __future__ import annotations

import time
from typing import Any, Callable, TypeVar

from prefect import flow, task
from prefect.cache_policies import INPUTS
from prefect.flow_runs import suspend_flow_run
from prefect.input import RunInput
from prefect.transactions import Transaction, get_transaction, transaction

from prefect_refund import services

#: Seconds a refund waits for its approval before Prefect fails the suspended run.
APPROVAL_TIMEOUT_S = 3600
#: Retries of a payments call that failed transiently, and the seconds before each.
RETRIES = 2
RETRY_DELAY_S = 0.5


class Approval(RunInput):
    """A reviewer's answer."""

    approved: bool


class PaymentDeclined(Exception):
    """The payments API refused to issue the refund."""


def is_transient(exc: BaseException) -> bool:
    """Whether a payments call that raised ``exc`` may succeed when sent again with its key: what the client marks
    ``retryable`` (a timeout, a lost answer, a rate limit), or a connection error."""
    return bool(getattr(exc, "retryable", False)) or isinstance(exc, ConnectionError)


def retry_transient(task: Any, task_run: Any, state: Any) -> bool:
    """A task's ``retry_condition_fn``: Prefect retries a failed task run whose error :func:`is_transient`."""
    try:
        state.result()
    except Exception as exc:  # noqa: BLE001 - the task's own error, re-raised by Prefect
        return is_transient(exc)
    return False


T = TypeVar("T")


def with_retries(call: Callable[[], T]) -> T:
    """``call()``, made again after a transient failure (:func:`is_transient`), :data:`RETRIES` times at most,
    :data:`RETRY_DELAY_S` apart; raises the last error, or the first one that is not transient."""
    for attempt in range(RETRIES + 1):
        try:
            return call()
        except Exception as exc:
            if attempt == RETRIES or not is_transient(exc):
                raise
            time.sleep(RETRY_DELAY_S)
    raise AssertionError("unreachable")


@task(cache_policy=INPUTS, persist_result=True)
def draft_refund(order_id: str, amount_cents: int) -> dict[str, Any]:
    """Draft the refund (its rollback hook voids the draft)."""
    drafted = with_retries(lambda: services.draft_refund(order_id, amount_cents, idempotency_key=f"draft-{order_id}"))
    get_transaction().set("draft_id", drafted["draft_id"])  # what the rollback hook needs
    return drafted


@draft_refund.on_rollback
def void_the_draft(txn: Transaction) -> None:
    """The transaction failed after the draft was made: void it."""
    draft_id = txn.get("draft_id")
    with_retries(lambda: services.void_draft(draft_id, idempotency_key=f"void-{draft_id}"))


@task(cache_policy=INPUTS, persist_result=True)
def issue_refund(draft_id: str, amount_cents: int) -> dict[str, Any]:
    """Issue the drafted refund (raises :class:`PaymentDeclined` when the payments API declines it; a transient error
    as it is once retried)."""
    try:
        return with_retries(lambda: services.issue_refund(draft_id, amount_cents, idempotency_key=f"issue-{draft_id}"))
    except Exception as exc:  # noqa: BLE001 - the payments client's errors, as the team maps them
        if is_transient(exc):
            raise
        raise PaymentDeclined(f"{draft_id}: {exc}") from exc


@task(cache_policy=INPUTS, persist_result=True, retries=RETRIES, retry_delay_seconds=RETRY_DELAY_S,
      retry_condition_fn=retry_transient)
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
