"""The refund flow, v2 deployed the wrong way: the same fraud check, with no ``workflow.patched`` guard.

A refund that was already waiting for its approval when v2 was deployed replays its history with v2: v2 asks
for the ``check_fraud`` activity where the history has v1's timer, and Temporal fails the workflow task with a
nondeterminism error; the workflow is stuck until the code is fixed. crashpoint reports it
(``target.ends_within_budget``, quoting the history's failed workflow task).
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_refund import activities
    from temporal_refund import workflows as v1


@workflow.defn(name="RefundWorkflow")
class RefundWorkflow(v1.RefundWorkflow):
    """v1 plus an unguarded fraud check."""

    async def before_approval(self, order: dict[str, Any]) -> None:
        await workflow.execute_activity(activities.check_fraud, order, **v1.ACTIVITY)

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)
