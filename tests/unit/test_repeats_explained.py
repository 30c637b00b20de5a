"""target.repeats_explained on recorded calls: a later attempt of the same activity that the engine itself made
(Temporal retrying after the earlier attempt's timeout or failure) explains one repeat, as a kill does; a repeat in
the same attempt, or one the task does not name as an attempt, is still a finding, unless the ledger answered it by
its key (a ``duplicate``: the effect applied once), which passes with a note (issue 27 item 6)."""

from __future__ import annotations

from pathlib import Path

from crashpoint.api import EffectCall
from crashpoint.harness.run.target_driver import TargetOutcome
from crashpoint.harness.judge.target_rules import repeats_explained
from crashpoint.harness.load.target import Target

TARGET = Target(name="t", entry="m:wf", engine="temporal", inputs=[{"thread": "refund-1001", "input": 1}])


def _call(seq: int, task: str | None, outcome: str = "applied", pid: int = 100, step: int | None = 1,
          key: str | None = "draft-refund-1001") -> EffectCall:
    return EffectCall(seq=seq, effect="draft_refund", key=key, digest="d", args={}, outcome=outcome,
                      lost=False, pid=pid, thread="refund-1001", node="draft", task=task, durable=True, step=step)


def _run(*calls: EffectCall) -> TargetOutcome:
    out = TargetOutcome("server-crash", "sync", "child_done:refund-1001@NotifyCustomer", Path("."))
    out.calls = list(calls)
    out.pids = [{"pid": 100, "phase": "start", "rc": 0}]
    return out


def test_a_later_attempt_in_the_same_process_is_the_engines_retry() -> None:
    """1.20.0 at load 23: draft's 2 s start_to_close timeout expired, Temporal ran attempt 2 in the same worker
    (the second call a keyed duplicate): explained, no finding."""
    assert repeats_explained(TARGET, _run(_call(1, "attempt 1"), _call(2, "attempt 2", "duplicate")), None) == []


def test_a_repeat_in_the_same_attempt_is_unexplained() -> None:
    found = repeats_explained(TARGET, _run(_call(1, "attempt 1", key=None), _call(2, "attempt 1", key=None)), None)
    assert [f.rule for f in found] == ["target.repeats_explained"]
    assert "no kill, fault or engine retry explains any repeat" in found[0].message


def test_one_retry_explains_one_repeat() -> None:
    found = repeats_explained(TARGET, _run(_call(1, "attempt 1", key=None), _call(2, "attempt 2", key=None),
                                           _call(3, "attempt 2", key=None)), None)
    assert found and "called 3 times" in found[0].message and "explain 1" in found[0].message


def test_another_activity_or_a_task_that_is_no_attempt_explains_nothing() -> None:
    """A later attempt of another activity (another step) of the same thread is no retry of this one; a task that
    does not read ``attempt N`` (LangGraph's checkpoint namespace) is no attempt."""
    assert repeats_explained(TARGET, _run(_call(1, "attempt 1", step=1, key=None),
                                          _call(2, "attempt 2", step=5, key=None)), None)
    assert repeats_explained(TARGET, _run(_call(1, "draft:1", key=None), _call(2, "draft:2", key=None)), None)


def test_an_unexplained_repeat_answered_by_its_key_passes_with_a_note() -> None:
    """The same repeats as above, keyed and answered ``duplicate`` by the ledger: the effect applied once, so no
    finding; the run's notes say what repeated and that its key answered it. Two applied calls under one key (a
    ledger that did not recognise the key) stay a finding."""
    from crashpoint.harness.judge.target_rules import keyed_repeats

    for calls in [(_call(1, "attempt 1"), _call(2, "attempt 1", "duplicate")),
                  (_call(1, "draft:1"), _call(2, "draft:2", "duplicate"), _call(3, "draft:3", "duplicate"))]:
        run = _run(*calls)
        assert repeats_explained(TARGET, run, None) == []
        [note] = keyed_repeats(TARGET, run)
        assert f"draft_refund called {len(calls)} times for one step of refund-1001 (draft)" in note, note
        assert f"answered by its key (draft_refund key=draft-refund-1001 in refund-1001@draft: applied once, " \
               f"{len(calls) - 1} duplicate(s))" in note, note
    assert repeats_explained(TARGET, _run(_call(1, "attempt 1"), _call(2, "attempt 1")), None)


def test_langgraphs_rerun_of_an_interrupted_node_is_named() -> None:
    target = Target(name="t", entry="m:g", engine="langgraph", inputs=[{"thread": "refund-1001", "input": 1}],
                    human={"draft": [{"resume": True}]})
    run = _run(_call(1, "draft:1"), _call(2, "draft:2", "duplicate"))
    assert repeats_explained(target, run, None) == []
    from crashpoint.harness.judge.target_rules import keyed_repeats

    assert keyed_repeats(target, run) == [
        "LangGraph re-runs an interrupted node from its start on resume: 1 call(s) repeated, answered by its key "
        "(draft_refund key=draft-refund-1001 in refund-1001@draft: applied once, 1 duplicate(s))"]


def test_the_sweep_summary_names_the_keyed_repeats() -> None:
    from crashpoint.harness.judge.target_rules import keyed_repeats, keyed_summary
    from crashpoint.harness.model.results import RunResult

    run = _run(_call(1, "draft:1"), _call(2, "draft:2", "duplicate"))
    results = [RunResult("c[sync]", None, "passed", notes=keyed_repeats(TARGET, run)) for _ in range(2)]
    lines = keyed_summary(results + [RunResult("c[sync]", "p", "passed")])
    assert lines[0].startswith("answered by key: 2 run(s) repeated a keyed call") and len(lines) == 2, lines
    assert keyed_summary([RunResult("c[sync]", None, "passed")]) == []


def test_a_keyed_repeat_in_a_thread_the_engine_lost_is_still_a_finding() -> None:
    """A thread crashpoint had to submit again (the engine held no record of it: a Temporal server that lost its
    database in a crash) repeats its keyed calls from the start; the key answered them, but the engine lost the
    work: a finding, as before (tests/adapters/test_target_temporal.py's amnesic server)."""
    run = _run(_call(1, "attempt 1"), _call(2, "attempt 1", "duplicate"))
    run.deliveries = [{"kind": "resubmit", "thread": "refund-1001"}]
    found = repeats_explained(TARGET, run, None)
    assert found and "no kill, fault or engine retry explains any repeat" in found[0].message


def _gseq(call: EffectCall, gseq: int) -> EffectCall:
    import dataclasses

    return dataclasses.replace(call, gseq=gseq)


def test_keyed_repeats_all_made_after_a_resubmission_are_ordinary() -> None:
    """A kill before the thread's first checkpoint, before any effect: crashpoint submits the start again, and from
    there a node that interrupts runs again on each resume, its keyed calls answered ``duplicate``: no lost work, so
    no finding (before: every such repeat of the resubmitted thread failed, on a correct LangGraph graph with a
    three-round review killed at ``before_put:T@-1``). A call made before the submission, repeated after it, stays
    the engine's lost work."""
    run = _run(_gseq(_call(1, "attempt 1"), 3), _gseq(_call(2, "attempt 1", "duplicate"), 5))
    run.deliveries = [{"kind": "resubmit", "thread": "refund-1001", "after_gseq": 0}]
    assert repeats_explained(TARGET, run, None) == []
    run.deliveries = [{"kind": "resubmit", "thread": "refund-1001", "after_gseq": 4}]
    found = repeats_explained(TARGET, run, None)
    assert found and "no kill, fault or engine retry explains any repeat" in found[0].message
