"""DBOS targets: the team's own workflows (examples/dbos_refund) under real SIGKILLs."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.run.target_driver import run_target  # noqa: E402
from crashpoint.harness.engines.effects import alive  # noqa: E402
from crashpoint.harness.judge.target_rules import judge  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "examples/dbos_refund/target.yaml"


@pytest.fixture(scope="module")
def target() -> Target:
    return Target.from_file(TARGET)


@pytest.fixture(scope="module")
def golden(target: Target, tmp_path_factory: pytest.TempPathFactory):
    return run_target(target, target.case("approved"), "sync", tmp_path_factory.mktemp("golden"))


def test_golden_run_of_the_teams_workflows(target: Target, golden) -> None:
    """One workflow started directly, one through the queue; the approvals come to a new process (DBOS.send)."""
    assert {t: s["status"] for t, s in golden.threads.items()} == {"refund-1001": "finished", "refund-1002": "finished"}
    assert golden.threads["refund-1002"]["values"]["output"]["status"] == "issued"
    applied = sorted((c.thread, c.effect, c.node) for c in golden.calls if c.outcome == "applied")
    assert applied == [(t, e, n) for t in ("refund-1001", "refund-1002") for e, n in
                       (("draft_refund", "draft"), ("issue_refund", "issue"), ("notify_customer", "notify"))]
    assert [p["phase"] for p in golden.pids] == ["start", "answer"] and golden.kills == 0
    for point in ("before_status:refund-1001@PENDING", "after_status:refund-1002@ENQUEUED", "step:refund-1001@draft",
                  "before_result:refund-1001@draft", "recv:refund-1002@approval", "after_recv:refund-1001@approval",
                  "dequeued:refund-1002@refunds", "before_send:refund-1001@approval", "before_effect:issue_refund",
                  "before_status:refund-1002@SUCCESS"):
        assert point in golden.crash_points, point
    assert judge(target, golden, None) == ([], [])


@pytest.mark.slow
@pytest.mark.parametrize("point", ["after_effect:draft_refund", "before_result:refund-1002@draft",
                                   "recv:refund-1001@approval", "before_send:refund-1002@approval",
                                   "after_status:refund-1002@ENQUEUED"])
def test_a_verified_kill_is_recovered_by_dbos_launch_in_a_new_process(target: Target, golden, tmp_path: Path,
                                                                       point: str) -> None:
    out = run_target(target, target.case("approved"), "sync", tmp_path, point)
    killed = [p for p in out.pids if p["rc"] == -9]
    assert len(killed) == 1 and out.kills == 1 and out.fired == [point]
    assert not alive(killed[0]["pid"])
    assert {s["status"] for s in out.threads.values()} == {"finished"}
    assert judge(target, out, golden) == ([], [])


def test_an_async_durability_is_unsupported_on_dbos(target: Target, tmp_path: Path) -> None:
    from crashpoint.harness.run.target_driver import TargetUnsupported

    with pytest.raises(TargetUnsupported, match="DBOS records each step"):
        run_target(target, target.case("approved"), "async", tmp_path)
