"""The default sweep's effect faults on real LangGraph runs (issue 28 items 7 and 9): every effect the golden run
applied times out once (nothing applied) and loses its answer once (applied), raised in the worker, so the team's
retry and error handling runs at every effect. Code that swallows the error and makes up an answer fails; code that
does not retry a call stops there, and passes with a note; a retry with a fresh key pays twice."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/langgraph_refund/target.yaml"
REALBUGS = ROOT / "tests/data/realbugs"


def _faulted(result) -> dict[str, object]:
    return {r.crash_point: r for r in result.results if r.crash_point and r.crash_point.startswith("fault:")}


def test_the_example_survives_its_effect_faults_and_a_node_that_makes_up_an_answer_fails(tmp_path: Path) -> None:
    example = Target.from_file(EXAMPLE)
    ok = sweep(example, cases=["approved"], crash="sampled", workdir=tmp_path / "ok", keep_outcomes=True)
    runs = _faulted(ok)
    # each effect's first application times out, each application (the customer is told twice) loses its answer
    assert sorted(runs) == sorted([f"fault:{e}#1={o}" for e in ("draft_refund", "notify_customer", "issue_refund")
                                   for o in ("timeout", "lost_response")] + ["fault:notify_customer#2=lost_response"])
    assert ok.counts()["passed"] == len(ok.results) and ok.runs_by_kind()["effect_fault"] == 7, [
        (r.crash_point, r.error, r.failures) for r in ok.results if r.verdict != "passed"]
    # notify_received has no retry policy: the thread stops at the e-mail's fault, which is said, not failed
    stopped = [n for n in runs["fault:notify_customer#1=timeout"].outcome.notes if "stopped at the injected" in n]
    assert stopped and stopped[0].startswith("thread order-1001 stopped at the injected timeout of notify_customer")
    assert not any("stopped at the injected" in n for n in runs["fault:issue_refund#1=timeout"].outcome.notes)

    broken = sweep(dataclasses.replace(example, entry="langgraph_refund.variants:swallows_errors"), cases=["approved"],
                   crash="sampled", workdir=tmp_path / "broken", keep_outcomes=True)
    failed = {r.crash_point: {f.rule for f in r.failures} for r in broken.results if r.verdict != "passed"}
    assert set(failed) == {"fault:issue_refund#1=timeout", "fault:issue_refund#1=lost_response"}, failed
    assert {"target.expected_effects", "differential.same_effects"} <= failed["fault:issue_refund#1=timeout"]
    assert "differential.same_end" in failed["fault:issue_refund#1=lost_response"]


def test_a_retry_with_a_fresh_key_pays_twice_in_the_fault_free_case_by_default(tmp_path: Path) -> None:
    """Before, only the team's own payments-flaky case (a lost response it wrote) showed it."""
    broken = sweep(Target.from_file(REALBUGS / "random_key.yaml"), cases=["ok"], crash="sampled",
                   workdir=tmp_path / "broken")
    lost = _faulted(broken)["fault:refund#1=lost_response"]
    assert lost.verdict == "failed" and {"target.fresh_key_repeat", "target.expected_effects"} <= {
        f.rule for f in lost.failures}, (lost.error, lost.failures)
    fixed = sweep(Target.from_file(REALBUGS / "random_key_fixed.yaml"), cases=["ok"], crash="sampled",
                  workdir=tmp_path / "fixed")
    assert fixed.counts()["passed"] == len(fixed.results) and len(_faulted(fixed)) == 2, [
        (r.crash_point, r.error, r.failures) for r in fixed.results if r.verdict != "passed"]
