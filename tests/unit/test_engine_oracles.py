"""The engine-fact rules (target.queued_once, target.one_live_execution) on recorded facts: each finds what it
names and nothing on a clean run."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.run.target_driver import TargetOutcome
from crashpoint.harness.engines.dbos import one_live_execution, queued_once, replay_deterministic
from crashpoint.harness.load.target import Target

TARGET = Target(name="t", entry="m:wf", engine="dbos", inputs=[{"thread": "w1", "queue": "q", "input": 1}])


def _entry(wf: str, status: str = "SUCCESS", digest: str = "d1", waiting: bool = False) -> dict:
    return {"id": wf, "name": "wf", "queue": "q", "status": status, "digest": digest, "executor": "e",
            "waiting": waiting}


def _run(queued: list[dict] | None, outcomes: list[dict] = (), overlaps: list[dict] = ()) -> TargetOutcome:
    out = TargetOutcome("c", "sync", "p", Path("."))
    out.engine_facts = {"queued": queued, "outcomes": list(outcomes), "overlaps": list(overlaps), "dequeues": []}
    return out


GOLDEN = _run([_entry("w1")], [{"pid": 1, "wf": "w1", "status": "SUCCESS"}])


def test_a_clean_run_has_no_finding() -> None:
    assert queued_once(TARGET, GOLDEN, GOLDEN) == [] and one_live_execution(TARGET, GOLDEN, GOLDEN) == []
    assert queued_once(TARGET, _run([_entry("w1", "PENDING", waiting=True)]), None) == []


def test_queued_work_left_enqueued_is_lost() -> None:
    found = queued_once(TARGET, _run([_entry("w1", "ENQUEUED")]), GOLDEN)
    assert [f.rule for f in found] == ["target.queued_once"] and "still ENQUEUED" in found[0].message


def test_an_input_no_queue_holds_is_lost() -> None:
    found = queued_once(TARGET, _run([]), None)
    assert found and "w1 was to be enqueued but no queue holds it" in found[0].message


def test_the_same_work_under_a_new_id_ran_twice() -> None:
    found = queued_once(TARGET, _run([_entry("w1"), _entry("w1-again")]), GOLDEN)
    assert any("enqueued again under new workflow ids" in f.message and "2 time(s)" in f.message for f in found)


def test_a_final_status_written_twice_ran_to_the_end_twice() -> None:
    outcomes = [{"pid": 1, "wf": "w1", "status": "SUCCESS"}, {"pid": 2, "wf": "w1", "status": "SUCCESS"}]
    found = queued_once(TARGET, _run([_entry("w1")], outcomes), GOLDEN)
    assert any("ran to the end 2 times" in f.message for f in found)


def test_two_live_processes_on_one_workflow() -> None:
    found = one_live_execution(TARGET, _run([], overlaps=[{"pid": 7, "wf": "w1", "holders": [6]}]), None)
    assert [f.rule for f in found] == ["target.one_live_execution"] and "pid 7 while pid(s) 6" in found[0].message
    assert one_live_execution(TARGET, _run([], overlaps=[{"pid": 7, "wf": "w1", "holders": []}]), None) == []


def test_an_engine_that_records_nothing_gives_no_finding() -> None:
    bare = TargetOutcome("c", "sync", "p", Path("."))
    assert queued_once(TARGET, bare, None) == [] and one_live_execution(TARGET, bare, None) == []


def test_a_re_execution_asking_for_another_step_took_another_path() -> None:
    run = _run([])
    run.engine_facts["checks"] = [{"pid": 1, "wf": "w1", "step": 1, "name": "draft"},
                                  {"pid": 1, "wf": "w1", "step": 2, "name": "flag_for_review"},
                                  {"pid": 2, "wf": "w1", "step": 1, "name": "draft"},
                                  {"pid": 2, "wf": "w1", "step": 2, "name": "DBOS.recv"}]
    found = replay_deterministic(TARGET, run, None)
    assert [f.rule for f in found] == ["target.replay_deterministic"]
    assert "step 2 was flag_for_review (pid 1) and then DBOS.recv (pid 2)" in found[0].message
    run.engine_facts["checks"] = run.engine_facts["checks"][:3]
    assert replay_deterministic(TARGET, run, None) == []
