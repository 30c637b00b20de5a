"""``expect``'s effect counts on real LangGraph runs (issue 28 item 9): a refund keyed by a fresh UUID per call pays
twice in the golden run of a case with a lost response (the node's RetryPolicy sends a new key), which
``differential.same_effects`` takes for the reference; ``effects: {refund: 1}`` fails that golden run on its own. The
fixed graph (a key from the order) passes the same runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import sweep  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "data/realbugs"


def test_a_golden_run_that_pays_twice_fails_and_the_fixed_graph_passes(tmp_path: Path) -> None:
    broken = sweep(Target.from_file(HERE / "random_key.yaml"), crash="none", workdir=tmp_path / "broken")
    verdicts = {r.case_id: (r.verdict, {f.rule for f in r.failures}) for r in broken.results}
    assert verdicts["ok[sync]"] == ("passed", set())
    assert verdicts["payments-flaky[sync]"][0] == "failed" and "target.expected_effects" in verdicts[
        "payments-flaky[sync]"][1]
    (flaky,) = [r for r in broken.results if r.case_id == "payments-flaky[sync]"]
    message = next(f.message for f in flaky.failures if f.rule == "target.expected_effects")
    assert message.startswith("thread order-9: refund applied 2 time(s), expected 1 (keys: ")
    fixed = sweep(Target.from_file(HERE / "random_key_fixed.yaml"), crash="none", workdir=tmp_path / "fixed")
    assert [r.verdict for r in fixed.results] == ["passed", "passed"], [r.failures for r in fixed.results]
