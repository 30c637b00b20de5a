"""The refund flow's activities: each calls one service, with an idempotency key derived from the workflow id
(``activity.info().workflow_id``), so an activity Temporal retries after a crash repeats the same request and
the payments API recognises it. Sync activities: the worker runs them in a thread pool."""

from __future__ import annotations

from typing import Any

from temporalio import activity

from temporal_refund import services


def _key(what: str) -> str:
    return f"{what}-{activity.info().workflow_id}"


@activity.defn
def draft(order: dict[str, Any]) -> dict[str, Any]:
    """Draft the refund of ``order`` (``{"order_id", "amount_cents"}``)."""
    return services.draft_refund(order["order_id"], order["amount_cents"], idempotency_key=_key("draft"))


@activity.defn
def issue(drafted: dict[str, Any]) -> dict[str, Any]:
    """Issue the drafted refund."""
    return services.issue_refund(drafted["draft_id"], drafted["amount_cents"], idempotency_key=_key("issue"))


@activity.defn
def void(drafted: dict[str, Any]) -> dict[str, Any]:
    """Void the draft (the compensation)."""
    return services.void_draft(drafted["draft_id"], idempotency_key=_key("void"))


@activity.defn
def notify(order_id: str, template: str) -> dict[str, Any]:
    """Tell the customer (runs in the notification child workflow)."""
    return services.notify_customer(order_id, template, idempotency_key=_key(f"notify-{template}"))


@activity.defn
def check_fraud(order: dict[str, Any]) -> dict[str, Any]:
    """Score the refund (the v2 code calls it)."""
    return services.fraud_check(order["order_id"], order["amount_cents"], idempotency_key=_key("fraud"))


#: What the team's worker registers (v1).
ACTIVITIES = [draft, issue, void, notify]
#: What the v2 worker registers.
ACTIVITIES_V2 = [*ACTIVITIES, check_fraud]
