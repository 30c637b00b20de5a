"""``target.approval_gate`` follows child workflows on real engines (issue 27: no false alarm on correct code).

A parent that waits for the manager's grant and then runs its refund as a child workflow (DBOS:
``DBOS.start_workflow(refund_child, order).get_result()``; Temporal: ``workflow.execute_child_workflow``) is correct:
before, its golden run failed ("refund_card applied in o1-refund while the approval of manager had no answer yet":
the gate matched approvals by the child's own thread only). The worker now records each child's parent when the
engine is asked to start it (DBOS: the status row's ``parent_workflow_id``; Temporal: the parent's start command), and
the gate accepts an approval of an ancestor answered before the child started. A parent that starts the child
BEFORE the approval still fails, also when the child's refund happens to land after the grant (DBOS: the child
sleeps through the approval).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from installed import needs

from crashpoint.harness.load.target import Target
from crashpoint.harness.run.target_sweep import run_one

# slow: golden runs of real workers (DBOS 10-25 s, Temporal 10-30 s each at load 5-25)
pytestmark = pytest.mark.slow

DBOS_APP = '''
from dbos import DBOS
import crashpoint

@crashpoint.effect("refund_card", key="k")
def refund_card(order, k=None):
    return {"refunded": order}

@DBOS.step()
def refund(order):
    return refund_card(order, k=f"refund-{DBOS.workflow_id}")

@DBOS.workflow()
def refund_child(order, pause_s=0):
    if pause_s:
        DBOS.sleep(pause_s)
    return refund(order)

@DBOS.workflow()
def after_approval(order):
    verdict = DBOS.recv("manager", timeout_seconds=600)
    if verdict and verdict.get("ok"):
        return {"status": "cancelled", "refund": DBOS.start_workflow(refund_child, order).get_result()}
    return {"status": "rejected"}

@DBOS.workflow()
def before_approval(order):
    child = DBOS.start_workflow(refund_child, order, 3)  # refunds whatever the manager says, 3 s from now
    verdict = DBOS.recv("manager", timeout_seconds=600)
    if verdict and verdict.get("ok"):
        return {"status": "cancelled", "refund": child.get_result()}
    return {"status": "rejected"}
'''

TEMPORAL = '''
from datetime import timedelta

from temporalio import activity, workflow

import crashpoint


@crashpoint.effect("refund_card", key="k")
def refund_card(order: str, k: str | None = None) -> dict:
    return {"refunded": order}


@activity.defn
def refund(order: str) -> dict:
    return refund_card(order, k=f"refund-{activity.info().workflow_id}")


@workflow.defn
class RefundChild:
    @workflow.run
    async def run(self, order: str) -> dict:
        return await workflow.execute_activity(refund, order, start_to_close_timeout=timedelta(seconds=10))


@workflow.defn
class AfterApproval:
    def __init__(self) -> None:
        self.verdict = None

    @workflow.signal
    def manager(self, verdict: dict) -> None:
        self.verdict = verdict

    @workflow.run
    async def run(self, order: str) -> dict:
        await workflow.wait_condition(lambda: self.verdict is not None)
        if not self.verdict.get("ok"):
            return {"status": "rejected"}
        refund = await workflow.execute_child_workflow(RefundChild.run, order, id=f"{workflow.info().workflow_id}-refund")
        return {"status": "cancelled", "refund": refund}


@workflow.defn
class BeforeApproval:
    def __init__(self) -> None:
        self.verdict = None

    @workflow.signal
    def manager(self, verdict: dict) -> None:
        self.verdict = verdict

    @workflow.run
    async def run(self, order: str) -> dict:
        child = await workflow.start_child_workflow(RefundChild.run, order, id=f"{workflow.info().workflow_id}-refund")
        await workflow.wait_condition(lambda: self.verdict is not None)
        if not self.verdict.get("ok"):
            return {"status": "rejected"}
        return {"status": "cancelled", "refund": await child}
'''


def _code(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / f"{name}.py").write_text(textwrap.dedent(text))
    return str(tmp_path / "code")


def _gate(result) -> list[str]:
    return [f.message for f in result.failures if f.rule == "target.approval_gate"]


def _dbos(tmp_path: Path, workflow: str) -> Target:
    return Target.from_data({
        "target": "child-gate-dbos", "engine": "dbos", "entry": f"child_app:{workflow}",
        "pythonpath": [_code(tmp_path, "child_app", DBOS_APP)], "inputs": [{"thread": "o1", "input": "77"}],
        "human": {"manager": [{"resume": {"ok": True}}]}, "gates": {"refund_card": "manager"},
        "dbos": {"settle_s": 10}, "budget_s": 120})


@needs("dbos")
def test_dbos_a_child_workflow_started_after_the_grant_passes(tmp_path: Path) -> None:
    target = _dbos(tmp_path, "after_approval")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    child = [c.thread for c in r.outcome.calls if c.effect == "refund_card"]
    assert len(child) == 1 and child[0] != "o1" and r.outcome.parents[child[0]]["parent"] == "o1", \
        (child, r.outcome.parents)


@needs("dbos")
def test_dbos_a_child_workflow_started_before_the_approval_fails(tmp_path: Path) -> None:
    target = _dbos(tmp_path, "before_approval")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "failed", (r.error, [f.message for f in r.failures])
    assert len(_gate(r)) == 1 and "a child workflow of o1" in _gate(r)[0], _gate(r)


def _temporal(tmp_path: Path, workflow: str) -> Target:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return Target.from_data({
        "target": "child-gate-temporal", "engine": "temporal", "entry": f"child_flows:{workflow}",
        "pythonpath": [_code(tmp_path, "child_flows", TEMPORAL)], "inputs": [{"thread": "o1", "input": "77"}],
        "temporal": {"workflows": [f"child_flows:{workflow}", "child_flows:RefundChild"],
                     "activities": ["child_flows:refund"], "settle_s": 5},
        "human": {"manager": [{"resume": {"ok": True}}]}, "gates": {"refund_card": "manager"}, "budget_s": 120})


@needs("temporalio")
def test_temporal_a_child_workflow_started_after_the_grant_passes(tmp_path: Path) -> None:
    target = _temporal(tmp_path, "AfterApproval")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert [c.thread for c in r.outcome.calls if c.effect == "refund_card"] == ["o1-refund"]
    assert r.outcome.parents["o1-refund"]["parent"] == "o1", r.outcome.parents


@needs("temporalio")
def test_temporal_a_child_workflow_started_before_the_approval_fails(tmp_path: Path) -> None:
    target = _temporal(tmp_path, "BeforeApproval")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "failed", (r.error, [f.message for f in r.failures])
    assert len(_gate(r)) == 1 and "o1-refund (a child workflow of o1)" in _gate(r)[0], _gate(r)
