"""Time compressed on Temporal targets (issue 28 item 4): a durable timer of days fires within about a second in a
run (the worker shortens each StartTimer command, :func:`~crashpoint.harness.engines.temporal_worker.compress_timers`),
a deadline a reviewer still has to answer runs as written, ``temporal.time_scale: 1`` turns it off, and a history of
compressed timers replays against the code's own durations (Temporal matches timers by sequence, not duration)."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from crashpoint.harness.engines.base import engine_for
from crashpoint.harness.engines.workerlib import compressed_s
from crashpoint.harness.load.target import Target
from crashpoint.harness.run.target_sweep import run_one

DATA = Path(__file__).resolve().parents[1] / "data" / "temporal_time"
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_compressed_seconds_keep_the_first_second_and_the_order() -> None:
    assert compressed_s(0.5, 1e6) == 0.5 and compressed_s(40, 1) == 40
    days, hour, minutes = compressed_s(3 * 86400, 1e6), compressed_s(3600, 1e6), compressed_s(600, 1e6)
    assert 1 < minutes < hour < days < 1.3


def test_the_sweep_says_time_is_compressed_and_how_much() -> None:
    target = Target.from_file(DATA / "sleep.yaml")
    note = engine_for("temporal").time_note(target)
    assert note is not None and "1e+06x" in note and "3 days take 1.26 s" in note, note
    off = Target.from_data(target.to_data() | {"temporal": {**target.options, "time_scale": 1}},
                           file=str(DATA / "sleep.yaml"))
    assert engine_for("temporal").time_note(off) is None


@pytest.mark.slow  # one golden run: 3 to 8 s
def test_a_sleep_of_three_days_ends_within_seconds(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    target = Target.from_file(DATA / "sleep.yaml")
    began = time.monotonic()
    r = run_one(target, target.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures], r.outcome.threads)
    assert r.outcome.threads["sleep-1"]["status"] == "finished"
    assert time.monotonic() - began < 30


@pytest.mark.slow  # one golden run: 1 to 3 s (three days away is a wait: it rests at once)
def test_time_scale_1_keeps_the_sleep_as_written(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    target = Target.from_file(DATA / "sleep.yaml")
    off = Target.from_data(target.to_data() | {"temporal": {**target.options, "time_scale": 1}}, file=str(DATA / "sleep.yaml"))
    r = run_one(off, off.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.outcome.threads["sleep-1"]["status"] == "waiting"  # three days to go: it rests, never finishes
    assert r.verdict in ("failed", "error")  # expect: finished (and the golden run called no effect)


@pytest.mark.slow  # golden runs of the example: 8 to 15 s each
def test_an_unanswered_deadline_of_an_hour_expires_and_an_answered_one_waits_for_the_answer(tmp_path: Path) -> None:
    pytest.importorskip("temporalio")
    target = Target.from_file(EXAMPLES / "temporal_refund/target.yaml")
    never = run_one(target, target.case("never-answered"), "sync", tmp_path / "never", None, None, keep=True)
    assert never.outcome.threads["refund-1001"]["values"]["result"]["status"] == "expired", never.outcome.threads
    approved = run_one(target, target.case("approved"), "sync", tmp_path / "approved", None, None, keep=True)
    assert approved.verdict == "passed", (approved.error, [f.message for f in approved.failures])
    assert approved.outcome.threads["refund-1001"]["values"]["result"]["status"] == "issued"


@pytest.mark.slow  # a dev server and one workflow: 3 to 6 s
def test_a_history_of_compressed_timers_replays_against_the_written_durations(tmp_path: Path) -> None:
    """What makes compressing the command sound: the SDK's replay matches a StartTimer command with its
    TimerStarted event by sequence number, not by duration."""
    pytest.importorskip("temporalio")
    import sys

    from temporalio.client import Client
    from temporalio.worker import Replayer, UnsandboxedWorkflowRunner, Worker

    from crashpoint.harness.engines import temporal_worker as tw
    from crashpoint.harness.engines.temporal import RunServer

    # on sys.path for the whole test: the Replayer's sandbox imports the workflow's module again by name (removed
    # right after the import, the test failed under -n 2 unless an earlier test had left DATA there)
    sys.path.insert(0, str(DATA))
    import sleeper

    async def main() -> None:
        server = RunServer(tmp_path).start()
        try:
            client = await Client.connect(server.address)
            tw._time_scale = 1e6
            try:
                async with Worker(client, task_queue="q", workflows=[sleeper.Sleeper], activities=[sleeper.remind],
                                  workflow_runner=tw.ProbedRunner(UnsandboxedWorkflowRunner()),
                                  activity_executor=ThreadPoolExecutor(2)):
                    await client.execute_workflow(sleeper.Sleeper.run, {"order_id": "1", "sleep_s": 40.0}, id="w1",
                                                  task_queue="q")
            finally:
                tw._time_scale = 1.0
            history = await client.get_workflow_handle("w1").fetch_history()
            [timer] = [e.timer_started_event_attributes for e in history.events
                       if e.HasField("timer_started_event_attributes")]
            assert timer.start_to_fire_timeout.ToTimedelta().total_seconds() < 1.01  # compressed in the history
            await Replayer(workflows=[sleeper.Sleeper]).replay_workflow(history)  # code: 40 s; history: ~1 s
        finally:
            server.kill()

    try:
        asyncio.run(main())
    finally:
        sys.path.remove(str(DATA))


@pytest.mark.slow  # one golden run: 3 to 6 s
def test_a_sleep_is_compressed_even_while_a_reviewer_has_answers_to_give(tmp_path: Path) -> None:
    """Only a deadline (a timer while the workflow awaits a wait_condition) runs as written for a thread with answers
    to come: a plain sleep of that thread is compressed (read from the sandboxed instance's pending conditions)."""
    pytest.importorskip("temporalio")
    data = Target.from_file(DATA / "sleep.yaml").to_data()
    data["human"] = {"approve": [{"resume": {"approved": True}}]}  # an answer no signal handler ever asks for
    target = Target.from_data(data, file=str(DATA / "sleep.yaml"))
    r = run_one(target, target.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.outcome.threads["sleep-1"]["status"] == "finished"  # three days later, in seconds
