"""A workflow that sleeps on a durable timer (``workflow.sleep``) for its input's ``sleep_s``, then tells the
customer (an activity, one effect): with time compressed, a sleep of days ends within about a second."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import crashpoint
from temporalio import activity, workflow


@crashpoint.effect("wake_up", key="idempotency_key")
def wake_up(order_id: str, idempotency_key: str | None = None) -> dict:
    """The side effect after the sleep."""
    return {"order_id": order_id, "woke": True}


@activity.defn
def remind(order: dict[str, Any]) -> dict[str, Any]:
    """Remind the customer once the sleep is over."""
    return wake_up(order["order_id"], idempotency_key=f"remind-{activity.info().workflow_id}")


@workflow.defn
class Sleeper:
    """Sleep ``sleep_s`` seconds of workflow time, then remind."""

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        await workflow.sleep(order["sleep_s"])
        return await workflow.execute_activity(remind, order, start_to_close_timeout=timedelta(seconds=2))
