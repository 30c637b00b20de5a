"""The refund flow's side effects: the payments API and the customer notifier.

The team shares its payments client with the DBOS service (``examples/dbos_refund/services.py``: draft, issue,
void, notify, each a :func:`crashpoint.effect` keyed by an ``idempotency_key``); the v2 code adds the fraud
scoring call below. Outside a crashpoint run each is a pass-through.
"""

from __future__ import annotations

import crashpoint
from dbos_refund.services import draft_refund, issue_refund, notify_customer, void_draft

__all__ = ["draft_refund", "fraud_check", "issue_refund", "notify_customer", "void_draft"]


@crashpoint.effect("fraud_check", key="idempotency_key")
def fraud_check(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    """Score the refund for fraud (the v2 code adds this call)."""
    return {"order_id": order_id, "score": 0.1 if amount_cents < 100_000 else 0.9}
