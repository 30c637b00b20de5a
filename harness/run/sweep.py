"""The crash sweep: a golden run per case, then one run per (case, crash point) with a real SIGKILL.

Runs go through a :class:`concurrent.futures.Executor` (see :mod:`crashpoint.harness.run.executors`):
a local process pool by default, a thread pool, or a Dask ``distributed`` cluster. Each run is a
call of a module-level function on picklable arguments that returns a picklable
:class:`RunResult`, and is self-contained in its own folder, so it can execute anywhere.
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Collection, Mapping, Sequence

from crashpoint.harness.model.results import SweepResult
from crashpoint.harness.adapters.protocol import EngineAdapter
from crashpoint.harness.judge.verdict import VERDICTS, Invocation, RunResult, judge, needs_fault_free, unsupported
from crashpoint.harness.process import kills
from crashpoint.harness.load.loader import Case, Pack
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.pack_driver import Driver, RunOutcome, reap_under
from crashpoint.harness.run.executors import result_of, wait_first

CRASH_MODES = ("sampled", "every", "none", "recovery")
#: ``sampled``: per case, the crash runs added to ``every`` (see :func:`sampled_specs`).
SAMPLED_PAIRS = 2       #: kills during the recovery from a kill ("A >> B"), count per case
SAMPLED_ALONGSIDE = 1   #: a second live worker while one is held ("P || worker"), count per case
SAMPLED_TOGETHER = 1    #: several workers recovering at once after a kill ("A >> 3 workers"), count per case
#: Workers that recover at once in a sampled "A >> N workers" run.
TOGETHER_WORKERS = 3
#: File in a sweep folder that the sweep made itself (and removes when it ends): a pool process whose
#: caller was SIGKILLed removes such a folder (see :func:`abandon`).
TEMPORARY_ROOT = ".crashpoint-temporary"
#: Run folders this process has run (a pool process's record, for :func:`abandon`).
_RUN_DIRS: set[Path] = set()


def _spread(items: Sequence[str], n: int) -> list[str]:
    """``n`` items of ``items`` evenly spread (the middle of each of ``n`` equal slices), in order."""
    if not items or n <= 0:
        return []
    n = min(n, len(items))
    return list(dict.fromkeys(items[(2 * k + 1) * len(items) // (2 * n)] for k in range(n)))


def _golden_again(skip: Collection[tuple[str, str | None]], case_id: str, verdict: str) -> bool:
    """Whether a stored golden run, re-run now as its case's reference, is a new result: when it does not
    pass now, unless ``skip`` (a mapping pair -> stored verdict, from ``--resume``) says it had not passed
    then either (the stored result already says so: one row per run)."""
    if (case_id, None) not in skip or verdict == "passed":
        return False
    return not isinstance(skip, Mapping) or skip[(case_id, None)] == "passed"


def sampled_points(points: Sequence[str]) -> dict[str, list[str]]:
    """What ``--crash sampled`` adds for a case whose golden run passed ``points``, before the single
    kills are known: ``{"pairs": [A, ...], "alongside": [P, ...], "together": [A, ...]}``.

    * pairs: :data:`SAMPLED_PAIRS` kill points spread evenly over the run; each gets a second kill at the
      first crash point of its recovery, once the single kill at ``A`` tells what that is;
    * alongside: :data:`SAMPLED_ALONGSIDE` points spread over the ``after_effect`` points (an effect
      applied, its checkpoint not yet written: where a second worker that ignores the first one's lease
      repeats the step), else over all points;
    * together: :data:`SAMPLED_TOGETHER` points spread over the ``before_checkpoint`` points (else all):
      a kill there, then :data:`TOGETHER_WORKERS` workers recover at once.
    """
    effects = [p for p in points if p.startswith("after_effect:")]
    commits = [p for p in points if p.startswith("before_checkpoint:") and "workflow_started" not in p]
    return {"pairs": _spread(points, SAMPLED_PAIRS), "alongside": _spread(effects or points, SAMPLED_ALONGSIDE),
            "together": _spread(commits or points, SAMPLED_TOGETHER)}



__all__ = ["sweep", "fault_free", "RunResult", "SweepResult", "CRASH_MODES", "VERDICTS"]




def fault_free(case: Case) -> Case:
    """The same case without its ``faults`` (and without ``like_fault_free``): what it must end like."""
    expected = {k: v for k, v in case.expected.items() if k != "like_fault_free"}
    return dataclasses.replace(case, faults=[], expected=expected)


def _run_one(driver: Driver, case: Case, pack: Pack, run_dir: Path, crash_point: str | None,
             golden: RunOutcome | None, how: Invocation | None = None) -> RunResult:
    """Run ``case`` (killed at ``crash_point``) in ``run_dir`` and judge it with
    :func:`crashpoint.harness.judge.verdict.judge`; a ``like_fault_free`` case also runs fault-free."""
    began = time.perf_counter()
    _RUN_DIRS.add(Path(run_dir).resolve())
    lacks = unsupported(driver.adapter, case, pack, crash_point)
    if lacks is not None:
        return lacks
    try:
        outcome: RunOutcome | BaseException = driver.run(case, run_dir, crash_point, golden)
    except (Exception, SystemExit) as exc:  # judged: a hang is unknown, anything else an error
        outcome = exc
    clean: RunOutcome | BaseException | None = None
    if needs_fault_free(case) and isinstance(outcome, RunOutcome):
        try:
            clean = driver.run(fault_free(case), run_dir.with_name(run_dir.name + "-fault-free"))
        except (Exception, SystemExit) as exc:
            clean = exc
    return judge(case, pack, outcome, crash_point=crash_point, golden=golden, fault_free=clean, how=how, began=began)


def abandon() -> None:
    """In a pool process whose caller died (a SIGKILLed ``crashpoint run``), just before it exits: kill its
    zygotes (their workers die with them), and start a cleaner that, once this process is gone, kills every
    process carrying a marker of the runs it ran and removes the sweep folders that their sweep had made
    itself (:data:`TEMPORARY_ROOT`): nothing of the sweep outlives it. (The cleaner waits, since this
    process's main thread may still write into its run folder until it exits.)"""
    import json
    import os
    import subprocess
    import sys

    from crashpoint.harness.process import forkserver

    forkserver.kill_zygotes()
    roots = sorted({str(d.parent.parent) for d in _RUN_DIRS})
    if roots:
        subprocess.Popen([sys.executable, "-m", "crashpoint.harness.run.sweep", "--clean-after", str(os.getpid()),
                          json.dumps(roots)], start_new_session=True, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env={**os.environ, **forkserver.ISOLATED_ENV})


def _clean_after(pid: int, roots: list[str], wait_s: float = 30.0) -> None:
    """The cleaner of :func:`abandon`: wait (at most ``wait_s``) until process ``pid`` is gone, then kill what
    carries the runs' markers and remove each temporary sweep folder of ``roots``."""
    from crashpoint.harness.run.pack_driver import reap_under

    deadline = time.monotonic() + wait_s
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    for root in map(Path, roots):
        reap_under(root)
        if (root / TEMPORARY_ROOT).exists():
            shutil.rmtree(root, ignore_errors=True)


def _pair_stored(skip: Collection[tuple[str, str | None]], case_id: str, point: str) -> bool:
    """``True`` when ``skip`` holds the sampled recovery pair of the kill at ``point`` (``"point >> B"``, two
    kills), for case ``case_id``. A ``"point >> 3 workers"`` run starts the same way but is not that pair
    (taking it for one left the pair missing from a resumed run stamped complete)."""
    return any(c == case_id and p is not None and crashpoints.parse(p).kills[:1] == (point,)
               and len(crashpoints.parse(p).kills) == 2 for c, p in skip)


def _needs_crash_points(golden: RunResult) -> RunResult:
    """A golden run that passed no crash point, in a crash sweep: ``error``, never ``passed`` (its case
    has no crash run, so a sweep of it would test nothing; see :func:`crashpoint.harness.process.kills.no_crash_points`)."""
    why = kills.no_crash_points(golden.outcome)
    if why is None or golden.verdict != "passed":
        return golden
    return dataclasses.replace(golden, verdict="error", error=why)


def _run_isolated(driver: Driver, case: Case, pack: Pack, run_dir: Path, crash_point: str | None,
                  golden: RunOutcome | None, how: Invocation | None = None) -> RunResult:
    """:func:`_run_one` in a temporary folder of the machine that executes it (``run_dir`` relative),
    removed afterwards: for executors whose workers do not share the caller's file system (Dask)."""
    scratch = Path(tempfile.mkdtemp(prefix="crashpoint-run-"))
    try:
        return _run_one(driver, case, pack, scratch / run_dir, crash_point, golden, how)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _lost(future: Future, case_id: str, crash_point: str | None) -> RunResult | None:
    """The result of a finished run, or an ``error`` result naming why the executor returned none
    (a pool process died, a Dask worker was lost, the arguments did not pickle)."""
    try:
        return result_of(future)
    except CancelledError:
        return None
    except Exception as exc:
        return RunResult(case_id, crash_point, "error",
                         error=f"the executor lost this run: {type(exc).__name__}: {exc}")


def sweep(pack: Pack, cases: Sequence[Case], adapter: EngineAdapter, *, crash: str = "every",
          jobs: int | None = None, executor: Executor | str | None = None, workdir: Path | None = None,
          keep: bool = False, worker_timeout_s: float = 60.0, only: Sequence[str] = (),
          budget: int | None = None,
          on_result: Callable[[RunResult], None] | None = None,
          on_plan: Callable[[int], None] | None = None,
          skip: Collection[tuple[str, str | None]] = (), crash_mode: str = "kill",
          how: Invocation | None = None) -> SweepResult:
    """Run the golden run of every case, then (``crash="every"``) one run per crash point it passed.

    A case's crash runs are submitted as soon as its golden run is done (its crash points are
    known then), so a slow golden run of one case does not hold back the runs of the others.

    Args:
        pack, cases: what to run (from :func:`crashpoint.harness.load.loader.load_target`).
        adapter: the engine under test.
        crash: ``every`` | ``none`` | ``recovery`` (``every``, then for each kill ``A`` a run per crash
            point ``B`` of the recovery from ``A``, killed at ``A`` and again at ``B``: ``"A >> B"``) |
            ``sampled`` (``every``, plus per case a sample of kills during recovery, of a second live
            worker and of workers recovering at once: see :func:`sampled_points`; ``crashpoint run``'s
            default). With ``only``, ``sampled`` is ``every``.
        budget: for ``recovery``, at most this many double-kill runs per case, spread evenly over
            the pairs (default: every pair).
        jobs: size of the local pool this call makes (``crashpoint run --workers``; default: the
            number of CPUs); ignored when ``executor`` is an ``Executor``.
        executor: an :class:`concurrent.futures.Executor` (left running: the caller closes it), or a
            spec for :func:`crashpoint.harness.run.executors.make_executor` (``"processes"``, the default;
            ``"threads"``; ``"dask://HOST:PORT"``), made and closed by this call. The driver, cases,
            pack and results must pickle for every executor but a thread pool. With a local pool, run
            folders go under one root here; with any other executor (Dask), each run gets a temporary
            folder on the machine that runs it, removed after the run, unless ``workdir`` is given
            (then the same absolute path is used on that machine).
        workdir: where run folders go (default: a temporary folder, removed unless ``keep``).
        worker_timeout_s: wall seconds a worker process may take (then the verdict is ``unknown``).
        only: crash point ids to run (default: all the golden runs passed); an id no golden run
            passed gives an ``error`` result for that case, never a silent skip.
        on_result: called with each result as it completes (progress output), in the calling thread,
            in order of completion (so a result is handed over as soon as its run is done).
        on_plan: called in the calling thread with the number of results planned so far (count), each
            time it grows: first the golden runs, then as each golden run tells its case's crash
            points, its crash runs (with ``recovery``, as each case's single kills are done, its
            double kills). The number of ``on_result`` calls never exceeds the last value given.
        crash_mode: how workers start and crash (``kill``, ``kill-cold``, ``inprocess``): see
            :class:`crashpoint.harness.run.pack_driver.Driver`.
        skip: ``(case_id, crash_point)`` pairs already done (``crash_point`` ``None``: the golden run),
            for ``crashpoint run --resume``: they are neither run nor returned, except that a skipped
            golden run still runs when the case has other runs to do, as their reference (reported only
            when it does not pass now: a failing reference is a result, never dropped).
        how: how the reproduce commands of runs that did not pass name the engine (default: the
            reference engine, ``--crash-mode`` ``crash_mode``).

    Returns:
        The :class:`SweepResult`; ``results`` hold the golden runs in case order, then each case's
        crash runs in crash point order, then (``recovery``) the double kills.

    Raises:
        UsageError-compatible ``ValueError`` for an unknown ``crash`` mode; ``UsageError`` for a bad
        executor spec or an unreachable Dask scheduler.
    """
    from crashpoint.harness.run.executors import is_local, make_executor

    if crash not in CRASH_MODES:
        raise ValueError(f"--crash must be one of {CRASH_MODES}, got {crash!r}")
    began = time.perf_counter()
    closer: Callable[[], None] | None = None
    if executor is None or isinstance(executor, str):
        pool, closer = make_executor(executor, jobs)
    else:
        pool = executor
    isolated = not is_local(pool) and workdir is None
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="crashpoint-"))
    root.mkdir(parents=True, exist_ok=True)
    if workdir is None:
        (root / TEMPORARY_ROOT).touch()
    driver = Driver(adapter, pack, worker_timeout_s=worker_timeout_s, crash_mode=crash_mode)
    how = how or Invocation(crash_mode=crash_mode)
    by_id = {c.case_id: c for c in cases}
    planned = 0
    golden_results: dict[str, RunResult] = {}
    singles: dict[str, list[RunResult | None]] = {c.case_id: [] for c in cases}
    doubles: dict[str, list[RunResult | None]] = {c.case_id: [] for c in cases}
    points: dict[str, list[str]] = {}
    #: future -> (phase, case id, crash point, index in its case's list)
    pending: dict[Future, tuple[str, str, str | None, int]] = {}
    left = {c.case_id: 0 for c in cases}  # single-kill runs of the case still running (recovery)
    pair_from: dict[str, set[str]] = {}  # (sampled) single kills whose recovery gets a second kill

    def plan(more: int) -> None:
        nonlocal planned
        if more and on_plan:
            planned += more
            on_plan(planned)

    def submit(phase: str, case: Case, run_dir: Path, point: str | None, golden: RunOutcome | None,
               index: int) -> None:
        if isolated:
            f = pool.submit(_run_isolated, driver, case, pack, run_dir.relative_to(root), point, golden, how)
        else:
            f = pool.submit(_run_one, driver, case, pack, run_dir, point, golden, how)
        pending[f] = (phase, case.case_id, point, index)

    def crash_runs(case: Case, golden: RunResult) -> None:
        points[case.case_id] = golden.outcome.crash_points if golden.outcome else []
        if crash == "none" or golden.outcome is None:
            return
        wanted = list(dict.fromkeys(only)) if only else points[case.case_id]
        todo = [(n, p) for n, p in enumerate(wanted) if (case.case_id, p) not in skip]
        plan(len(todo))
        for n, point in todo:
            run_dir = root / case.case_id / f"{n:03d}-{re.sub(r'[^A-Za-z0-9_.-]', '_', point)[:80]}"
            singles[case.case_id].append(None)
            submit("single", case, run_dir, point, golden.outcome, len(singles[case.case_id]) - 1)
        left[case.case_id] = len(todo)
        if crash == "sampled" and not only:
            sample = sampled_points(points[case.case_id])
            pair_from[case.case_id] = set(sample["pairs"])
            for point in sample["pairs"]:  # resumed: a stored single kill is run again (unreported) for its pair
                if (case.case_id, point) in skip and not _pair_stored(skip, case.case_id, point):
                    submit("probe", case, root / case.case_id / f"p-{re.sub(r'[^A-Za-z0-9_.-]', '_', point)[:80]}",
                           point, golden.outcome, 0)
            extra([f"{p}{crashpoints.ALONGSIDE}" for p in sample["alongside"]]
                  + [f"{p}{crashpoints.THEN}{TOGETHER_WORKERS} workers" for p in sample["together"]], case)
        if crash == "recovery" and not todo:
            double_runs(case)

    def extra(specs: list[str], case: Case) -> None:
        """Submit the runs of crash specs beyond single kills (``sampled``), as double runs."""
        specs = [p for p in specs if (case.case_id, p) not in skip]
        plan(len(specs))
        golden = golden_results[case.case_id].outcome
        for spec in specs:
            doubles[case.case_id].append(None)
            n = len(doubles[case.case_id]) - 1
            submit("double", case, root / case.case_id / f"r{n:04d}", spec, golden, n)

    def double_runs(case: Case) -> None:
        mine = [r for r in singles[case.case_id] if r is not None]
        pairs = [f"{r.crash_point}{crashpoints.THEN}{b}" for r in mine
                 if r.outcome is not None and r.outcome.crash_fired
                 for b in crashpoints.recovery_points(r.outcome.crash_points, r.crash_point)]
        if budget is not None and len(pairs) > budget:
            step = len(pairs) / budget
            pairs = [pairs[int(i * step)] for i in range(budget)]
        plan(len(pairs))
        golden = golden_results[case.case_id].outcome
        for n, pair in enumerate(pairs):
            doubles[case.case_id].append(None)
            submit("double", case, root / case.case_id / f"r{n:04d}", pair, golden, n)

    try:
        plan(sum((c.case_id, None) not in skip for c in cases))
        for c in cases:
            submit("golden", c, root / c.case_id / "golden", None, None, 0)
        while pending:
            finished = wait_first(list(pending))
            for f in finished:
                phase, cid, point, index = pending.pop(f)
                result = _lost(f, cid, point)
                if result is None:
                    continue
                if phase == "golden" and crash != "none":
                    result = _needs_crash_points(result)
                again = phase == "golden" and _golden_again(skip, cid, result.verdict)
                if again:
                    plan(1)
                if (phase != "golden" or (cid, None) not in skip or again) and phase != "probe":
                    if on_result:  # a golden run re-run as a reference that does not pass now is a result
                        on_result(result)
                if phase == "golden":
                    golden_results[cid] = result
                    crash_runs(by_id[cid], result)
                elif phase in ("single", "probe"):
                    if phase == "single":
                        singles[cid][index] = result
                        left[cid] -= 1
                    if point in pair_from.get(cid, ()) and result.outcome is not None and result.outcome.crash_fired:
                        after = crashpoints.recovery_points(result.outcome.crash_points, point)[:1]
                        extra([f"{point}{crashpoints.THEN}{b}" for b in after], by_id[cid])
                    if crash == "recovery" and left[cid] == 0 and phase == "single":
                        double_runs(by_id[cid])
                else:
                    doubles[cid][index] = result
    finally:
        if closer is not None:
            closer()
        elif pending:
            for f in pending:
                f.cancel()
        # an interrupted sweep's workers (and what they started) die with it; its forked workers, which carry no
        # marker that /proc shows, are found by the files they hold in its folder: only in a folder the sweep made
        # itself (a user's --workdir may be the cwd of their shell or hold their editor's files: never theirs to kill)
        interrupted = isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit))
        reap_under(root, wait_s=5.0, holders=interrupted and workdir is None)
        if not keep and workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    results = [golden_results[c.case_id] for c in cases if c.case_id in golden_results
               and ((c.case_id, None) not in skip or _golden_again(skip, c.case_id, golden_results[c.case_id].verdict))]
    results += [r for c in cases for r in singles[c.case_id] if r is not None]
    results += [r for c in cases for r in doubles[c.case_id] if r is not None]
    return SweepResult(pack, adapter.name, adapter.version(), crash, results, points, time.perf_counter() - began,
                       list(cases), crash_mode)


if __name__ == "__main__":  # the cleaner started by abandon()
    import json
    import sys

    if sys.argv[1:2] == ["--clean-after"]:
        _clean_after(int(sys.argv[2]), json.loads(sys.argv[3]))
