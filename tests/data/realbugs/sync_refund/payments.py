"""The team's payments and mail clients (in production: HTTP calls honouring Idempotency-Key)."""
import crashpoint


@crashpoint.effect("refund", key="idempotency_key")
def refund(order_id: str, amount_cents: int, idempotency_key: str | None = None) -> dict:
    return {"refund_id": f"re_{order_id}", "status": "issued", "amount_cents": amount_cents}


@crashpoint.effect("send_email", key="idempotency_key")
def send_email(to: str, template: str, idempotency_key: str | None = None) -> dict:
    return {"message_id": f"msg_{to}_{template}"}
