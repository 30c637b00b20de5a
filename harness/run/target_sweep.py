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

from crashpoint.harness.model.results import TargetRunResult, TargetSweep
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
#: engine's pairs, :func:`~crashpoint.harness.run.sweep.sampled_points`), at the first checkpoint write of each
#: recovery (:func:`_sampled_second`). (The reference engine's other sampled extras, a second live worker beside a held one and several
#: workers recovering at once, need a hold and worker identities a target engine does not have: a target's
#: ``duplicate`` and ``workers`` cases are where those are tested.)
CRASH_MODES = ("sampled", "every", "none", "recovery")
#: Crash point kinds a recovery is killed at again with ``crash="recovery"`` (the first of each kind).
RECOVERY_KINDS = ("node:", "before_effect:", "after_effect:", "before_put:", "before_writes:",
                  "step:", "before_result:", "dequeued:")  # the last three: DBOS's (a step, its result, a claim)

#: Engine -> runs at once per CPU when a sweep is given no ``workers``: a Temporal run mostly waits (a kill costs
#: the team's activity timeout or the workflow task timeout, 2 s each in the example, with no CPU used), so more runs
#: than CPUs keep them busy. Other engines: :data:`DEFAULT_WORKERS`. 5 per CPU since 2026-12-02 (3 before): the
#: example's cases ``approved`` and ``denied`` at 16 crash points took 22.6 s at 6 runs at once and 18.3 s at 12
#: (a server per worker: 51.5 s and 57.3 s, CPU-bound), load 1 to 20 (benchmarks/temporal_sweep.py --points 16).
WORKERS_PER_CPU = {"temporal": 5}
DEFAULT_WORKERS = 2


def default_workers(target: Target) -> int:
    """Runs at once for a sweep of ``target`` given no ``workers`` (see :data:`WORKERS_PER_CPU`)."""
    per_cpu = WORKERS_PER_CPU.get(target.engine)
    return per_cpu * (os.cpu_count() or 1) if per_cpu else DEFAULT_WORKERS






def run_one(target: Target, case: TargetCase, durability: str, run_dir: Path, crash_point: str | None,
            golden: TargetOutcome | None, repeat: int = 1, *, warm: bool = True, server: str = "shared",
            write_latency_ms: float = 0.0, keep: bool = False) -> TargetRunResult:
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


def _subject(point: str) -> str:
    """What a crash point id is about: the workflow (thread) or effect between its kind and its ``@``/``#``
    (``before_result:refund-1002@issue`` -> ``refund-1002``; ``after_effect:issue_refund#2`` -> ``issue_refund``)."""
    rest = point.partition(":")[2]
    return rest.split("@", 1)[0].split("#", 1)[0]


def _sampled_second(recovery: list[str], first: str = "") -> list[str]:
    """The second kill of a sampled pair: the recovery's first checkpoint write (``before_put:``/``after_put:``),
    else its first crash point about what the first kill (``first``) was about, else its first crash point. A write
    comes between supersteps, so its id (numbered by occurrence, ``#2``) is the same in every run; a node or effect
    point of the superstep the first kill cut is not (parallel branches of the killed process may or may not have
    passed it: the pair would miss its second point). Without writes (DBOS, Temporal), the workflow the first kill
    cut resumes from where that kill left it, while another workflow's first point depends on which one the
    recovery picks up first (a race: ``before_result:refund-1002@issue >>
    dequeued:refund-1001@_dbos_internal_queue#2`` was never reached in about 1 sweep in 4 of examples/dbos_refund)."""
    puts = [p for p in recovery if p.startswith(("before_put:", "after_put:"))]
    if puts:
        return puts[:1]
    subject = _subject(first) if first else ""
    own = [p for p in recovery if subject and _subject(p) == subject]
    return (own or recovery)[:1]


def _recovery_points(log: list[str], first: str) -> list[str]:
    after = crashpoints.recovery_points(log, first)
    chosen = []
    for kind in RECOVERY_KINDS:
        hit = next((p for p in after if p.startswith(kind)), None)
        if hit:
            chosen.append(hit)
    return chosen


def sweep(target: Target, *, cases: Sequence[str] | None = None, durability: Sequence[str] | None = None,
          crash: str = "every", crash_points: Sequence[str] | None = None, repeat: int = 1,
          executor: Executor | None = None, workers: int | None = None, warm: bool = True,
          write_latency_ms: float = 0.0, workdir: Path | None = None, server: str = "shared",
          on_result: Callable[[TargetRunResult], None] | None = None) -> TargetSweep:
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
    results: list[TargetRunResult] = []
    points: dict[tuple[str, str], list[str]] = {}
    pair_from: dict[tuple[str, str], set[str]] = {}  # (sampled) single kills whose recovery gets a second kill
    counter = iter(range(10**9))
    opts = {"warm": warm, "write_latency_ms": write_latency_ms, "server": server}

    def folder(label: str) -> Path:  # never one an earlier sweep left in ``workdir`` (a fixture called twice)
        while (path := root / f"{next(counter):05d}-{label}").exists():
            pass
        return path

    def done(r: TargetRunResult) -> TargetRunResult:
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
            if crash == "recovery":
                seconds = _recovery_points(r.outcome.crash_points, r.crash_point)
            elif r.crash_point in pair_from.get((r.case, r.durability), ()) and r.repeat == 1:
                seconds = _sampled_second(crashpoints.recovery_points(r.outcome.crash_points, r.crash_point), r.crash_point)
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
            if target.engine == "temporal":
                from crashpoint.harness.engines.temporal import close_idle
                from crashpoint.harness.engines.temporal_ahead import close_ahead

                close_idle()  # the shared servers this sweep's runs used (SIGKILLed, verified)
                close_ahead()  # the servers started ahead that no run took
        # what the runs' workers started and left (it carries a run's marker), whatever group or session it is in
        reap_under(root, wait_s=5.0)
        if workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    from crashpoint.harness.engines import dbos
    from crashpoint.harness.engines import langgraph
    from crashpoint.harness.engines import temporal

    version = {"dbos": dbos.engine_version, "langgraph": langgraph.engine_version,
               "temporal": temporal.engine_version}[target.engine]()
    ran = "every" if crash == "sampled" and crash_points else crash  # chosen points run once each: no sampled pairs
    return TargetSweep(target, results, points, time.monotonic() - began, version, ran)
