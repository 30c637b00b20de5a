"""The refund flow's side effects: the payments API and the customer notifier.

In production these call HTTP APIs that honour an ``Idempotency-Key``; here they return deterministic answers.
Each is a :func:`crashpoint.effect`: a pass-through outside a crashpoint run.
"""

from __future__ import annotations

import crashpoint


@crashpoint.effect("draft_refund", key="idempotency_key")
def draft_refund(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    """Create a refund draft in the payments system (nothing moves yet)."""
    return {"draft_id": f"dr-{order_id}", "order_id": order_id, "amount_cents": amount_cents}


@crashpoint.effect("issue_refund", key="idempotency_key")
def issue_refund(draft_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    """Issue a drafted refund: money leaves the company. Irreversible."""
    return {"refund_id": f"rf-{draft_id}", "amount_cents": amount_cents, "status": "issued"}


@crashpoint.effect("void_draft", key="idempotency_key")
def void_draft(draft_id: str, idempotency_key: str | None = None) -> dict:
    """Void a draft (what undoes ``draft_refund`` when the refund is not issued)."""
    return {"draft_id": draft_id, "status": "void"}


@crashpoint.effect("notify_customer", key="idempotency_key")
def notify_customer(order_id: str, template: str, idempotency_key: str | None = None) -> dict:
    """E-mail the customer."""
    return {"message_id": f"msg-{order_id}-{template}", "template": template}
