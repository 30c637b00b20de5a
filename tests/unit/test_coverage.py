"""Vacuity guards and the durability-coverage matrix."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.judge.coverage import step_of
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.judge.document import sweep_data
from crashpoint.harness.run.sweep import sweep

CASES = Path(__file__).resolve().parents[2] / "scenarios" / "refunds" / "cases"


def _data(case_file: str, engine: str = "crashpoint.engine.engine:Engine", **kwargs) -> dict:
    pack, cases = load_target(CASES / case_file)
    return sweep_data(sweep(pack, cases, ReferenceAdapter(engine=engine), jobs=2, **kwargs))


def test_step_of_maps_crash_points_to_workflow_steps() -> None:
    pack, _ = load_target(CASES / "refund_approved_happy_path.yaml")
    wf = pack.workflows["refund"]
    assert step_of("after_effect:refunds.issueRefund", wf) == "issue_refund"
    assert step_of("before_checkpoint:refund_draft#2", wf) == "draft_refund"
    assert step_of("approval_request:refund_approval", wf) == "draft.human_gate"
    assert step_of("after_checkpoint:compensate:draft_refund", wf) == "draft_refund"
    assert step_of("after_checkpoint:workflow_started", wf) == "workflow"


def test_matrix_counts_runs_per_step_and_fault_kind() -> None:
    data = _data("draft_retryable_failure_then_success.yaml")
    cov = data["coverage"]
    assert cov["draft_refund"]["kill@after_effect"]["runs"] >= 3  # three calls of the draft, each killed once
    assert cov["draft_refund"]["tool_failure"] == {"runs": data["summary"]["runs"],
                                                   "passed": data["summary"]["runs"], "failed": 0}
    assert cov["issue_refund"]["kill@before_effect"] == {"runs": 1, "passed": 1, "failed": 0}
    assert "kill@during_recovery" not in cov["issue_refund"]


def test_matrix_shows_where_a_broken_engine_fails() -> None:
    data = _data("cancel_while_waiting_compensates_draft.yaml", "variants.engines:NoCompensationOnCancel",
                 crash="every", only=["after_checkpoint:refund_draft"])
    cell = data["coverage"]["draft_refund"]["kill@after_checkpoint"]
    assert cell == {"runs": 1, "passed": 0, "failed": 1}


def test_unused_faults_are_reported_as_vacuity() -> None:
    data = _data("draft_retries_exhausted.yaml", crash="none")
    (run,) = data["results"]
    assert run["verdict"] == "passed"
    assert "tool script never used: refunds.draftRefundRequest retryable" in run["vacuity"]
    assert any("every one of the 4 tool calls failed" in f for f in run["vacuity"])
    assert data["vacuity"]["runs_with_findings"] == 1
