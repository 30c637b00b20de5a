"""The refund flow, v2 deployed the right way: a fraud check before the approval, behind ``workflow.patched``.

A refund that was already waiting for its approval when v2 was deployed replays its history without the check
(``patched`` is false while replaying a history without the marker) and goes on; new refunds run it.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from temporal_refund import activities
    from temporal_refund import workflows as v1


@workflow.defn(name="RefundWorkflow")
class RefundWorkflow(v1.RefundWorkflow):
    """v1 plus a fraud check, guarded for running workflows."""

    async def before_approval(self, order: dict[str, Any]) -> None:
        if workflow.patched("fraud-check"):
            await workflow.execute_activity(activities.check_fraud, order, **v1.ACTIVITY)

    @workflow.run
    async def run(self, order: dict[str, Any]) -> dict[str, Any]:
        return await super().run(order)
