"""Broken variants of the refund flow: mistakes a Temporal team could make, each caught by a named crashpoint rule
(tests/quality/test_temporal_variants.py). Each is the v1 workflow with one method changed.

The two that read the wall clock or a random number opt out of Temporal's sandbox (``sandboxed=False``, which
teams do for speed or for a library the sandbox refuses); inside the sandbox the same calls fail the workflow
task at once (``RestrictedWorkflowAccessError``), which crashpoint reports the same way.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from temporal_refund import services
    from temporal_refund.workflows import ACTIVITY, NotifyCustomer, RefundWorkflow


@activity.defn
def issue_without_key(drafted: dict[str, Any]) -> dict[str, Any]:
    """Issues the refund with no idempotency key: when Temporal retries the activity after a worker died between
    the payment and the activity's completion report, the payments API cannot recognise the repeat."""
    return services.issue_refund(drafted["draft_id"], drafted["amount_cents"])


#: The variants' extra activities (registered beside the example's).
ACTIVITIES = [issue_without_key]


@workflow.defn(name="RefundWithoutKey")
class RefundWithoutKey(RefundWorkflow):
    """Issues through :func:`issue_without_key` (caught by side_effects.at_most_once)."""

    async def issue(self, drafted: dict[str, Any]) -> dict[str, Any]:
        return await workflow.execute_activity(issue_without_key, drafted, **ACTIVITY)

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)


@workflow.defn(name="RefundRandomChildId", sandboxed=False)
class RefundRandomChildId(RefundWorkflow):
    """Names the notification child with ``uuid.uuid4()`` instead of ``workflow.uuid4()``: a worker that replays
    the history (after a restart) starts a child of another id than the one in the history, a nondeterminism
    error (caught by target.ends_within_budget, quoting Temporal)."""

    async def notify(self, order_id: str, template: str) -> None:
        await workflow.execute_child_workflow(NotifyCustomer.run, args=[order_id, template],
                                              id=f"notify-{order_id}-{uuid.uuid4()}")

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)


@workflow.defn(name="RefundWallClockChildId", sandboxed=False)
class RefundWallClockChildId(RefundWorkflow):
    """Names the notification child with ``time.time_ns()`` instead of ``workflow.now()``: the same mistake with
    the wall clock (caught by target.ends_within_budget, quoting Temporal)."""

    async def notify(self, order_id: str, template: str) -> None:
        await workflow.execute_child_workflow(NotifyCustomer.run, args=[order_id, template],
                                              id=f"notify-{order_id}-{time.time_ns()}")

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)


@workflow.defn(name="RefundAmountInValidator")
class RefundAmountInValidator(RefundWorkflow):
    """Changes the amount in the ``change_amount`` update's validator instead of its handler: a validator runs when
    the update arrives but not when a worker replays the history, so after a restart the workflow forgets the
    lowered amount and refunds the whole order (caught by differential.same_end)."""

    @workflow.update
    def change_amount(self, amount_cents: int) -> int:
        return amount_cents

    @change_amount.validator
    def check_amount(self, amount_cents: int) -> None:
        if self.decision is not None or not isinstance(amount_cents, int) or amount_cents <= 0:
            raise ValueError(f"refused: {amount_cents!r}")
        self.amount_cents = amount_cents

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)


@workflow.defn(name="RefundUuidChildId")
class RefundUuidChildId(RefundWorkflow):
    """Correct code, not a mistake: names the notification child with ``workflow.uuid4()``, which Temporal makes
    deterministic on replay (seeded per workflow run). The id differs from one run to the next, so crashpoint names
    the child by its parent and start ordinal (``notify-1001-refund-1001.child1``): its crash points are the same in
    every run (tests/adapters/test_target_temporal_child_names.py)."""

    async def notify(self, order_id: str, template: str) -> None:
        await workflow.execute_child_workflow(NotifyCustomer.run, args=[order_id, template],
                                              id=f"notify-{order_id}-{workflow.uuid4()}")

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)


#: What a variant target registers.
WORKFLOWS = [RefundWithoutKey, RefundRandomChildId, RefundWallClockChildId, RefundAmountInValidator, RefundUuidChildId,
             NotifyCustomer]
