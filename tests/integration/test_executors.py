"""Where runs execute: what a run needs pickles; a process pool, a thread pool and a Dask cluster
give the same verdicts; bad executors are usage errors; and the sweep's progress bar."""

from __future__ import annotations

import io
import re
import json
import os
import pickle
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.certification import load_adapter
from crashpoint.harness.cli.main import ExitCode, build_parser, main
from crashpoint.harness.run.pack_driver import Driver
from crashpoint.harness.run.executors import dask_address, make_executor
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.progress import SweepProgress
from crashpoint.harness.run.sweep import _run_one, sweep
from crashpoint.scenarios import builtin_pack

PACK = builtin_pack("refunds")
SEED = PACK / "cases" / "approval_timeout_after_refund_draft.json"
CANCEL = "cancel_while_waiting_compensates_draft"
HAPPY = "refund_approved_happy_path"
POINTS = ["after_checkpoint:refund_draft", "before_effect:refunds.draftRefundRequest"]
BROKEN = "variants.engines:NoCompensationOnCancel"  # fails the cancel case: verdicts that are not all "passed"


def _selection():
    pack, cases = load_target(PACK)
    return pack, [c for c in cases if c.case_id in (CANCEL, HAPPY)]


def _verdicts(results) -> list[tuple[str, str, str]]:
    return sorted((r.case_id, r.crash_point or "none", r.verdict) for r in results)


# --------------------------------------------------------------------------- pickling

def test_everything_a_run_needs_and_returns_pickles(tmp_path: Path) -> None:
    pack, cases = _selection()
    case = cases[0]
    driver = Driver(ReferenceAdapter(), pack, worker_timeout_s=30)
    guarded = load_adapter("crashpoint.harness.adapters.reference:ReferenceAdapter")  # what certify sweeps
    result = _run_one(driver, case, pack, tmp_path / "golden", None, None)
    assert result.verdict == "passed" and result.outcome is not None

    for obj in (pack, case, driver, Driver(guarded, pack), result, result.outcome):
        again = pickle.loads(pickle.dumps(obj))
        assert type(again) is type(obj)
    assert pickle.loads(pickle.dumps(result)).to_dict() == result.to_dict()
    assert pickle.loads(pickle.dumps(result.outcome)) == result.outcome
    assert pickle.loads(pickle.dumps(case)) == case
    copy = pickle.loads(pickle.dumps(guarded))
    assert copy.name == guarded.name and copy.version() == guarded.version()


# --------------------------------------------------------------------------- local pools

def test_process_pool_and_threads_give_the_same_verdicts_with_progress_in_the_caller() -> None:
    pack, cases = _selection()
    seen: dict[str, list] = {}
    verdicts = {}
    for kind in ("processes", "threads"):
        calls, plans = [], []
        result = sweep(pack, cases, ReferenceAdapter(engine=BROKEN), executor=kind, jobs=2, only=POINTS,
                       on_result=lambda r, calls=calls: calls.append((os.getpid(), threading.get_ident(), r)),
                       on_plan=plans.append)
        verdicts[kind] = _verdicts(result.results)
        assert {(pid, tid) for pid, tid, _ in calls} == {(os.getpid(), threading.get_ident())}
        assert len(calls) == len(result.results) == plans[-1] == 2 + 2 * len(POINTS)
        assert plans == sorted(plans) and plans[0] == 2  # the golden runs first, then growing
        # completion order: the golden run of a case is always handed over before its crash runs
        order = [(r.case_id, r.crash_point) for _, _, r in calls]
        for c in cases:
            assert order.index((c.case_id, None)) < order.index((c.case_id, POINTS[0]))
        seen[kind] = calls
    assert verdicts["processes"] == verdicts["threads"]
    assert ("cancel_while_waiting_compensates_draft", POINTS[0], "failed") in verdicts["processes"]
    assert ("refund_approved_happy_path", POINTS[0], "passed") in verdicts["processes"]


def test_a_run_the_executor_loses_is_an_error_not_a_crash_of_the_sweep() -> None:
    from concurrent.futures import Future

    from crashpoint.harness.run.sweep import _lost

    broken: Future = Future()
    broken.set_exception(RuntimeError("worker process died"))
    result = _lost(broken, "c", "after_checkpoint:x")
    assert result.verdict == "error" and "worker process died" in result.error


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")
def test_pool_processes_exit_when_their_caller_is_killed() -> None:
    code = ("import os, time; from crashpoint.harness.run.executors import make_executor; "
            "ex, close = make_executor('processes', 1); print(ex.submit(os.getpid).result(), flush=True); "
            "time.sleep(120)")
    caller = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        child = int(caller.stdout.readline())
        assert _alive(child)
    finally:
        caller.kill()
        caller.wait()
    deadline = time.monotonic() + 15
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(child), "a pool process outlived its SIGKILLed caller"


# --------------------------------------------------------------------------- bad executors

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_bad_executor_specs_and_worker_counts_are_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SEED), "--executor", "cluster", "--crash", "none"]) == ExitCode.USAGE
    assert "--executor 'cluster'" in capsys.readouterr().err
    assert main(["run", str(SEED), "--executor", "dask://nohostport", "--crash", "none"]) == ExitCode.USAGE
    assert "dask://HOST:PORT" in capsys.readouterr().err
    assert main(["run", str(SEED), "--workers", "0"]) == ExitCode.USAGE
    assert "--workers (--jobs) must be >= 1" in capsys.readouterr().err
    args = build_parser().parse_args(["run", str(SEED), "--jobs", "3"])
    assert args.workers == 3  # --jobs is an alias of --workers
    assert dask_address("dask://10.0.0.5:8786") == "tcp://10.0.0.5:8786"
    assert dask_address("dask://tls://h:1") == "tls://h:1"


def test_an_unreachable_dask_scheduler_is_exit_2_naming_it(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("distributed")
    port = _free_port()
    out = tmp_path / "r.json"
    began = time.monotonic()
    code = main(["run", str(SEED), "--crash", "none", "--executor", f"dask://127.0.0.1:{port}", "--json", str(out)])
    assert code == ExitCode.USAGE
    assert time.monotonic() - began < 30
    err = capsys.readouterr().err
    assert f"tcp://127.0.0.1:{port}" in err and "cannot reach the Dask scheduler" in err
    assert "Traceback" not in err and not out.exists()


# --------------------------------------------------------------------------- Dask

@pytest.fixture(scope="module")
def dask_cluster():
    """A Dask cluster on loopback: 2 worker processes of 1 thread each."""
    distributed = pytest.importorskip("distributed")
    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=40)
    try:
        yield cluster
    finally:
        cluster.close()


@pytest.mark.slow  # a local Dask cluster and two sweeps; the full suite runs it
def test_a_dask_cluster_gives_the_local_pool_verdicts(dask_cluster, tmp_path: Path) -> None:
    pack, cases = _selection()
    adapter = ReferenceAdapter(engine=BROKEN)
    local = sweep(pack, cases, adapter, executor="processes", jobs=2, only=POINTS)
    executor, close = make_executor(f"dask://{dask_cluster.scheduler_address.split('://', 1)[1]}")
    try:
        calls = []
        remote = sweep(pack, cases, adapter, executor=executor, only=POINTS,
                       on_result=lambda r: calls.append(threading.get_ident()))
    finally:
        close()
    assert _verdicts(remote.results) == _verdicts(local.results)
    assert set(calls) == {threading.get_ident()} and len(calls) == len(remote.results)
    assert any(r.verdict == "failed" for r in remote.results)
    assert all(not r.outcome.run_dir.exists() for r in remote.results if r.outcome)  # scratch folders removed

    out = tmp_path / "dask.json"
    code = main(["run", str(SEED), "--crash-point", POINTS[0], "--crash-point", POINTS[1], "-q",
                 "--executor", "dask://" + dask_cluster.scheduler_address.split("://", 1)[1], "--json", str(out)])
    assert code == ExitCode.OK
    data = json.loads(out.read_text())
    assert sorted((r["crash_point"], r["verdict"]) for r in data["results"]) == \
        sorted([("none", "passed")] + [(p, "passed") for p in POINTS])


# --------------------------------------------------------------------------- the progress bar

def _frames(text: str) -> list[str]:
    """The frames a bar drew (rich redraws a line with ``\\r`` and an erase), escape codes dropped."""
    plain = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)
    return [f for f in re.split(r"[\r\n]", plain) if f.strip()]


def test_the_bar_shows_counts_percent_rate_eta_and_failures_within_the_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    now = [0.0]
    stream = _Stream(tty=True)
    progress = SweepProgress(stream, mode="on", clock=lambda: now[0])
    progress.plan(120)
    for i in range(45):
        now[0] = 8.65 * (i + 1) / 45
        progress.result(_Run("failed" if i < 3 else "passed"))
    last = _frames(stream.getvalue())[-1]
    assert re.search(r"45/120\s+37%\s+5\.2 runs/s\s+ETA \d:\d\d:\d\d\s+3 not passed", last), last
    assert "━" in last and len(last.rstrip()) <= 80
    for i in range(154):
        progress.result(_Run())
    assert "199/200" not in _frames(stream.getvalue())[-1]  # planned 120: total follows done
    progress.plan(200)
    progress.result(_Run())
    progress.plan(201)
    now[0] += 1
    progress.result(_Run())
    assert re.search(r"201/201\s+100%", _frames(stream.getvalue())[-1])
    progress.close()
    assert stream.getvalue().endswith("\n") or stream.getvalue().endswith("\x1b[?25h")
    floored = _Stream(tty=True)
    bar = SweepProgress(floored, mode="on", clock=lambda: 1.0)
    bar.plan(200)
    for _ in range(199):
        bar.result(_Run())
    bar.close()
    assert re.search(r"199/200\s+99%", _frames(floored.getvalue())[-1])  # floored: 100% only when all are done
    assert "\x1b[9" in floored.getvalue() or "\x1b[3" in floored.getvalue()  # colours on a terminal


class _Stream(io.StringIO):
    def __init__(self, tty: bool) -> None:
        super().__init__()
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


class _Run:
    def __init__(self, verdict: str = "passed") -> None:
        self.verdict = verdict


def test_progress_shows_dots_then_a_bar_on_a_terminal_once_the_sweep_is_long() -> None:
    now = [0.0]
    tty = _Stream(tty=True)
    progress = SweepProgress(tty, clock=lambda: now[0])
    progress.plan(10)
    progress.result(_Run())
    progress.result(_Run("failed"))
    assert tty.getvalue() == ".F"
    now[0] = 5.0  # a few seconds gone: the bar takes over on a new line
    progress.result(_Run())
    progress.close()
    assert tty.getvalue().startswith(".F\n") and "3/10" in _frames(tty.getvalue())[-1]

    long = _Stream(tty=True)
    progress = SweepProgress(long, clock=lambda: 0.0)
    progress.plan(60)  # more than 50 runs planned: a bar from the start
    assert "0/60" in _frames(long.getvalue())[-1] and not long.getvalue().startswith(".")

    for stream, mode, quiet, want in ((_Stream(tty=False), "auto", False, ".\n"), (_Stream(tty=True), "auto", True, ""),
                                      (_Stream(tty=True), "off", False, ""), (_Stream(tty=False), "off", False, "")):
        progress = SweepProgress(stream, mode=mode, quiet=quiet, clock=lambda: 100.0)
        progress.plan(500)
        progress.result(_Run())
        progress.close()
        assert stream.getvalue() == want, (mode, quiet)
    forced = _Stream(tty=False)
    progress = SweepProgress(forced, mode="on", quiet=True, clock=lambda: 1.0)
    progress.plan(1)
    progress.result(_Run())
    progress.close()
    assert re.search(r"1/1\s+100%", _frames(forced.getvalue())[-1])
    assert "\x1b[3" not in forced.getvalue() and "\x1b[9" not in forced.getvalue()  # no colours off a terminal


def test_no_progress_prints_no_dots_and_no_bar(capsys: pytest.CaptureFixture[str]) -> None:
    # issue 17: --no-progress turned the bar off but still printed a dot per run
    assert main(["run", str(SEED), "--crash-point", POINTS[0], "--no-progress", "--workers", "1"]) == ExitCode.OK
    err = capsys.readouterr().err
    assert not re.search(r"^[.F]+$", err, re.MULTILINE) and "runs/s" not in err, err


def test_run_with_forced_progress_draws_the_bar_on_stderr_only(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    assert main(["run", str(SEED), "--crash-point", POINTS[0], "--progress", "--workers", "1",
                 "--json", str(out)]) == ExitCode.OK
    captured = capsys.readouterr()
    assert re.search(r"2/2\s+100%", captured.err) and "runs/s" in captured.err and "\r" in captured.err
    assert "runs/s" not in captured.out and "runs/s" not in out.read_text()
    assert "on 1 process(es)" in captured.out


def test_progress_dots_tell_an_error_from_a_failure_as_pytest_does() -> None:
    """Before, every run that did not pass printed ``F``: an error (a run that tested nothing) looked failed."""
    stream = _Stream(tty=False)
    progress = SweepProgress(stream, clock=lambda: 0.0)
    progress.plan(5)
    for verdict in ("passed", "failed", "error", "unknown", "unsupported"):
        progress.result(_Run(verdict))
    assert stream.getvalue() == ".FE?s"
