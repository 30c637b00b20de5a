"""Broken variants of examples/prefect_refund (examples/prefect_refund/variants.py), each caught by its named rule
in 3 of 3 runs, while the example's own flow passes the same run."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("prefect")

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/prefect_refund/target.yaml"


def variant(flow: str) -> Target:
    """The example's target with the variant flow ``flow`` as its entry."""
    return Target.from_data(Target.from_file(TARGET).to_data() | {"entry": f"prefect_refund.variants:{flow}"})


@pytest.mark.slow
@pytest.mark.parametrize("flow, case, point, rule, says", [
    ("refund_without_key", "approved", "after_effect:issue_refund", "side_effects.at_most_once",
     "issue_refund"),
    ("refund_clock_key", "approved", "after_result:refund-1001@issue_refund", "target.cached_not_rerun",
     "the retry computed another key"),
    ("refund_hook_raises", "payment-declined", None, "target.rollback_complete",
     "raised ValueError: Could not retrieve value"),
    ("refund_draft_first", "approved", None, "target.approval_gate", "draft_refund"),
    ("refund_task_retries_in_transaction", "approved", "fault:issue_refund#1=timeout",
     "target.invariant:issued_or_voided_never_both", "issued and its draft voided"),
    ("refund_declines_on_any_error", "approved", "fault:issue_refund#1=lost_response",
     "target.invariant:issued_or_voided_never_both", "issued and its draft voided")])
def test_a_broken_variant_is_caught_3_of_3(tmp_path: Path, flow: str, case: str, point: str | None, rule: str,
                                            says: str) -> None:
    """The key-less issue repeats the payment after a kill before the transaction's commit; the wall-clock cache key
    makes the retried flow run miss the draft's persisted result; the raising rollback hook leaves the declined
    refund's draft un-voided (a golden run shows it); the draft made before the approval breaks the gate; a task
    Prefect retries inside the transaction rolls it back (the draft voided) at its first attempt's timeout, then
    issues the refund; an issue whose lost answer is taken for a decline voids the draft of an issued refund."""
    target = variant(flow)
    golden = run_one(target, target.case(case), "sync", tmp_path / "golden", None, None, keep=True)
    if point is None:  # caught by the golden run itself
        runs = [golden] + [run_one(target, target.case(case), "sync", tmp_path / str(n), None, None, keep=True)
                           for n in (1, 2)]
    else:
        assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
        runs = [run_one(target, target.case(case), "sync", tmp_path / str(n), point, golden.outcome, n)
                for n in (1, 2, 3)]
    for r in runs:
        assert r.verdict == "failed", (r.verdict, r.error, [f.message for f in r.failures])
        found = [f for f in r.failures if f.rule == rule]
        assert found and says in found[0].message, [f.message for f in r.failures]
