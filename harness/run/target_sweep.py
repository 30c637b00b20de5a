"""The crash sweep of a target: per case and durability mode, a golden run, then a real SIGKILL at every
crash point it passed (each ``repeat`` times); with ``crash="sampled"`` (``crashpoint run``'s default) also a
second kill during a bounded sample of recoveries (:data:`CRASH_MODES`), and with ``crash="recovery"`` a
second kill at each crash point kind of each recovery.

Runs go through a :class:`concurrent.futures.Executor` (:func:`crashpoint.harness.run.executors.make_executor`;
threads by default: each run waits on its own worker processes, forked from its thread's warm zygote).
Each run is a module-level call on picklable arguments in its own folder.

Verdicts: ``passed``; ``failed`` (a rule's finding); ``error`` (a worker broke, a kill could not be
verified, or the targeted crash point was never reached: the run did not test what it claims);
``unknown`` (a rule or invariant raised); ``unsupported`` (the engine release lacks the durability mode:
never passed, never failed).
"""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from crashpoint.harness.engines.base import engine_for
from crashpoint.harness.model.results import RunResult, SweepResult, unit_id
from crashpoint.errors import UsageError
from crashpoint.harness.model.rules import Finding as Failure
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.executors import result_of
from crashpoint.harness.process.launch import reap_under
from crashpoint.harness.run.sweep import sampled_points
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.run.target_driver import prewarm, run_target
from crashpoint.harness.load.target import Target, TargetCase

#: ``crash`` values: ``sampled`` is ``every`` plus, per case and durability mode, a second kill during the recovery
#: from :data:`crashpoint.harness.run.sweep.SAMPLED_PAIRS` single kills spread over the golden run (the reference
#: engine's pairs, :func:`~crashpoint.harness.run.sweep.sampled_points`), at the point the target's engine picks in
#: each recovery (:meth:`~crashpoint.harness.engines.base.Engine.sampled_second`). (The reference engine's other sampled extras, a second live worker beside a held one and several
#: workers recovering at once, need a hold and worker identities a target engine does not have: a target's
#: ``duplicate`` and ``workers`` cases are where those are tested.)
CRASH_MODES = ("sampled", "every", "none", "recovery")
#: Runs at once of a sweep given no ``workers``, for an engine that declares no
#: :attr:`~crashpoint.harness.engines.base.Engine.workers_per_cpu`.
DEFAULT_WORKERS = 2


def default_workers(target: Target) -> int:
    """Runs at once for a sweep of ``target`` given no ``workers``: its engine's ``workers_per_cpu`` times the CPUs,
    else :data:`DEFAULT_WORKERS`."""
    per_cpu = engine_for(target.engine).workers_per_cpu
    return per_cpu * (os.cpu_count() or 1) if per_cpu else DEFAULT_WORKERS






def run_one(target: Target, case: TargetCase, durability: str, run_dir: Path, crash_point: str | None,
            golden: TargetOutcome | None, repeat: int = 1, *, warm: bool = True, server: str = "shared",
            write_latency_ms: float = 0.0, keep: bool = False) -> RunResult:
    """One run and its verdict (a module-level function on picklable arguments, for any executor); the verdict
    is :func:`crashpoint.harness.judge.verdict.judge_target`'s, the one every front end gets."""
    from crashpoint.harness.judge.verdict import judge_target

    began = time.monotonic()
    try:
        out: TargetOutcome | BaseException = run_target(target, case, durability, run_dir, crash_point, warm=warm,
                                                        write_latency_ms=write_latency_ms,
                                                        server=server)
    except Exception as exc:  # noqa: BLE001 - judged below: unsupported, unknown or error, never a skip
        out = exc
    reached = not crash_point or crashpoints.fired(run_dir, crash_point)
    result = judge_target(target, case, durability, out, crash_point=crash_point, golden=golden, reached=reached,
                          repeat=repeat)
    if isinstance(out, TargetOutcome):
        result.outcome = out if (keep or crash_point is None or result.verdict != "passed") else None
    result.wall_s = time.monotonic() - began
    return result


def sweep(target: Target, *, cases: Sequence[str] | None = None, durability: Sequence[str] | None = None,
          crash: str = "every", crash_points: Sequence[str] | None = None, repeat: int = 1,
          executor: Executor | None = None, workers: int | None = None, warm: bool = True,
          write_latency_ms: float = 0.0, workdir: Path | None = None, server: str = "shared",
          on_result: Callable[[RunResult], None] | None = None) -> SweepResult:
    """Sweep ``target`` (see the module docstring).

    Args:
        cases / durability: subsets (default: all of the target's). ``crash``: ``every`` | ``sampled`` (see
            :data:`CRASH_MODES`; with ``crash_points`` it is ``every``) | ``none`` | ``recovery``.
        crash_points: only these ids (or schedules ``"A >> B"``); default every point of the golden run.
        repeat: runs per crash point (>= 1): a racy point's outcome can depend on thread timing.
        executor: where runs execute (default: a thread pool of ``workers``, default
            :func:`default_workers`). ``warm``: fork workers from a
            warm zygote (``False``: a new interpreter per worker, the naive way).
        write_latency_ms: delay added to each checkpoint write. ``workdir``: keep run folders here.
        server: where an engine with a server (Temporal) keeps a run's state: ``shared`` (a namespace of the
            run's own on a shared server), ``run`` (a server of its own), ``worker`` (a new server before every
            worker: the benchmark's baseline); see :func:`~crashpoint.harness.run.target_driver.run_target`.

    Raises:
        UsageError: an unknown case or mode, ``repeat < 1``, an unknown ``crash``.
    """
    if crash not in CRASH_MODES or repeat < 1:
        raise UsageError(f"crash must be one of {', '.join(CRASH_MODES)} and repeat >= 1 (got {crash!r}, {repeat})")
    try:
        chosen = [target.case(c) for c in cases] if cases else list(target.cases)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    modes = list(durability or target.durability)
    if any(m not in ("sync", "async", "exit") for m in modes):
        raise UsageError(f"durability must be sync, async or exit, got {modes!r}")
    began = time.monotonic()
    root = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="crashpoint-target-"))
    root.mkdir(parents=True, exist_ok=True)
    own = executor is None
    if own:
        from concurrent.futures import ThreadPoolExecutor

        workers = workers or default_workers(target)
        executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="crashpoint-target")
    results: list[RunResult] = []
    points: dict[tuple[str, str], list[str]] = {}
    pair_from: dict[tuple[str, str], set[str]] = {}  # (sampled) single kills whose recovery gets a second kill
    counter = iter(range(10**9))
    opts = {"warm": warm, "write_latency_ms": write_latency_ms, "server": server}
    engine = engine_for(target.engine)

    def folder(label: str) -> Path:  # never one an earlier sweep left in ``workdir`` (a fixture called twice)
        while (path := root / f"{next(counter):05d}-{label}").exists():
            pass
        return path

    def done(r: RunResult) -> RunResult:
        results.append(r)
        if on_result:
            on_result(r)
        return r

    try:
        goldens = {(c.name, m): executor.submit(run_one, target, c, m, folder(f"{c.name}-{m}-golden"), None, None, 1,
                                                keep=True, **opts) for c in chosen for m in modes}
        if own and warm:  # the pool's other threads start their zygotes meanwhile (a cold one takes seconds)
            for _ in range(workers - len(goldens)):
                executor.submit(prewarm, target)
        crash_futures = []
        for (name, mode), future in goldens.items():
            golden = done(result_of(future))
            case = target.case(name)
            if golden.outcome is None:
                continue
            points[(name, mode)] = golden.outcome.crash_points
            if crash == "none":
                continue
            todo = list(crash_points) if crash_points else golden.outcome.crash_points
            if crash == "sampled" and not crash_points:  # the reference engine's choice of pair points
                pair_from[(name, mode)] = set(sampled_points(golden.outcome.crash_points)["pairs"])
            for point in todo:
                for n in range(1, repeat + 1):
                    crash_futures.append(executor.submit(
                        run_one, target, case, mode, folder(f"{name}-{mode}"), point, golden.outcome, n,
                        keep=crash == "recovery" or point in pair_from.get((name, mode), ()), **opts))
        more = []
        for future in crash_futures:
            r = done(result_of(future))
            if r.outcome is None or crashpoints.THEN.strip() in (r.crash_point or ""):
                continue
            after = crashpoints.recovery_points(r.outcome.crash_points, r.crash_point)
            if crash == "recovery":
                seconds = engine.recovery_points(after)
            elif r.crash_point in pair_from.get((r.case, r.durability), ()) and r.repeat == 1:
                seconds = engine.sampled_second(after, r.crash_point)
            else:
                continue
            case = target.case(r.case)
            golden_out = next(g.outcome for g in results if g.crash_point is None and g.case == r.case
                              and g.durability == r.durability)
            for second in seconds:
                more.append(executor.submit(run_one, target, case, r.durability, folder(f"{r.case}-{r.durability}"),
                                            f"{r.crash_point}{crashpoints.THEN}{second}", golden_out, r.repeat, **opts))
            if r.verdict == "passed":
                r.outcome = None
        for future in more:
            done(result_of(future))
    finally:
        if own:
            # each pool thread's zygote dies with its thread (PR_SET_PDEATHSIG follows the creating thread)
            executor.shutdown(wait=True, cancel_futures=True)
            engine.close_after_sweep()  # what this sweep's runs shared (a server no run uses now)
        # what the runs' workers started and left (it carries a run's marker), whatever group or session it is in
        reap_under(root, wait_s=5.0)
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    version = engine.version()
    ran = "every" if crash == "sampled" and crash_points else crash  # chosen points run once each: no sampled pairs
    units = {unit_id(c.name, m): {"case": c.name, "variant": m, "events": [], "faults": list(c.faults), "workflow": None}
             for c in chosen for m in modes}
    return SweepResult(target, target.engine, version, ran, results, {unit_id(c, m): pts for (c, m), pts in points.items()},
                       time.monotonic() - began, units=units, crash_mode="kill" if warm else "kill-cold")
