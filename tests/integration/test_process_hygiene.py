"""Workers that hang, leave processes behind, or exit early get an honest verdict and leave nothing running."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.pack_driver import RUN_MARKER
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep

PACK_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
HAPPY = "refund_approved_happy_path"


def _sweep(engine: str, tmp_path: Path, **kwargs):
    pack, cases = load_target(PACK_DIR)
    case = next(c for c in cases if c.case_id == HAPPY)
    return sweep(pack, [case], ReferenceAdapter(engine=engine), workdir=tmp_path / "runs", **kwargs)


def _survivors(root: Path) -> list[int]:
    """Pids of live processes of the runs under ``root``: those carrying its marker (new interpreters) and those
    holding a file open under it (:func:`_holding`: also forked workers, whose ``/proc`` environ is their
    zygote's)."""
    return sorted(set(_marked(root)) | set(_holding(root)))


def _marked(root: Path) -> list[int]:
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


def _sleepers(seconds: str) -> list[int]:
    """Live ``sleep SECONDS`` processes (the daemons of the variants below), by their command line."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "cmdline").read_bytes() == f"sleep\0{seconds}\0".encode():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


class _NoForkReference(ReferenceAdapter):
    """The reference adapter without ``fork_workers``: every worker is a new interpreter (like DBOS, LangGraph)."""

    fork_workers = False


@pytest.mark.parametrize("launch", ["kill-cold", "no fork_workers"])
def test_a_worker_daemon_with_an_empty_environment_dies_with_the_run(tmp_path: Path, launch: str) -> None:
    # issue 17: under kill-cold, and with every adapter without fork_workers, it survived (no marker, own session)
    pack, cases = load_target(PACK_DIR)
    case = next(c for c in cases if c.case_id == HAPPY)
    engine = "variants.misbehaving:LeavesDaemonWithEmptyEnv"
    adapter = _NoForkReference(engine=engine) if launch == "no fork_workers" else ReferenceAdapter(engine=engine)
    result = sweep(pack, [case], adapter, crash="none", workdir=tmp_path / "runs", executor="threads", jobs=1,
                   crash_mode="kill-cold" if launch == "kill-cold" else "kill")
    (run,) = result.results
    assert run.verdict == "passed"
    assert any("sleep 317.5" in note for note in run.outcome.notes), run.outcome.notes
    assert _sleepers("317.5") == []


def test_a_worker_that_kills_its_zygote_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:KillsItsZygote", tmp_path, crash="none", jobs=1)  # in a pool process
    (run,) = result.results
    assert run.verdict == "error"
    time.sleep(0.5)
    assert _sleepers("318.5") == [] and not _survivors(tmp_path / "runs")


def test_a_daemon_started_by_harness_side_engine_code_dies_with_the_run(tmp_path: Path) -> None:
    result = _sweep("variants.misbehaving:DaemonFromHarnessSide", tmp_path, crash="none", jobs=1)
    (run,) = result.results
    assert run.verdict == "passed"
    assert any("harness-side" in note and "sleep 319.5" in note for note in run.outcome.notes), run.outcome.notes
    assert _sleepers("319.5") == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_terminated_or_killed_sweep_leaves_no_run_folder_and_no_process(tmp_path: Path, sig: int) -> None:
    # issue 17: run folders stayed behind after SIGTERM and SIGKILL of the harness
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from crashpoint.harness.cli.main import main; "
                             "sys.exit(main(sys.argv[1:]))", "run", str(PACK_DIR), "--crash", "none", "--jobs", "2"],
                            cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while not list(tmp_path.glob("crashpoint-*/*/*/worker-001.log")) and time.monotonic() < deadline:
            time.sleep(0.1)
        roots = list(tmp_path.glob("crashpoint-*"))
        assert roots and proc.poll() is None
        proc.send_signal(sig)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    deadline = time.monotonic() + 20  # pool processes notice their caller's death within 0.5 s
    while (list(tmp_path.glob("crashpoint-*")) or _survivors(roots[0])) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert list(tmp_path.glob("crashpoint-*")) == [] and _survivors(roots[0]) == []


def _holding(root: Path) -> list[int]:
    """Pids of live processes with a file open under ``root`` (a worker's stdout is its run folder's log): unlike
    :func:`_survivors`, it also finds a forked worker, whose ``/proc`` environ (the marker) is its zygote's."""
    prefix, found = str(root.resolve()) + os.sep, []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if any(os.readlink(fd).startswith(prefix) for fd in (entry / "fd").iterdir()):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


@pytest.mark.parametrize("crash_mode", ["kill", "kill-cold"])
def test_a_timed_out_run_leaves_no_run_folder_and_no_process(tmp_path: Path, monkeypatch, crash_mode: str) -> None:
    # issue 17: run folders stayed behind after timeouts (a sweep without --workdir makes its own folder)
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    pack, cases = load_target(PACK_DIR)
    case = next(c for c in cases if c.case_id == HAPPY)
    result = sweep(pack, [case], ReferenceAdapter(engine="variants.misbehaving:HangsWithChildren"), crash="none",
                   worker_timeout_s=2.0, executor="threads", jobs=1, crash_mode=crash_mode)
    assert [r.verdict for r in result.results] == ["unknown"], [r.error for r in result.results]
    assert list(tmp_path.glob("crashpoint-*")) == []
    deadline = time.monotonic() + 10  # a SIGKILLed process closes its files as it dies, not at once
    while _holding(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _holding(tmp_path) == []


def test_an_interrupted_sweeps_reap_also_finds_processes_by_the_files_they_hold(tmp_path: Path) -> None:
    # a0dcd2c waited for "marked" workers before removing an interrupted sweep's folder, but a forked worker
    # shows no marker (its /proc environ is its zygote's): one still dying after its zygote could write into
    # the folder while it was removed (rmtree, errors ignored, left it behind)
    from crashpoint.harness.process.launch import reap_under

    (tmp_path / "run").mkdir()
    with open(tmp_path / "run" / "worker-001.log", "wb") as log:
        worker = subprocess.Popen(["sleep", "300"], stdout=log)  # no marker in its environment
    try:
        assert reap_under(tmp_path) == [] and worker.poll() is None
        killed = reap_under(tmp_path, wait_s=5.0, holders=True)
        assert killed == [f"{worker.pid} sleep 300"] and worker.wait(timeout=5) == -signal.SIGKILL
        assert _holding(tmp_path) == []
    finally:
        worker.kill()
        worker.wait()
