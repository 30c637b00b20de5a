"""The crash sweep: a golden run per case, then one run per (case, crash point) with a real SIGKILL.

Runs go through a :class:`concurrent.futures.Executor` (a thread pool by default: each
run spends its time waiting on its own worker processes, so threads are enough and the
real parallelism is in the processes). Any ``Executor`` whose ``submit`` accepts a
picklable callable works (a process pool, a Dask ``distributed`` client's executor).
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import tempfile
import time
import traceback
from concurrent.futures import Executor, ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from crashpoint.errors import WorkerTimeout
from crashpoint.harness import crashpoints
from crashpoint.harness.adapter import EngineAdapter
from crashpoint.harness.coverage import vacuity
from crashpoint.harness.driver import Driver, RunOutcome
from crashpoint.harness.loader import Case, Pack
from crashpoint.harness.oracles import Failure, differential, judge

CRASH_MODES = ("every", "none", "recovery")
VERDICTS = ("passed", "failed", "error", "unknown")


@dataclass
class RunResult:
    """The verdict on one run.

    Attributes:
        case_id: the case. ``crash_point``: the crash point id, or ``None`` for the golden run.
        verdict: ``passed`` | ``failed`` | ``error`` (the harness or the engine broke) |
            ``unknown`` (a worker neither finished nor crashed in time; never counts as passed).
        failures: oracle findings (empty when passed).
        error: the error text for ``error``/``unknown``.
        vacuity: faults scheduled that never fired, work that never happened (see
            :mod:`crashpoint.harness.coverage`).
        outcome: the run's outcome (``None`` when the run could not produce one).
    """

    case_id: str
    crash_point: str | None
    verdict: str
    failures: list[Failure] = field(default_factory=list)
    error: str | None = None
    outcome: RunOutcome | None = None
    wall_s: float = 0.0
    vacuity: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form (see README, "The JSON report")."""
        out = self.outcome
        return {
            "case_id": self.case_id,
            "crash_point": self.crash_point or "none",
            "verdict": self.verdict,
            "failures": [f.to_dict() for f in self.failures],
            "error": self.error,
            "final_status": out.status if out else None,
            "stop_reason": out.stop_reason if out else None,
            "crash_fired": out.crash_fired if out else False,
            "workers": out.workers if out else 0,
            "kills": out.kills if out else 0,
            "notes": out.notes if out else [],
            "vacuity": list(self.vacuity),
            "wall_s": round(self.wall_s, 3),
        }


@dataclass
class SweepResult:
    """All runs of a sweep plus what is needed to report them."""

    pack: Pack
    engine: str
    engine_version: str
    crash: str
    results: list[RunResult]
    crash_points: dict[str, list[str]]
    wall_s: float
    cases: list[Case] = field(default_factory=list)


def fault_free(case: Case) -> Case:
    """The same case without its ``faults`` (and without ``like_fault_free``): what it must end like."""
    expected = {k: v for k, v in case.expected.items() if k != "like_fault_free"}
    return dataclasses.replace(case, faults=[], expected=expected)


def _run_one(driver: Driver, case: Case, pack: Pack, run_dir: Path, crash_point: str | None,
             golden: RunOutcome | None) -> RunResult:
    began = time.perf_counter()
    try:
        outcome = driver.run(case, run_dir, crash_point)
    except WorkerTimeout as exc:
        return RunResult(case.case_id, crash_point, "unknown", error=str(exc), wall_s=time.perf_counter() - began)
    except (Exception, SystemExit) as exc:  # the engine or its adapter broke: a verdict, never a silent skip
        text = f"{type(exc).__name__}: {exc}"
        if not str(exc):
            text += "\n" + traceback.format_exc(limit=3)
        return RunResult(case.case_id, crash_point, "error", error=text, wall_s=time.perf_counter() - began)
    failures = judge(case, pack, outcome, golden)
    if case.expected.get("like_fault_free"):
        try:
            clean = driver.run(fault_free(case), run_dir.with_name(run_dir.name + "-fault-free"))
        except (Exception, SystemExit) as exc:
            return RunResult(case.case_id, crash_point, "error", error=f"the fault-free run broke: "
                             f"{type(exc).__name__}: {exc}", outcome=outcome, wall_s=time.perf_counter() - began)
        failures += differential(outcome, clean)
    findings, nothing = vacuity(outcome, golden=crash_point is None)
    if outcome.faults_missed and crash_point is None:
        return RunResult(case.case_id, crash_point, "error", failures,
                         error="the case's faults never fired, so nothing was tested: "
                               + "; ".join(outcome.faults_missed),
                         outcome=outcome, vacuity=findings, wall_s=time.perf_counter() - began)
    if nothing:
        return RunResult(case.case_id, crash_point, "error", failures,
                         error="the golden run made no tool call: the case exercised nothing",
                         outcome=outcome, vacuity=findings, wall_s=time.perf_counter() - began)
    if crash_point is not None and not outcome.crash_fired:
        known = ", ".join(golden.crash_points) if golden else "(no golden run)"
        return RunResult(case.case_id, crash_point, "error", failures,
                         error=f"crash point {crash_point} was never reached, so nothing was tested; "
                               f"the golden run of {case.case_id} passes: {known}",
                         outcome=outcome, vacuity=findings, wall_s=time.perf_counter() - began)
    return RunResult(case.case_id, crash_point, "failed" if failures else "passed", failures, outcome=outcome,
                     vacuity=findings, wall_s=time.perf_counter() - began)


def sweep(pack: Pack, cases: Sequence[Case], adapter: EngineAdapter, *, crash: str = "every",
          jobs: int | None = None, executor: Executor | None = None, workdir: Path | None = None,
          keep: bool = False, worker_timeout_s: float = 60.0, only: Sequence[str] = (),
          budget: int | None = None,
          on_result: Callable[[RunResult], None] | None = None,
          skip: Collection[tuple[str, str | None]] = ()) -> SweepResult:
    """Run the golden run of every case, then (``crash="every"``) one run per crash point it passed.

    Args:
        pack, cases: what to run (from :func:`crashpoint.harness.loader.load_target`).
        adapter: the engine under test.
        crash: ``every`` | ``none`` | ``recovery`` (``every``, then for each kill ``A`` a run per crash
            point ``B`` of the recovery from ``A``, killed at ``A`` and again at ``B``: ``"A >> B"``).
        budget: for ``recovery``, at most this many double-kill runs per case, spread evenly over
            the pairs (default: every pair).
        jobs: parallel runs (default: the number of CPUs); ignored when ``executor`` is given.
        executor: any :class:`concurrent.futures.Executor`.
        workdir: where run folders go (default: a temporary folder, removed unless ``keep``).
        worker_timeout_s: wall seconds a worker process may take (then the verdict is ``unknown``).
        only: crash point ids to run (default: all the golden runs passed); an id no golden run
            passed gives an ``error`` result for that case, never a silent skip.
        on_result: called with each result as it completes (progress output), in the calling thread,
            in order of completion (so a result is handed over as soon as its run is done).
        skip: ``(case_id, crash_point)`` pairs already done (``crash_point`` ``None``: the golden run),
            for ``crashpoint run --resume``: they are neither run nor returned, except that a skipped
            golden run still runs (not reported) when the case has other runs to do, as their reference.

    Raises:
        UsageError-compatible ``ValueError`` for an unknown ``crash`` mode.
    """
    if crash not in CRASH_MODES:
        raise ValueError(f"--crash must be one of {CRASH_MODES}, got {crash!r}")
    began = time.perf_counter()
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="crashpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    driver = Driver(adapter, pack, worker_timeout_s=worker_timeout_s)
    own = executor is None
    pool = executor or ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2)
    results: list[RunResult] = []
    points: dict[str, list[str]] = {}

    def done(result: RunResult) -> RunResult:
        if on_result:
            on_result(result)
        return result

    try:
        goldens = {c.case_id: pool.submit(_run_one, driver, c, pack, root / c.case_id / "golden", None, None)
                   for c in cases}
        for f in as_completed(goldens.values()):
            cid = next(c for c, g in goldens.items() if g is f)
            if (cid, None) not in skip:
                done(f.result())
        golden_results = {cid: f.result() for cid, f in goldens.items()}
        results.extend(r for cid, r in golden_results.items() if (cid, None) not in skip)
        futures = []
        for case in cases:
            golden = golden_results[case.case_id]
            points[case.case_id] = golden.outcome.crash_points if golden.outcome else []
            if crash == "none" or golden.outcome is None:
                continue
            wanted = list(dict.fromkeys(only)) if only else points[case.case_id]
            for n, point in enumerate(wanted):
                if (case.case_id, point) in skip:
                    continue
                run_dir = root / case.case_id / f"{n:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', point)[:80]}"
                futures.append(pool.submit(_run_one, driver, case, pack, run_dir, point, golden.outcome))
        for f in as_completed(futures):
            done(f.result())
        singles = [f.result() for f in futures]
        results.extend(singles)
        if crash == "recovery":
            doubles = []
            for case in cases:
                pairs = [f"{r.crash_point}{crashpoints.THEN}{b}" for r in singles
                         if r.case_id == case.case_id and r.outcome is not None and r.outcome.crash_fired
                         for b in crashpoints.recovery_points(r.outcome.crash_points, r.crash_point)]
                if budget is not None and len(pairs) > budget:
                    step = len(pairs) / budget
                    pairs = [pairs[int(i * step)] for i in range(budget)]
                golden = golden_results[case.case_id].outcome
                for n, pair in enumerate(pairs):
                    run_dir = root / case.case_id / f"r{n:04d}"
                    doubles.append(pool.submit(_run_one, driver, case, pack, run_dir, pair, golden))
            for f in as_completed(doubles):
                done(f.result())
            results.extend(f.result() for f in doubles)
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)
        if not keep and workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    return SweepResult(pack, adapter.name, adapter.version(), crash, results, points, time.perf_counter() - began,
                       list(cases))
