"""Answers as real APIs give them, on a target (issue 28 item 8): the LangGraph example's payments node that keeps
whatever ``issue_refund`` answered (``variants:trusts_the_answer``, a team's shape: ``resp = issue_refund(...); return
{"refund": resp}``) is caught when that answer is empty or garbled after the refund went out; the example's graph,
which sees it is not a refund and asks again with the same key (answered ``duplicate`` with the real refund), and
which waits a rate limit's ``retry_after`` before its retry, passes the same runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASE = Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")
BROKEN = dataclasses.replace(BASE, entry="langgraph_refund.variants:trusts_the_answer")


def _with(target: Target, outcome: str, **extra: object):
    return target.case("approved").with_faults([{"kind": "tool", "tool": "issue_refund", "call": 1, "outcome": outcome,
                                                 **extra}])


@pytest.mark.parametrize("outcome", ["empty_answer", "malformed_answer"])
def test_keeping_an_empty_or_garbled_answer_fails_expected_end_and_the_fixed_node_passes(tmp_path: Path,
                                                                                          outcome: str) -> None:
    bad = run_one(BROKEN, _with(BROKEN, outcome), "sync", tmp_path / "bad", None, None)
    assert bad.verdict == "failed", bad.error
    assert "target.expected_end" in {f.rule for f in bad.failures}, [f.message for f in bad.failures]
    good = run_one(BASE, _with(BASE, outcome), "sync", tmp_path / "good", None, None)
    assert good.verdict == "passed", ([f.message for f in good.failures], good.error)


def test_a_crash_spec_garbles_one_answer_and_the_differential_catches_the_variant(tmp_path: Path) -> None:
    spec = "fault:issue_refund#1=malformed_answer"
    golden = run_one(BROKEN, BROKEN.case("approved"), "sync", tmp_path / "golden", None, None).outcome
    bad = run_one(BROKEN, BROKEN.case("approved"), "sync", tmp_path / "bad", spec, golden)
    assert bad.verdict == "failed", bad.error
    rules = {f.rule for f in bad.failures}
    assert {"differential.same_end", "target.expected_end"} & rules, [f.message for f in bad.failures]
    base_golden = run_one(BASE, BASE.case("approved"), "sync", tmp_path / "base-golden", None, None).outcome
    good = run_one(BASE, BASE.case("approved"), "sync", tmp_path / "good", spec, base_golden)
    assert good.verdict == "passed", ([f.message for f in good.failures], good.error)


def test_a_rate_limit_waited_out_and_retried_with_the_same_key_passes(tmp_path: Path) -> None:
    good = run_one(BASE, _with(BASE, "rate_limited", seconds=0.3), "sync", tmp_path / "good", None, None)
    assert good.verdict == "passed", ([f.message for f in good.failures], good.error)
