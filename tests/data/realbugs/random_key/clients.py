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


@crashpoint.effect("send_email", key="idempotency_key")
def send_email(to: str, template: str, idempotency_key: str | None = None) -> dict:
    return {"message_id": f"msg_{to}_{template}"}


@crashpoint.effect("refund_replaying", key="idempotency_key", key_reuse="replay")
def refund_replaying(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    """A provider that answers a reused key with the first answer whatever the arguments (declared)."""
    return {"refund_id": f"re_{order_id}", "order_id": order_id, "amount_cents": amount_cents, "status": "issued"}
