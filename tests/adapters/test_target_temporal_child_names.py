"""A child workflow whose id comes from ``workflow.uuid4()`` (correct Temporal code: deterministic on replay, drawn
anew per run) is named by its parent and start ordinal in crash points and effect calls, so a crash run reaches the
child's points its golden run passed (issue 27 item 4: ``task_done:child_<uuid>`` came back "never reached")."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("temporalio"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/temporal_refund/target.yaml"

CHILD = "notify-1001-refund-1001.child1"


def variant(workflow: str) -> Target:
    """The example's target with ``temporal_refund.variants:WORKFLOW`` as its entry (the variants registered)."""
    data = Target.from_file(TARGET).to_data() | {"entry": f"temporal_refund.variants:{workflow}"}
    data["temporal"] = data["temporal"] | {"workflows": ["temporal_refund.variants:WORKFLOWS"]}
    return Target.from_data(data)


def test_a_uuid_named_child_has_the_same_crash_points_in_every_run(tmp_path: Path) -> None:
    target = variant("RefundUuidChildId")
    golden = run_one(target, target.case("approved"), "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    child = [p for p in golden.outcome.crash_points if p.split(":", 1)[1].startswith("notify-1001-")]
    points = [next(p for p in child if p.startswith(kind)) for kind in ("task_done:", "after_activity:")]
    for n, point in enumerate(points):  # before: 'crash point task_done:notify-1001-<uuid> was never reached'
        run = run_one(target, target.case("approved"), "sync", tmp_path / str(n), point, golden.outcome)
        assert run.verdict == "passed", (point, run.error, [f.message for f in run.failures])
        assert run.crash_fired
    assert points == [f"task_done:{CHILD}", f"after_activity:{CHILD}@notify"], child
    assert {c.thread for c in golden.outcome.calls if c.effect == "notify_customer"} == {CHILD}
