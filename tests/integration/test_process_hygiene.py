"""Workers that hang, leave processes behind, or exit early get an honest verdict and leave nothing running."""

from __future__ import annotations

import os
from pathlib import Path

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.driver import RUN_MARKER
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep

PACK_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
HAPPY = "refund_approved_happy_path"


def _sweep(engine: str, tmp_path: Path, **kwargs):
    pack, cases = load_target(PACK_DIR)
    case = next(c for c in cases if c.case_id == HAPPY)
    return sweep(pack, [case], ReferenceAdapter(engine=engine), workdir=tmp_path / "runs", **kwargs)


def _survivors(root: Path) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if f"{RUN_MARKER}={root}".encode() in (entry / "environ").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_a_daemon_child_in_a_new_session_is_killed_and_reported(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:LeavesDaemon", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "passed"  # the workflow itself is fine
    assert any("left 1 process(es) running, killed" in note and "sleep 300" in note for note in run.outcome.notes)
    assert not _survivors(tmp_path / "runs")
    assert os.environ.get(RUN_MARKER) is None


def test_a_hung_worker_is_unknown_not_passed(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:HangsInWorker", tmp_path, crash="none", worker_timeout_s=2.0)
    (run,) = result.results
    assert run.verdict == "unknown"
    assert "did not exit within 2.0 s" in run.error
    assert not _survivors(tmp_path / "runs")


def test_a_worker_that_does_nothing_is_an_error_not_a_pass(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:ExitsEarly", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "error" and "exercised nothing" in run.error
    assert any(f.oracle == "final_status" for f in run.failures)


def test_sys_exit_in_adapter_code_is_an_error_verdict(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:ExitsHarness", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "error" and "SystemExit" in run.error


def test_a_hung_worker_is_killed_with_its_whole_group(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:HangsWithChildren", tmp_path, crash="none", worker_timeout_s=2.0)
    (run,) = result.results
    assert run.verdict == "unknown"
    assert "did not exit within 2.0 s (killed with its process group)" in run.error
    assert not _survivors(tmp_path / "runs")


def test_a_worker_that_exits_without_being_killed_is_an_error(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:ExitsMidRun", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "error"
    assert "worker exited with 3 (not a harness kill)" in run.error
    assert not _survivors(tmp_path / "runs")


def test_a_worker_that_writes_garbage_to_its_store_is_an_error(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:WritesGarbageToStore", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "error", (run.verdict, run.error)
    assert "not a usable engine database: file is not a database" in run.error
    assert not _survivors(tmp_path / "runs")


def test_a_child_left_in_the_workers_group_is_killed_and_reported(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:LeavesChildInGroup", tmp_path, crash="none")
    (run,) = result.results
    assert run.verdict == "passed"
    assert any("left 1 process(es) running, killed" in note and "sleep 300" in note for note in run.outcome.notes)
    assert not _survivors(tmp_path / "runs")
