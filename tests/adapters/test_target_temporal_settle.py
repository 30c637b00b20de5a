"""A Temporal worker's wait for rest (``temporal.settle_s``) is a quiet window: it gives up only after ``settle_s``
seconds in which no workflow of the run, nor any of their children, wrote a history event. A child that runs
longer than ``settle_s`` but keeps making progress is waited for (a slow machine makes every step slower, not the
run wrong); an activity Temporal retries forever (its attempts write no event) is still a finding."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

CODE = '''
import time
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

import crashpoint


@crashpoint.effect("record", key="key")
def record(what: str, key: str | None = None) -> dict:
    return {"recorded": what}


@activity.defn
def note(what: str) -> dict:
    return record(what, key=f"{what}-{activity.info().workflow_id}")


@activity.defn
def always_fails(what: str) -> dict:
    raise RuntimeError("the downstream is down")


@workflow.defn
class TickingChild:
    """``ticks`` half-second timers, one after the other (the dev server fires each about 1 s after it started:
    8 ticks are about 8 s, longer than the target's settle_s), each writing history events."""

    @workflow.run
    async def run(self, ticks: int) -> int:
        for _ in range(ticks):
            await workflow.sleep(0.5)
        return ticks


@workflow.defn
class ContinuedChild:
    """Two half-second timers (about 2 s on the dev server) per run, then ``left`` more runs (continue-as-new)."""

    @workflow.run
    async def run(self, left: int) -> int:
        await workflow.sleep(0.5)
        await workflow.sleep(0.5)
        if left > 0:
            workflow.continue_as_new(left - 1)
        return left


@workflow.defn
class SlowChildParent:
    """Its child: ``TickingChild`` with an int input, else ``{"child": NAME, "n": N}``."""

    @workflow.run
    async def run(self, arg: Any) -> dict:
        child, n = ("TickingChild", arg) if isinstance(arg, int) else (arg["child"], arg["n"])
        await workflow.execute_activity(note, "start", start_to_close_timeout=timedelta(seconds=10))
        done = await workflow.execute_child_workflow(child, n, id=f"{workflow.info().workflow_id}-child")
        return {"ticks": done}


@workflow.defn
class Blocking:
    """Each workflow task blocks 1.5 s: longer than the task timeout of the test (1 s), less than the SDK's deadlock
    detector (2 s). Temporal retries the task without writing each timeout to the history."""

    @workflow.run
    async def run(self, _: int) -> dict:
        await workflow.execute_activity(note, "start", start_to_close_timeout=timedelta(seconds=10))
        while True:
            with workflow.unsafe.sandbox_unrestricted():
                time.sleep(1.5)
            await workflow.sleep(0.1)


@workflow.defn
class RetriedForever:
    """An activity that always fails under Temporal's default retry policy (unbounded attempts)."""

    @workflow.run
    async def run(self, _: int) -> dict:
        await workflow.execute_activity(note, "start", start_to_close_timeout=timedelta(seconds=10))
        return await workflow.execute_activity(always_fails, "x", start_to_close_timeout=timedelta(seconds=10))
'''


def _binary_or_skip() -> None:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def _target(tmp_path: Path, entry: str, settle_s: float, input: Any = 8, **temporal: Any) -> Target:
    _binary_or_skip()
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "settle_flows.py").write_text(CODE)
    return Target.from_data({
        "target": "settle", "engine": "temporal", "entry": f"settle_flows:{entry}",
        "pythonpath": [str(tmp_path / "code")],
        "temporal": {"workflows": ["settle_flows:SlowChildParent", "settle_flows:TickingChild",
                                   "settle_flows:RetriedForever", "settle_flows:ContinuedChild", "settle_flows:Blocking"],
                     "activities": ["settle_flows:note", "settle_flows:always_fails"], "settle_s": settle_s,
                     **temporal},
        "inputs": [{"thread": "settle-1", "input": input}], "budget_s": 60, "cases": [{"name": "plain"}]})


def test_a_child_that_keeps_writing_events_is_waited_for_past_settle_s(tmp_path: Path) -> None:
    """settle_s 3 s, the child ~8 s of 8 timers: each fired timer is progress, the run finishes. Before
    the quiet window, the worker gave up 3 s after its wait began ("Temporal still runs child settle-1-child once
    this worker gave up waiting": target.ends_within_budget)."""
    target = _target(tmp_path, "SlowChildParent", 3)
    result = run_one(target, target.case("plain"), "sync", tmp_path / "run", None, None, keep=True)
    assert result.verdict == "passed", (result.error, [f.message for f in result.failures])
    assert result.outcome.threads["settle-1"]["status"] == "finished"
    assert result.outcome.threads["settle-1"]["values"]["result"] == {"ticks": 8}


def test_a_child_that_continues_as_new_is_waited_for_in_its_new_runs(tmp_path: Path) -> None:
    """settle_s 3 s, the child 4 runs of about 2 s each (continue-as-new): each run's events are progress. Before,
    the child was described by the run its parent's pending child entry names (the first): from the first
    continue-as-new on, no progress, and the worker gave up 3 s later ("Temporal still runs child settle-1-child
    once this worker gave up waiting (3 s with no new history event ...)": target.ends_within_budget)."""
    target = _target(tmp_path, "SlowChildParent", 3, input={"child": "ContinuedChild", "n": 3})
    result = run_one(target, target.case("plain"), "sync", tmp_path / "run", None, None, keep=True)
    assert result.verdict == "passed", (result.error, [f.message for f in result.failures])
    assert result.outcome.threads["settle-1"]["values"]["result"] == {"ticks": 0}


def test_an_activity_retried_forever_still_ends_as_a_finding_after_settle_s_of_quiet(tmp_path: Path) -> None:
    """An attempt of a retried activity writes no history event: not progress. The worker gives up after settle_s
    with no event and the run fails target.ends_within_budget, naming the activity and its attempt, well within
    the driver's budget (60 s)."""
    target = _target(tmp_path, "RetriedForever", 3)
    result = run_one(target, target.case("plain"), "sync", tmp_path / "run", None, None, keep=True)
    assert result.verdict == "failed", result.error
    found = [f.message for f in result.failures if f.rule == "target.ends_within_budget"]
    assert found and "activity always_fails (attempt" in found[0], [f.message for f in result.failures]
    assert result.outcome.over_budget is None and result.wall_s < 40, result.wall_s


def test_a_workflow_task_that_keeps_timing_out_is_a_finding_that_says_so(tmp_path: Path) -> None:
    """Its retries write no event: the worker gives up after settle_s of quiet and the run fails
    target.ends_within_budget, naming the timed-out task. Before, the message said "Temporal still runs a workflow
    task" and no more."""
    target = _target(tmp_path, "Blocking", 3, task_timeout_s=1)
    result = run_one(target, target.case("plain"), "sync", tmp_path / "run", None, None, keep=True)
    assert result.verdict == "failed", result.error
    found = [f.message for f in result.failures if f.rule == "target.ends_within_budget"]
    assert found and "a workflow task (attempt " in found[0] and "which timed out (event " in found[0], found
    assert "temporal.task_timeout_s" in found[0] and result.outcome.over_budget is None, found


def test_an_attempt_a_killed_worker_started_is_waited_for_until_temporal_times_it_out(tmp_path: Path) -> None:
    """The worker is killed inside ``note`` (start_to_close_timeout 10 s); Temporal retries it only once that attempt
    times out, writing no event meanwhile. Before, the recovering worker gave up settle_s (3 s) into that quiet and
    correct code failed target.ends_within_budget ("Temporal still runs activity note (attempt 1) once this worker
    gave up waiting") and final_state_like_golden; now the quiet window counts from the attempt's timeout."""
    target = _target(tmp_path, "SlowChildParent", 3, input=1)
    golden = run_one(target, target.case("plain"), "sync", tmp_path / "golden", None, None)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    result = run_one(target, target.case("plain"), "sync", tmp_path / "run", "after_effect:record", golden.outcome,
                     keep=True)
    assert result.verdict == "passed", (result.error, [f.message for f in result.failures])
    assert result.outcome.threads["settle-1"]["values"]["result"] == {"ticks": 1}
