"""A DBOS app that sleeps durably (``DBOS.sleep``) for its input's ``sleep_s`` and then reminds the customer, and one
whose workflow waits for a child it put on a queue the team polls every 10 s: with time compressed, a sleep of days
ends within about a second and the queue is polled every ``dbos.poll_s``."""

from __future__ import annotations

from typing import Any

import crashpoint
from dbos import DBOS

QUEUE = "slow_poll"
#: The team's poll interval of its queue (seconds).
QUEUE_POLL_S = 10.0


@crashpoint.effect("wake_up", key="idempotency_key")
def wake_up(order_id: str, idempotency_key: str | None = None) -> dict:
    """The side effect after the wait."""
    return {"order_id": order_id, "woke": True}


def setup() -> None:
    """Register the queue (after launch, as DBOS requires), polled every :data:`QUEUE_POLL_S`."""
    DBOS.register_queue(QUEUE, polling_interval_sec=QUEUE_POLL_S)


@DBOS.step()
def remind(order_id: str) -> dict[str, Any]:
    """Remind the customer."""
    return wake_up(order_id, idempotency_key=f"remind-{DBOS.workflow_id}")


@DBOS.workflow()
def sleeper(order: dict[str, Any]) -> dict[str, Any]:
    """Sleep ``sleep_s`` seconds, durably, then remind."""
    DBOS.sleep(order["sleep_s"])
    return remind(order["order_id"])


@DBOS.workflow()
def reminder(order: dict[str, Any]) -> dict[str, Any]:
    """The queued child: remind."""
    return remind(order["order_id"])


@DBOS.workflow()
def via_queue(order: dict[str, Any]) -> dict[str, Any]:
    """Put a reminder on the slow-polled queue once the queue's thread has polled (after a short sleep), and wait."""
    DBOS.sleep(0.5)
    return DBOS.retrieve_queue(QUEUE).enqueue(reminder, order).get_result()
