"""One sweep per ``workdir`` (issue 27 item 9: two sweeps in one --workdir spoiled each other's runs): a sweep holds
its folder locked while it runs; a second sweep there, through the API or the command line, is refused naming the
first one's pid; the folder is free again once the first ends, and a sweep's own temporary folder needs no lock."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from crashpoint.errors import UsageError
from crashpoint.harness.model.outcomes import RunOutcome
from crashpoint.harness.model.results import RunResult, SweepResult
from crashpoint.harness.run.sweep import SWEEP_LOCK, Subject, hold_workdir, sweep_subject, workdir_in_use

RELEASE = threading.Event()


def _run(run_dir: Path, unit: str, crash_point: str | None) -> RunResult:
    RELEASE.wait(30)
    run_dir.mkdir(parents=True, exist_ok=True)
    return RunResult(unit, crash_point, "passed", outcome=RunOutcome(unit, crash_point, "wf", run_dir))


class Fake(Subject):
    default_executor = "threads"

    def units(self):
        return ["u"]

    def call(self, unit, crash_point, golden, repeat):
        return _run, (unit, crash_point)

    def result(self, crash, results, points, wall_s):
        return SweepResult(None, "fake", "0", crash, results, points, wall_s)


def test_a_second_sweep_in_a_running_sweeps_workdir_is_refused(tmp_path: Path, capsys) -> None:
    RELEASE.clear()
    first: list[SweepResult] = []
    runner = threading.Thread(target=lambda: first.append(sweep_subject(Fake(), crash="none", workdir=tmp_path)))
    runner.start()
    try:
        for _ in range(300):
            if workdir_in_use(tmp_path):
                break
            threading.Event().wait(0.05)
        assert workdir_in_use(tmp_path) == str(os.getpid())
        with pytest.raises(UsageError, match=rf"another sweep \(pid {os.getpid()}\) is running in this folder"):
            sweep_subject(Fake(), crash="none", workdir=tmp_path)
        from crashpoint.harness.cli.main import ExitCode, main

        assert main(["run", "refunds", "--crash", "none", "--workdir", str(tmp_path)]) == ExitCode.USAGE
        assert f"another sweep (pid {os.getpid()}) is running in this folder" in capsys.readouterr().err
    finally:
        RELEASE.set()
        runner.join(30)
    assert [str(r.verdict) for r in first[0].results] == ["passed"]
    assert workdir_in_use(tmp_path) is None  # free once the first sweep ended
    os.close(hold_workdir(tmp_path))


def test_the_lock_dies_with_its_holder(tmp_path: Path) -> None:
    """A lock file left by a sweep that was SIGKILLed holds nothing: the lock was its process's."""
    (tmp_path / SWEEP_LOCK).write_text("12345\n")
    assert workdir_in_use(tmp_path) is None
    os.close(hold_workdir(tmp_path))
