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

import dataclasses
import hashlib
import json
import os
import shlex
import shutil
import tempfile
import time
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Sequence

from crashpoint.harness.engines.base import engine_for
from crashpoint.harness.model.results import RunResult, SweepResult, unit_id
from crashpoint.errors import UsageError
from crashpoint.harness.model.rules import Finding as Failure
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.executors import result_of
from crashpoint.harness.process.launch import reap_under
from crashpoint.harness.run.sweep import Subject, sweep_subject
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.run.target_driver import kill_schedule, prewarm, run_target
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
            write_latency_ms: float = 0.0, keep: bool = True) -> RunResult:
    """One run and its verdict (a module-level function on picklable arguments, for any executor); the verdict
    is :func:`crashpoint.harness.judge.verdict.judge`'s, the one every front end gets. ``keep`` false drops the
    outcome of a passed crash run.

    The golden run (``crash_point`` ``None``) of a ``like_fault_free`` case given no ``golden`` first runs the case
    without its faults (:meth:`~crashpoint.harness.load.target.TargetCase.without_faults`, in the folder beside,
    ``RUN_DIR-fault-free``) and is judged against it, as a pack's ``like_fault_free`` case is; a ``golden`` given
    stands for that run. If the fault-free run breaks, the run is
    an ``error`` naming it.

    Every golden run is made twice (the second in ``RUN_DIR-again``; of a ``like_fault_free`` case, its fault-free
    run is): what the two disagree on is set on the golden outcome (``unstable``) and named in its notes, and the
    comparison of a crashed run with it leaves that out (:mod:`crashpoint.harness.judge.stable`). A second run that
    does not pass is the golden run's result (its findings, or its error naming it).

    A ``crash_point`` with fault parts (``"fault:issue_refund#1=timeout"``, :mod:`crashpoint.harness.run.effect_faults`)
    runs ``case`` with those tool faults added, judged against ``golden`` as a crash run is; a fault that never fired
    leaves it untested (an ``error``), as an unreached crash point does."""
    from crashpoint.harness.judge import stable
    from crashpoint.harness.judge.verdict import judge_target
    from crashpoint.harness.run import effect_faults

    began = time.monotonic()
    faults = crashpoints.parse(crash_point).faults
    if faults:
        case = effect_faults.with_faults(case, faults)
    reference: TargetOutcome | None = golden
    options = {"warm": warm, "write_latency_ms": write_latency_ms, "server": server}
    here = Path(run_dir)
    if case.like_fault_free and crash_point is None and golden is None:
        try:
            reference = run_target(target, case.without_faults(), durability,
                                   here.with_name(here.name + "-fault-free"), None, **options)
        except Exception as exc:  # noqa: BLE001 - the run it must end like broke: nothing to compare with
            return _broke(target, case, durability, exc, repeat, "the fault-free run", began)
    try:
        out: TargetOutcome | BaseException = run_target(target, case, durability, run_dir, crash_point, **options)
    except Exception as exc:  # noqa: BLE001 - judged below: unsupported, unknown or error, never a skip
        out = exc
    kills = kill_schedule(case, crash_point)
    reached = not crash_point or ((kills is None or crashpoints.fired(run_dir, kills))
                                  and (not faults or effect_faults.fired(out, faults)))
    result = judge_target(target, case, durability, out, crash_point=crash_point, golden=reference, reached=reached,
                          repeat=repeat)
    if crash_point is None and golden is None and isinstance(out, TargetOutcome) and result.verdict == "passed":
        # the same fault-free run once more: what the two disagree on, no crashed run is compared on (judge/stable.py)
        twin = case.without_faults() if case.like_fault_free else case
        try:
            again = run_target(target, twin, durability, here.with_name(here.name + "-again"), None, **options)
        except Exception as exc:  # noqa: BLE001 - a fault-free run that breaks the second time is not a golden run
            return _broke(target, case, durability, exc, repeat, SECOND_RUN, began)
        second = judge_target(target, twin, durability, again, repeat=repeat)
        if second.verdict != "passed":  # without any fault it passed once and not twice: that run is the golden's
            second.error = f"{SECOND_RUN}: {second.error}" if second.error else None
            second.notes.insert(0, f"{SECOND_RUN} did not pass, the first did")
            second.wall_s = time.monotonic() - began
            return second
        found = stable.unstable(reference if reference is not None else out, again)
        for ran in {id(o): o for o in (out, reference) if o is not None}.values():
            ran.unstable = found
        for line in stable.notes(target, found):
            for notes in (out.notes, result.notes):
                if line not in notes:
                    notes.append(line)
    if isinstance(out, TargetOutcome) and not (keep or crash_point is None or result.verdict != "passed"):
        result.outcome = None
    result.wall_s = time.monotonic() - began
    return result


#: How a golden run's error or note names the second fault-free run :func:`run_one` makes.
SECOND_RUN = "the second fault-free run (made to tell what differs from run to run)"


def _broke(target: Target, case: TargetCase, durability: str, exc: Exception, repeat: int, what: str,
           began: float) -> RunResult:
    """The result of a golden run whose reference run (``what``) raised ``exc``: judged as that exception (``error``,
    or ``unsupported`` / ``unknown``), an ``error`` naming ``what``."""
    from crashpoint.harness.judge.verdict import judge_target

    result = judge_target(target, case, durability, exc, repeat=repeat)
    if result.verdict == "error":
        result.error = f"{what} broke: {result.error}"
    result.wall_s = time.monotonic() - began
    return result


def missing_code(target: Target, code: Sequence[str]) -> str | None:
    """On the machine that executes a run (a Dask worker): an ``error`` result when a folder of ``code`` (the target's
    ``pythonpath`` folders that existed where the sweep was started) is not there, or the engine's packages are not
    installed, naming the machine and what is missing (the error's text); ``None`` when the team's code and its engine are in place."""
    import importlib.metadata
    import socket

    missing = [p for p in code if not os.path.isdir(p)]
    engine = engine_for(target.engine)
    absent = []
    for package in engine.packages:
        try:
            importlib.metadata.distribution(package)
        except importlib.metadata.PackageNotFoundError:
            absent.append(package)
    if not missing and not absent:
        return None
    what = ([f"the target's pythonpath folder {', '.join(missing)} (the team's code)"] if missing else []) + \
        ([f"the engine's package {', '.join(absent)}"] if absent else [])
    return f"this run's machine ({socket.gethostname()}) lacks {' and '.join(what)}: every worker of the executor " \
           "needs the team's code at the same path and its engine installed (docs/how-to/parallel.md, 'A target on " \
           "a Dask cluster')"


def _target_run(run_dir: Path, target: Target, case: TargetCase, durability: str, crash_point: str | None,
                golden: TargetOutcome | None, repeat: int, opts: dict[str, Any], code: Sequence[str] = ()) -> RunResult:
    """:func:`run_one` with the run folder first (the shape :meth:`~crashpoint.harness.run.sweep.Subject.call`
    gives); an ``error`` without running when this machine lacks the team's code or its engine (:func:`missing_code`:
    ``code`` the target's ``pythonpath`` folders that existed on the sweep's machine)."""
    lacks = missing_code(target, code)
    if lacks is not None:
        return RunResult(unit_id(case.name, durability), crash_point, "error", error=lacks, variant=durability,
                         repeat=repeat)
    return run_one(target, case, durability, run_dir, crash_point, golden, repeat, **opts)


@dataclass
class TargetSubject(Subject):
    """A target's cases, each in each durability mode (a unit: ``CASE[MODE]``), on the target's engine."""

    target: Target
    cases: list[TargetCase]
    modes: list[str]
    opts: dict[str, Any]

    kind = "target"
    default_executor = "threads"  # each run waits on its own worker processes, forked from its thread's zygote

    def __post_init__(self) -> None:
        self._of = {unit_id(c.name, m): (c, m) for c in self.cases for m in self.modes}
        self._engine = engine_for(self.target.engine)
        #: the pythonpath folders that exist here: a run on a machine without them is an error (missing_code)
        self._code = tuple(p for p in self.target.pythonpath if os.path.isdir(p))

    def units(self) -> list[str]:
        return list(self._of)

    def call(self, unit, crash_point, golden, repeat):
        case, mode = self._of[unit]
        return _target_run, (self.target, case, mode, crash_point, golden, repeat, self.opts, self._code)

    def point_classes(self, unit, points, golden):
        from crashpoint.harness.run import point_classes

        case, _ = self._of[unit]
        return point_classes.classes(points, roles=point_classes.thread_roles(self.target.inputs,
                                                                              self.target.expected(case)),
                                     calls=getattr(golden, "calls", ()), recovery_kinds=self._engine.recovery_kinds)

    def sweepable(self, unit, points):
        """Those after the case's own kills (a kill fault's, a deploy's ``at``): a sweep's kill fires during the
        recovery from them, so a point the golden run passed before them is never reached again."""
        own = self._of[unit][0].injection().kills
        return crashpoints.recovery_points(points, own[-1]) if own and own[-1] in points else points

    def second(self, unit, first, recovery):
        return self._engine.sampled_second(recovery, first)

    def extras(self, unit, points, golden=None):
        from crashpoint.harness.run import effect_faults

        case, mode = self._of[unit]
        if not isinstance(golden, TargetOutcome):
            return []
        from crashpoint.harness.run.point_classes import thread_roles

        roles = thread_roles(self.target.inputs, self.target.expected(case))
        return [*self._engine.sampled_extras(golden, mode, self.target, case),
                *effect_faults.specs(golden, case, roles)]

    def recovery_seconds(self, unit, first, recovery):
        return self._engine.recovery_points(recovery)

    def started(self, pool, own, workers):
        if own and self.opts.get("warm", True):  # the pool's other threads start their zygotes meanwhile
            for _ in range(workers - len(self._of)):
                pool.submit(prewarm, self.target)

    def close(self, own):
        if own:
            self._engine.close_after_sweep()  # what this sweep's runs shared (a server no run uses now)

    def result(self, crash, results, points, wall_s):
        # the coverage matrix reads each case's faults through their kinds (every fault of a TargetCase has one)
        units = {u: {"case": c.name, "variant": m, "events": [], "faults": list(c.faults),
                     "workflow": None} for u, (c, m) in self._of.items()}
        return SweepResult(self.target, self.target.engine, self._engine.version(), crash, results, points, wall_s,
                           units=units, crash_mode="kill" if self.opts.get("warm", True) else "kill-cold")

    def describe(self):
        return (f"target {self.target.name} ({len(self.cases)} case(s) x {len(self.modes)} durability mode(s)) on "
                f"engine {self._engine.version()}")

    def preamble(self):
        note = self._engine.time_note(self.target)
        return [note] if note else []

    def store_info(self):
        return {"engine": self.target.engine, "engine_version": self._engine.version(), "adapter": None,
                "pack": self.target.name, "pack_version": self.target.version}

    def selection(self, crash, only, crash_mode, points=None):
        from crashpoint.harness.run.modes import crash_label

        return {"cases": {u: hashlib.sha256(json.dumps([dataclasses.asdict(c), m], sort_keys=True, default=str)
                                            .encode()).hexdigest() for u, (c, m) in self._of.items()},
                "crash_points": sorted(set(only)), "crash": crash_label(crash, crash_mode),
                "engine": self.target.engine, "engine_version": self._engine.version(), "pack": self.target.name,
                "pack_version": self.target.version, "pack_digest": self.target.version,
                "options": {k: v for k, v in sorted(self.opts.items())}, **({"points": points} if points else {})}

    def narrowed(self, units):
        keep = [u for u in self._of if u in set(units)]
        cases = [c for c in self.cases if any(self._of[u][0] is c for u in keep)]
        modes = [m for m in self.modes if any(self._of[u][1] == m for u in keep)]
        narrow = TargetSubject(self.target, cases, modes, self.opts)
        narrow._of = {u: self._of[u] for u in keep}
        return narrow

    def default_workers(self):
        return default_workers(self.target)

    def repro(self, unit, crash_point):
        from crashpoint.harness.judge.verdict import target_repro

        case, mode = self._of[unit]
        return target_repro(self.target, case.name, mode, crash_point)


def subject_of(target: Target, *, cases: Sequence[str] | None = None, durability: Sequence[str] | None = None,
               warm: bool = True, write_latency_ms: float = 0.0, server: str = "shared") -> TargetSubject:
    """The :class:`TargetSubject` of ``target``'s ``cases`` (default: all) in each ``durability`` mode (default: the
    target's), with the run options.

    Raises:
        UsageError: an unknown case, or a mode other than sync, async, exit.
    """
    try:
        chosen = [target.case(c) for c in cases] if cases else list(target.cases)
    except KeyError as exc:
        raise UsageError(str(exc.args[0])) from None
    modes = list(durability or target.durability)
    if any(m not in ("sync", "async", "exit") for m in modes):
        raise UsageError(f"durability must be sync, async or exit, got {modes!r}")
    return TargetSubject(target, chosen, modes, {"warm": warm, "write_latency_ms": write_latency_ms,
                                                 "server": server})


def sweep(target: Target, *, cases: Sequence[str] | None = None, durability: Sequence[str] | None = None,
          crash: str = "every", crash_points: Sequence[str] | None = None, repeat: int = 1,
          executor: Executor | None = None, workers: int | None = None, warm: bool = True,
          write_latency_ms: float = 0.0, workdir: Path | None = None, server: str = "shared",
          on_result: Callable[[RunResult], None] | None = None, on_plan: Callable[[int], None] | None = None,
          skip: Collection[tuple[str, str | None]] = (), keep_outcomes: bool = False, points: str | None = None,
          time_budget_s: float | None = None) -> SweepResult:
    """Sweep ``target``: :func:`~crashpoint.harness.run.sweep.sweep_subject` of a :class:`TargetSubject` (the one
    sweep loop packs use too; see there for ``on_result``, ``on_plan``, ``skip`` and ``keep_outcomes``).

    Args:
        cases / durability: subsets (default: all of the target's). ``crash``: ``every`` | ``sampled`` (see
            :data:`CRASH_MODES`; with ``crash_points`` it is ``every``) | ``none`` | ``recovery``.
        crash_points: only these ids (or schedules ``"A >> B"``); default every point of the golden run (with
            ``sampled``, a sample of each crash-point class: ``points``).
        points / time_budget_s: ``classes`` | ``all`` and a time budget in seconds: see
            :func:`~crashpoint.harness.run.sweep.sweep_subject`.
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
    subject = subject_of(target, cases=cases, durability=durability, warm=warm, write_latency_ms=write_latency_ms,
                         server=server)
    if executor is None:
        executor = "threads"
    return sweep_subject(subject, crash=crash, jobs=workers or default_workers(target), executor=executor,
                         workdir=workdir, keep=workdir is not None, only=list(crash_points or ()), repeat=repeat,
                         on_result=on_result, on_plan=on_plan, skip=skip, keep_outcomes=keep_outcomes, points=points,
                         time_budget_s=time_budget_s)
