"""Several DBOS workers recovering at once (case ``workers: K``): each its own executor id, at a barrier, each
asking DBOS to recover the dead executor; the stuck-workflow finding on a DBOS whose recovery loses that work."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbos")

from crashpoint.harness.targets.effects import alive  # noqa: E402
from crashpoint.harness.targets.sweep import run_one  # noqa: E402
from crashpoint.harness.targets.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "examples/dbos_refund/target.yaml"


def _target(setup: str | None = None) -> Target:
    data = Target.from_file(TARGET).to_data()
    data["inputs"] = data["inputs"][:1]  # one workflow: the kill below is its own
    data["cases"] = [{"name": "two-workers-unanswered", "human": {}, "workers": 2}]
    if setup:
        data["dbos"] = {**data["dbos"], "setup": setup}
        data["pythonpath"] = [*data["pythonpath"], str(ROOT / "tests/data/dbos_engines")]
    return Target.from_data(data)


@pytest.mark.slow
def test_two_workers_race_to_recover_the_dead_executors_work(tmp_path: Path) -> None:
    target = _target()
    r = run_one(target, target.case("two-workers-unanswered"), "sync", tmp_path, "after_effect:draft_refund", None,
                keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    recovering = [p for p in r.outcome.pids if p["phase"] == "recover"]
    assert len(recovering) == 2 and len({p["executor"] for p in recovering}) == 2
    assert len({p["pid"] for p in recovering}) == 2 and not any(alive(p["pid"]) for p in recovering)
    assert r.outcome.threads["refund-1001"]["status"] == "waiting"
    assert r.outcome.threads["refund-1001"]["executor"] in {p["executor"] for p in recovering}


@pytest.mark.slow
def test_a_dbos_whose_recovery_loses_the_dead_executors_work_leaves_it_pending(tmp_path: Path) -> None:
    target = _target("broken_recovery:setup")
    r = run_one(target, target.case("two-workers-unanswered"), "sync", tmp_path, "after_effect:draft_refund", None)
    stuck = [f for f in r.failures if f.rule == "target.ends_within_budget"]
    assert r.verdict == "failed" and stuck, (r.error, [f.message for f in r.failures])
    assert "DBOS workflow status PENDING (executor crashpoint-executor" in stuck[0].message
