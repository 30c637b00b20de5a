"""Broken variants of examples/temporal_refund, each caught by its named rule in 3 of 3 runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/temporal_refund/target.yaml"


def variant(workflow: str) -> Target:
    """The example's target with the variant ``workflow`` as its entry (and the variants' code registered)."""
    data = Target.from_file(TARGET).to_data() | {"entry": f"temporal_refund.variants:{workflow}"}
    data["temporal"] = data["temporal"] | {"workflows": ["temporal_refund.variants:WORKFLOWS"],
                                           "activities": ["temporal_refund.activities:ACTIVITIES",
                                                          "temporal_refund.variants:ACTIVITIES"]}
    return Target.from_data(data)


@pytest.mark.slow
@pytest.mark.parametrize("workflow, case, point, rule, says", [
    ("RefundWithoutKey", "approved", "after_effect:issue_refund", "side_effects.at_most_once",
     "issue_refund applied 2 times"),
    ("RefundRandomChildId", "approved", "child_done:refund-1001@NotifyCustomer", "target.ends_within_budget",
     "Child workflow id of scheduled event"),
    ("RefundWallClockChildId", "approved", "child_done:refund-1001@NotifyCustomer", "target.ends_within_budget",
     "Child workflow id of scheduled event"),
    ("RefundAmountInValidator", "amount-lowered", "update_done:refund-1001@change_amount",
     "differential.same_end", "state differs in result")])
def test_a_broken_variant_is_caught_3_of_3(tmp_path: Path, workflow: str, case: str, point: str, rule: str,
                                            says: str) -> None:
    """The golden run passes (no worker replays the part that differs); a kill makes the next worker retry the
    activity (no key: the payment applied twice) or replay the history (a child id from uuid4/the wall clock no
    longer matches the history: Temporal's nondeterminism error, quoted; the amount an update's validator set is
    not set again, validators do not run on replay: the whole order refunded)."""
    target = variant(workflow)
    golden = run_one(target, target.case(case), "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    for n in range(1, 4):
        r = run_one(target, target.case(case), "sync", tmp_path / str(n), point, golden.outcome, n)
        assert r.verdict == "failed", r.error
        found = [f for f in r.failures if f.rule == rule]
        assert found and says in found[0].message, [f.message for f in r.failures]
