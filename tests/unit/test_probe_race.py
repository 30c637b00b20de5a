"""A crash spec's race (``"A with P held until Q"``): the first thread to reach P waits there until some thread or
process of the run has passed Q, so an interleaving an engine leaves to thread timing is forced (issue 28 item 2).

The sample engine below is LangGraph's shape: a node's pending writes and the step's checkpoint are written by two
background threads, nobody waiting for the first. Without the race the kill at the checkpoint write lands after the
writes in nearly every try; with it, before them every time, and an engine that waits for the writes (the fixed
build) never reaches the checkpoint meanwhile: the hold times out and the kill lands with the writes done."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crashpoint.harness.process import crashpoints

SCRIPT = textwrap.dedent('''
    import sys, threading, time
    from crashpoint.harness.process.crashpoints import probe, probe_arg

    run_dir, spec, how = sys.argv[1], sys.argv[2], sys.argv[3]
    waits, slow, late = how == "waits", how == "slow", how == "late"
    if how == "between":  # a loaded machine: each thread loses the CPU right after the probe logged its point
        from crashpoint.harness.process.crashpoints import CrashProbe
        race, record = CrashProbe._race, CrashProbe._record
        CrashProbe._race = lambda self, *a: (time.sleep(0.3), race(self, *a))[1]
        CrashProbe._record = lambda self, *a: (time.sleep(0.6), record(self, *a))[1]
    p = probe(probe_arg(run_dir, spec))
    done = []

    def writes():  # the node's pending writes: submitted, never awaited (unless the engine waits)
        if late:
            time.sleep(0.5)  # its thread is late (a loaded machine): the checkpoint write comes first
        p("before_writes:t@pay")
        done.append("writes")
        p("after_writes:t@pay")

    def checkpoint():
        began = time.monotonic()
        while slow and time.monotonic() - began < 3.0:
            sum(range(1000))  # a loaded machine: the racing thread gets to the checkpoint past RACE_HOLD_S
        p("before_put:t@2")
        print("checkpoint written; writes done before it:", "writes" in done, flush=True)

    w = threading.Thread(target=writes)
    w.start()
    if waits:
        w.join()  # the fixed engine: the step's writes are awaited before its checkpoint
    elif not late:
        time.sleep(0.05)  # the released engine: the writes thread usually wins this race
    c = threading.Thread(target=checkpoint)
    c.start()
    c.join()
    w.join()
    print("not killed", flush=True)
''')


def _run(tmp_path: Path, spec: str, waits: bool, how: str = "races") -> subprocess.CompletedProcess:
    tmp_path.mkdir(parents=True, exist_ok=True)
    how = "waits" if waits else how
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), spec, how],
                          capture_output=True, text=True, timeout=60)


def test_the_spec_reads_its_race() -> None:
    spec = crashpoints.parse("before_put:t@2 with before_writes:t@pay held")
    assert spec.kills == ("before_put:t@2",) and spec.race == ("before_writes:t@pay", "before_put:t@2")
    spec = crashpoints.parse("before_result:a@check >> 2 workers with requeue:a held until dequeued:a@q#2")
    assert (spec.kills, spec.together, spec.race) == (("before_result:a@check",), 2, ("requeue:a", "dequeued:a@q#2"))
    assert crashpoints.parse("before_put:t@2").race is None
    assert crashpoints.schedule("before_put:t@2 with before_writes:t@pay held") == ["before_put:t@2"]
    for bad in ("before_put:t@2 with before_writes:t@pay", "x with y held until"):
        with pytest.raises(ValueError, match="a race reads"):
            crashpoints.parse(bad)
    with pytest.raises(ValueError, match="needs its point"):
        crashpoints.parse("P || worker with Q held")


def test_without_the_race_the_writes_win_and_with_it_the_kill_lands_before_them(tmp_path: Path) -> None:
    plain = _run(tmp_path / "plain", "before_put:t@2", waits=False)
    assert plain.returncode == -signal.SIGKILL
    assert crashpoints.passed(tmp_path / "plain").index("after_writes:t@pay") < \
        crashpoints.passed(tmp_path / "plain").index("before_put:t@2")
    for n in range(3):
        where = tmp_path / f"race{n}"
        raced = _run(where, "before_put:t@2 with before_writes:t@pay held", waits=False)
        assert raced.returncode == -signal.SIGKILL, raced.stdout + raced.stderr
        passed = crashpoints.passed(where)
        assert "after_writes:t@pay" not in passed and passed[-1] == "before_put:t@2", passed
        race = crashpoints.races(where)
        assert [(r["held"], r["until"]) for r in race] == [("before_writes:t@pay", "before_put:t@2")]
        assert race[0]["end"] in ("met", "killed")


def test_an_engine_that_waits_for_the_held_thread_is_released_after_the_limit(tmp_path: Path) -> None:
    done = _run(tmp_path, "before_put:t@2 with before_writes:t@pay held", waits=True)
    assert done.returncode == -signal.SIGKILL
    passed = crashpoints.passed(tmp_path)
    assert passed.index("after_writes:t@pay") < passed.index("before_put:t@2")
    race = crashpoints.races(tmp_path)
    assert race[0]["end"] == "timeout" and crashpoints.RACE_HOLD_S <= race[0]["seconds"] < \
        crashpoints.RACE_HOLD_LIMIT_S, race


def test_a_released_engine_slow_to_reach_the_point_is_still_forced(tmp_path: Path) -> None:
    """Under load the released build's racing thread may reach ``Q`` later than :data:`RACE_HOLD_S`: the hold lasts
    while that thread runs, so the race is forced as on a quiet machine (a 2 s wall limit let the writes finish
    first and the sweep's forced run passed the released langgraph once, in a suite on two processes)."""
    raced = _run(tmp_path, "before_put:t@2 with before_writes:t@pay held", waits=False, how="slow")
    assert raced.returncode == -signal.SIGKILL, raced.stdout + raced.stderr
    passed = crashpoints.passed(tmp_path)
    assert "after_writes:t@pay" not in passed and passed[-1] == "before_put:t@2", (passed, crashpoints.races(tmp_path))


def _killed_while_held(tmp_path: Path, how: str) -> list[str]:
    """Run the race with the sample engine's timing ``how``; require the kill with the writes thread held at its
    point (no writes after it, the race line ``killed``) and return the crash points passed, in order."""
    raced = _run(tmp_path, "before_put:t@2 with before_writes:t@pay held", waits=False, how=how)
    assert raced.returncode == -signal.SIGKILL, raced.stdout + raced.stderr
    passed = crashpoints.passed(tmp_path)
    assert "after_writes:t@pay" not in passed, passed
    race = crashpoints.races(tmp_path)
    assert [(r["held"], r["end"]) for r in race] == [("before_writes:t@pay", "killed")], race
    return passed


def test_a_kill_point_come_before_the_held_thread_waits_for_it(tmp_path: Path) -> None:
    """The other way round: the writes thread is so late that the checkpoint write (the kill) comes before any thread
    reached the held point. The kill waits until that thread is held there, so the run is the interleaving the race
    names, forced, not a plain kill ("race not held", seen in a serial CI run of the langgraph sweep at 1123e17)."""
    passed = _killed_while_held(tmp_path, "late")
    assert passed.index("before_put:t@2") < passed.index("before_writes:t@pay")


def test_a_kill_decided_while_the_held_thread_is_late_to_its_hold_still_holds_it(tmp_path: Path) -> None:
    """P is logged first, then its thread loses the CPU; Q comes meanwhile and decides the kill, whose thread loses
    the CPU too before the SIGKILL. P's thread, back, finds Q in the log: the kill is on its way, so it is held at P,
    not let on to write (it went on, and the forced run passed the released langgraph in 4 of 20 runs at load 4)."""
    passed = _killed_while_held(tmp_path, "between")
    assert passed.index("before_writes:t@pay") < passed.index("before_put:t@2")


def test_a_race_whose_kill_landed_before_the_hold_is_noted_as_forced() -> None:
    """The SIGKILL at Q may land before P's thread got to its hold: no race line, yet P was passed before Q and that
    thread went no further. The note says the race was forced; "not held" is kept for a P that never came first."""
    from crashpoint.harness.run.target_driver import race_notes

    spec = "before_put:t@2 with before_writes:t@pay held"
    assert race_notes(spec, [], ["before_writes:t@pay", "before_put:t@2"])[0].startswith("race forced")
    assert race_notes(spec, [], ["before_put:t@2", "before_writes:t@pay"])[0].startswith("race not held")
    assert race_notes(spec, [], ["before_put:t@2"])[0].startswith("race not held")


def test_no_hold_once_the_point_waited_for_has_come(tmp_path: Path) -> None:
    """A thread that reaches P after Q (here: the recovery's, Q already in the run's log) is not held: nothing is
    left to force, and the race's record stays the first process's."""
    (tmp_path / crashpoints.LOG_FILE).write_text("before_put:t@2\n")
    probe = crashpoints.CrashProbe(tmp_path, race=("before_writes:t@pay", "before_put:t@2"))
    probe("before_writes:t@pay")
    assert crashpoints.races(tmp_path) == []


def test_a_target_runs_kill_schedule_keeps_the_race_for_the_probe() -> None:
    """The driver joins a case's own kill faults and the sweep's crash spec into one schedule: the race must reach the
    probe (since e179690 it was dropped there, and every forced race of a sweep ran as a plain kill: 'race not held'),
    naming its point, which is no longer the schedule's first kill when the case kills first."""
    from crashpoint.harness.load.target import TargetCase
    from crashpoint.harness.run.target_driver import kill_schedule

    plain = TargetCase("c")
    assert kill_schedule(plain, "before_put:t@2 with before_writes:t@pay held") == \
        "before_put:t@2 with before_writes:t@pay held until before_put:t@2"
    spec = crashpoints.parse(kill_schedule(plain, "before_put:t@2 with before_writes:t@pay held"))
    assert spec.kills == ("before_put:t@2",) and spec.race == ("before_writes:t@pay", "before_put:t@2")
    assert kill_schedule(plain, "before_put:t@2") == "before_put:t@2" and kill_schedule(plain, None) is None
