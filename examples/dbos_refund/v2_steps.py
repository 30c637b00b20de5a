"""The steps of the refund flow's v2 (:mod:`dbos_refund.app_v2`, :mod:`dbos_refund.app_v2_reordered`). A deploy
replaces v1's module (:mod:`dbos_refund.app`), so v2 defines its steps again under the same names: DBOS refuses
one workflow or step name registered by two modules in one process."""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from dbos_refund import services

APPROVAL_TIMEOUT_S = 3600


@DBOS.step()
def draft(order: dict[str, Any]) -> dict[str, Any]:
    """Draft the refund of ``order``."""
    return services.draft_refund(order["order_id"], order["amount_cents"], idempotency_key=f"draft-{DBOS.workflow_id}")


@DBOS.step()
def check_fraud(order: dict[str, Any]) -> dict[str, Any]:
    """v2: score the refund (no effect)."""
    return {"order_id": order["order_id"], "score": 0.1 if order["amount_cents"] < 100_000 else 0.9}


@DBOS.step()
def issue(draft_: dict[str, Any]) -> dict[str, Any]:
    """Issue the drafted refund."""
    return services.issue_refund(draft_["draft_id"], draft_["amount_cents"], idempotency_key=f"issue-{DBOS.workflow_id}")


@DBOS.step()
def void(draft_: dict[str, Any]) -> dict[str, Any]:
    """Void the draft (compensation)."""
    return services.void_draft(draft_["draft_id"], idempotency_key=f"void-{DBOS.workflow_id}")


@DBOS.step()
def notify(order_id: str, template: str) -> dict[str, Any]:
    """Tell the customer."""
    return services.notify_customer(order_id, template, idempotency_key=f"notify-{DBOS.workflow_id}-{template}")


def decided(order: dict[str, Any], drafted: dict[str, Any], decision: dict[str, Any] | None) -> dict[str, Any]:
    """What follows the approval (v1's steps)."""
    if decision and decision.get("approved"):
        refund = issue(drafted)
        notify(order["order_id"], "refunded")
        return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"]}
    void(drafted)
    notify(order["order_id"], "denied")
    return {"order_id": order["order_id"], "status": "denied", "draft_id": drafted["draft_id"]}
