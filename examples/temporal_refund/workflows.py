"""The refund flow (v1): one ``RefundWorkflow`` per refund request.

``draft`` -> wait for the ``approve`` signal, with a durable timer as the deadline
(``workflow.wait_condition(..., timeout=...)``; meanwhile a reviewer may lower the amount with the
``change_amount`` update) -> ``issue`` and tell the customer, or, when denied or
unanswered in time, ``void`` the draft (the compensation) and tell the customer. The notification is a
child workflow (``NotifyCustomer``) with a deterministic id.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from temporal_refund import activities

#: Seconds a refund waits for its approval before it is voided (an input may give ``approval_timeout_s``).
APPROVAL_TIMEOUT_S = 3600
#: Every activity: a short timeout (a killed worker's activity is retried after it), quick retries.
ACTIVITY = dict(start_to_close_timeout=timedelta(seconds=2),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0,
                                         maximum_attempts=10))


@workflow.defn
class NotifyCustomer:
    """Tell the customer how their refund ended."""

    @workflow.run
    async def run(self, order_id: str, template: str) -> dict[str, Any]:
        return await workflow.execute_activity(activities.notify, args=[order_id, template], **ACTIVITY)


@workflow.defn
class RefundWorkflow:
    """One refund request, from draft to issued or voided. Returns ``{"order_id", "status", ...}`` (issued: also
    ``refund_id`` and the ``amount_cents`` refunded)."""

    def __init__(self) -> None:
        self.decision: dict[str, Any] | None = None
        self.amount_cents: int | None = None  # a reviewer's partial refund (change_amount), else the order's

    @workflow.signal
    def approve(self, decision: dict[str, Any]) -> None:
        """A reviewer's answer: ``{"approved": bool}``."""
        if self.decision is None:  # the first answer counts; a repeated click changes nothing
            self.decision = decision

    @workflow.update
    def change_amount(self, amount_cents: int) -> int:
        """A reviewer lowers the refund before deciding (a partial refund); returns the amount now to refund."""
        self.amount_cents = amount_cents
        return amount_cents

    @change_amount.validator
    def check_amount(self, amount_cents: int) -> None:
        """Refuse a change once decided, or an amount that is not a positive integer (an update refused here is
        not written to the history)."""
        if self.decision is not None:
            raise ValueError("the refund is already decided")
        if not isinstance(amount_cents, int) or amount_cents <= 0:
            raise ValueError(f"not an amount in cents: {amount_cents!r}")

    @workflow.query
    def status(self) -> str:
        return "waiting" if self.decision is None else "decided"

    async def notify(self, order_id: str, template: str) -> None:
        """Tell the customer, in a child workflow whose id is derived from this workflow's."""
        await workflow.execute_child_workflow(NotifyCustomer.run, args=[order_id, template],
                                              id=f"{workflow.info().workflow_id}-notify-{template}")

    async def issue(self, drafted: dict[str, Any]) -> dict[str, Any]:
        """Issue the approved refund."""
        return await workflow.execute_activity(activities.issue, drafted, **ACTIVITY)

    async def before_approval(self, order: dict[str, Any]) -> None:
        """What runs between the draft and the wait for the approval (nothing in v1; the v2 code checks fraud)."""

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        drafted = await workflow.execute_activity(activities.draft, order, **ACTIVITY)
        await self.before_approval(order)
        timeout = timedelta(seconds=order.get("approval_timeout_s", APPROVAL_TIMEOUT_S))
        try:
            await workflow.wait_condition(lambda: self.decision is not None, timeout=timeout)
        except asyncio.TimeoutError:
            pass  # no answer in time: compensate
        if self.decision and self.decision.get("approved"):
            if self.amount_cents is not None:
                drafted = {**drafted, "amount_cents": min(self.amount_cents, drafted["amount_cents"])}
            refund = await self.issue(drafted)
            await self.notify(order["order_id"], "refunded")
            return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"],
                    "amount_cents": refund["amount_cents"]}
        await workflow.execute_activity(activities.void, drafted, **ACTIVITY)
        await self.notify(order["order_id"], "denied" if self.decision else "expired")
        return {"order_id": order["order_id"], "status": "denied" if self.decision else "expired",
                "draft_id": drafted["draft_id"]}
