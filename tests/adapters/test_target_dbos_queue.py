"""Queued work under kills (rule target.queued_once): the refund app's nightly batch puts three refunds on its
``refunds`` queue; each must run exactly once after a kill, and a DBOS whose recovery forgets queued workflows
is caught."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ORDERS = [{"order_id": f"200{n}", "amount_cents": 100 * n} for n in range(1, 4)]


def batch_target(entry: str = "dbos_refund.app:refund_batch", settle_s: float = 20) -> Target:
    """The batch alone: one input, the batch workflow, no human (a worker waits up to ``settle_s`` for rest)."""
    return Target.from_data({
        "target": "dbos-refund-batch", "engine": "dbos", "entry": entry,
        "pythonpath": [str(ROOT / "examples"), str(ROOT / "tests/data/dbos_engines")],
        "dbos": {"setup": "dbos_refund.app:setup", "settle_s": settle_s}, "budget_s": 90,
        "inputs": [{"thread": "batch-1", "input": ORDERS}], "cases": [{"name": "batch"}]})


@pytest.mark.slow
def test_queued_refunds_run_exactly_once_after_a_kill(tmp_path: Path) -> None:
    target = batch_target()
    case = target.case("batch")
    golden = run_one(target, case, "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    queued = golden.outcome.engine_facts["queued"]
    assert [(q["id"], q["queue"], q["status"]) for q in queued] == [(f"batch-1-{n}", "refunds", "SUCCESS")
                                                                     for n in range(1, 4)]
    r = run_one(target, case, "sync", tmp_path / "kill", "after_effect:draft_refund", golden.outcome, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert r.outcome.kills == 1 and {q["status"] for q in r.outcome.engine_facts["queued"]} == {"SUCCESS"}


@pytest.mark.slow
def test_a_dbos_whose_recovery_forgets_queued_workflows_loses_them(tmp_path: Path) -> None:
    target = batch_target("forgetful_queue:refund_batch", settle_s=5)  # the lost work never comes to rest
    case = target.case("batch")
    golden = run_one(target, case, "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    r = run_one(target, case, "sync", tmp_path / "kill", "after_effect:draft_refund", golden.outcome)
    lost = [f.message for f in r.failures if f.rule == "target.queued_once"]
    assert r.verdict == "failed" and lost, (r.error, [f.message for f in r.failures])
    assert any("queued work lost: refund_preapproved batch-1-1 on queue refunds is still PENDING" in m for m in lost)
