"""No false alarm on a correct graph whose review node interrupts several times: its whole default sweep passes
(kills, recovery pairs, forced races, effect faults at each round's notification). Before, the kill at the thread's
first checkpoint write (``before_put:order-5@-1``, nothing applied yet) made crashpoint submit the start again, and
every keyed repeat of the interrupting node after that failed target.repeats_explained."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import sweep  # noqa: E402

TARGET = Path(__file__).resolve().parents[1] / "data/realbugs/review_rounds.yaml"


def test_a_three_round_review_passes_its_whole_default_sweep(tmp_path: Path) -> None:
    result = sweep(Target.from_file(TARGET), crash="sampled", workdir=tmp_path)
    assert result.counts()["passed"] == len(result.results), [
        (r.crash_point, r.verdict, r.error, [f.message for f in r.failures]) for r in result.results
        if r.verdict != "passed"]
    faulted = sorted(r.crash_point for r in result.results if r.crash_point and r.crash_point.startswith("fault:"))
    assert faulted == ["fault:issue_refund#1=lost_response", "fault:issue_refund#1=timeout",
                       "fault:notify_reviewer#1=lost_response", "fault:notify_reviewer#1=timeout",
                       "fault:notify_reviewer#2=lost_response", "fault:notify_reviewer#3=lost_response"]
    assert "before_put:order-5@-1" in {r.crash_point for r in result.results}
