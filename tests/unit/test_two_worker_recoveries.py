"""Overlapping recoveries by default (issue 28 item 6): a DBOS target gets, in its sampled sweep, kills whose
recovery is two workers at once (``"A >> 2 workers"``): after its first effect, and at its first claim from a queue
where work is queued."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.engines.dbos import two_worker_recoveries
from crashpoint.harness.engines.base import engine_for
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.process import crashpoints

POINTS = ["before_status:refund-1@ENQUEUED", "step:refund-1@draft", "before_result:refund-1@draft",
          "dequeued:refund-2@refunds", "step:refund-2@draft", "after_effect:draft_refund#2",
          "before_result:refund-2@draft", "after_status:refund-2@SUCCESS"]


def _target(queued: bool) -> Target:
    second = {"thread": "refund-2", "input": 2, **({"queue": "refunds"} if queued else {})}
    return Target.from_data({"target": "t", "engine": "dbos", "entry": "m:w", "dbos": {},
                             "inputs": [{"thread": "refund-1", "input": 1}, second]})


def _golden(tmp_path: Path) -> TargetOutcome:
    return TargetOutcome("c", "sync", None, tmp_path, crash_points=list(POINTS))


def test_two_workers_recover_after_the_first_effect_and_at_the_first_claim_from_a_queue(tmp_path: Path) -> None:
    specs = two_worker_recoveries(_golden(tmp_path), _target(True), TargetCase("c"))
    assert specs == ["after_effect:draft_refund#2 >> 2 workers", "dequeued:refund-2@refunds >> 2 workers"]
    for spec in specs:
        parsed = crashpoints.parse(spec)
        assert parsed.together == 2 and parsed.kills == (spec.split(" >> ")[0],)
    assert engine_for("dbos").sampled_extras(_golden(tmp_path), "sync", _target(True), TargetCase("c")) == specs


def test_no_claim_without_a_queue_and_none_where_the_case_recovers_with_several_workers_already(
        tmp_path: Path) -> None:
    assert two_worker_recoveries(_golden(tmp_path), _target(False), TargetCase("c")) == [
        "after_effect:draft_refund#2 >> 2 workers"]
    assert two_worker_recoveries(_golden(tmp_path), _target(True), TargetCase("c", workers=2)) == []
    assert engine_for("langgraph").sampled_extras(_golden(tmp_path), "exit", _target(True), TargetCase("c")) == []
