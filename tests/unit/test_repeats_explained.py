"""target.repeats_explained on recorded calls: a later attempt of the same activity that the engine itself made
(Temporal retrying after the earlier attempt's timeout or failure) explains one repeat, as a kill does; a repeat in
the same attempt, or one the task does not name as an attempt, is still a finding."""

from __future__ import annotations

from pathlib import Path

from crashpoint.api import EffectCall
from crashpoint.harness.run.target_driver import TargetOutcome
from crashpoint.harness.judge.target_rules import repeats_explained
from crashpoint.harness.load.target import Target

TARGET = Target(name="t", entry="m:wf", engine="temporal", inputs=[{"thread": "refund-1001", "input": 1}])


def _call(seq: int, task: str | None, outcome: str = "applied", pid: int = 100, step: int | None = 1) -> EffectCall:
    return EffectCall(seq=seq, effect="draft_refund", key="draft-refund-1001", digest="d", args={}, outcome=outcome,
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
    found = repeats_explained(TARGET, _run(_call(1, "attempt 1"), _call(2, "attempt 1", "duplicate")), None)
    assert [f.rule for f in found] == ["target.repeats_explained"]
    assert "no kill, fault or engine retry explains any repeat" in found[0].message


def test_one_retry_explains_one_repeat() -> None:
    found = repeats_explained(TARGET, _run(_call(1, "attempt 1"), _call(2, "attempt 2", "duplicate"),
                                           _call(3, "attempt 2", "duplicate")), None)
    assert found and "called 3 times" in found[0].message and "explain 1" in found[0].message


def test_another_activity_or_a_task_that_is_no_attempt_explains_nothing() -> None:
    """A later attempt of another activity (another step) of the same thread is no retry of this one; a task that
    does not read ``attempt N`` (LangGraph's checkpoint namespace) is no attempt."""
    assert repeats_explained(TARGET, _run(_call(1, "attempt 1", step=1), _call(2, "attempt 2", "duplicate", step=5)),
                             None)
    assert repeats_explained(TARGET, _run(_call(1, "draft:1"), _call(2, "draft:2", "duplicate")), None)
