"""The team's payments client (Stripe-like: honours an Idempotency-Key; the SDK helper makes a fresh one per request
when given none)."""
import uuid

import crashpoint


@crashpoint.effect("refund", key="idempotency_key")
def refund(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    return {"refund_id": f"re_{order_id}", "order_id": order_id, "amount_cents": amount_cents, "status": "issued"}


def new_key() -> str:
    """What many payment SDK helpers do when not given a key: a fresh UUID per request."""
    return str(uuid.uuid4())
