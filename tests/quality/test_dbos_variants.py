"""Broken variants of examples/dbos_refund, each caught by its named rule in 3 of 3 runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/dbos_refund/target.yaml"


@pytest.mark.slow
@pytest.mark.parametrize("workflow, rule", [("refund_without_key", "side_effects.at_most_once"),
                                            ("refund_with_clock_key", "differential.same_effects")])
def test_a_broken_issue_step_is_caught_3_of_3(tmp_path: Path, workflow: str, rule: str) -> None:
    """A kill after the payment and before DBOS records the step's result: DBOS runs the step again, and only
    a key derived from the workflow lets the payments API recognise the repeat."""
    data = Target.from_file(TARGET).to_data() | {"entry": f"dbos_refund.variants:{workflow}"}
    data["inputs"] = data["inputs"][:1]
    target = Target.from_data(data)
    golden = run_one(target, target.case("approved"), "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    for n in range(1, 4):
        r = run_one(target, target.case("approved"), "sync", tmp_path / str(n), "after_effect:issue_refund",
                    golden.outcome, n)
        assert r.verdict == "failed", r.error
        rules = {f.rule for f in r.failures}
        assert rule in rules, rules


def _slow_draft_target(workflow: str) -> Target:
    data = Target.from_file(TARGET).to_data() | {"entry": workflow}
    data["inputs"] = data["inputs"][:1]
    data["cases"] = [{"name": "slow-draft", "faults": [{"effect": "draft_refund", "outcome": "slow", "seconds": 0.5}]}]
    return Target.from_data(data)


@pytest.mark.slow
def test_a_workflow_branching_on_the_wall_clock_is_caught_3_of_3(tmp_path: Path) -> None:
    """The timed variant flags a slow draft (0.5 s, a scripted slow fault) from the workflow body; the answer comes
    to a new worker, where DBOS runs the workflow again with the draft recorded: the branch flips."""
    control = _slow_draft_target("dbos_refund.app:refund_workflow")
    ok = run_one(control, control.case("slow-draft"), "sync", tmp_path / "control", None, None)
    assert ok.verdict == "passed", (ok.error, [f.message for f in ok.failures])
    target = _slow_draft_target("dbos_refund.variants:refund_timed_review")
    for n in range(1, 4):
        r = run_one(target, target.case("slow-draft"), "sync", tmp_path / str(n), None, None)
        found = [f.message for f in r.failures if f.rule == "target.replay_deterministic"]
        assert r.verdict == "failed" and found, (r.error, [f.message for f in r.failures])
        assert "step 2 was flag_for_review" in found[0] and "then DBOS.recv" in found[0]


@pytest.mark.slow
def test_a_denial_path_that_skips_the_void_is_caught_and_the_example_passes(tmp_path: Path) -> None:
    """Issue 28 item 10: the example's ``compensations`` say void_draft undoes draft_refund unless the refund was
    issued; the variant that forgets the void on denial fails target.compensated on the golden run of ``denied``
    (before: nothing in a target said what compensates what, and such a variant passed every run)."""
    for workflow, verdict in (("dbos_refund.app:refund_workflow", "passed"),
                              ("dbos_refund.variants:refund_without_void", "failed")):
        data = Target.from_file(TARGET).to_data() | {"entry": workflow}
        data["inputs"] = data["inputs"][:1]
        target = Target.from_data(data)
        for case in ("denied", "approved"):
            r = run_one(target, target.case(case), "sync", tmp_path / f"{workflow}-{case}", None, None)
            want = verdict if case == "denied" else "passed"
            assert r.verdict == want, (workflow, case, r.error, [f.message for f in r.failures])
            if want == "failed":
                found = [f.message for f in r.failures if f.rule == "target.compensated"]
                assert found and "draft_refund was applied 1 time(s), but its compensation void_draft was applied " \
                                 "0 time(s)" in found[0], [f.message for f in r.failures]


@pytest.mark.slow
def test_a_step_that_makes_up_an_answer_fails_the_default_effect_fault_and_the_example_stops(tmp_path: Path) -> None:
    """Issue 28 items 7 and 9: the default sweep times out issue_refund once (nothing applied). The example's step
    has no retries: DBOS ends the workflow on the error, which passes with a note; the variant that catches every
    error and returns a made-up "issued" finishes with no refund made (before: 0 of 220 runs failed)."""
    spec = "fault:issue_refund#1=timeout"
    for workflow, verdict in (("dbos_refund.app:refund_workflow", "passed"),
                              ("dbos_refund.variants:refund_swallowing_errors", "failed")):
        data = Target.from_file(TARGET).to_data() | {"entry": workflow}
        data["inputs"] = data["inputs"][:1]
        target = Target.from_data(data)
        golden = run_one(target, target.case("approved"), "sync", tmp_path / f"{workflow}-golden", None, None)
        assert golden.verdict == "passed", (workflow, golden.error, [f.message for f in golden.failures])
        r = run_one(target, target.case("approved"), "sync", tmp_path / workflow, spec, golden.outcome)
        assert r.verdict == verdict, (workflow, r.error, [f.message for f in r.failures])
        if verdict == "failed":
            assert "differential.same_effects" in {f.rule for f in r.failures}, [f.message for f in r.failures]
        else:
            assert any(n.startswith("thread refund-1001 stopped at the injected timeout of issue_refund")
                       for n in r.outcome.notes), r.outcome.notes
