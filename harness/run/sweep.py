"""The crash sweep: a golden run per case, then one run per (case, crash point) with a real SIGKILL.

Runs go through a :class:`concurrent.futures.Executor` (see :mod:`crashpoint.harness.run.executors`):
a local process pool by default, a thread pool, or a Dask ``distributed`` cluster. Each run is a
call of a module-level function on picklable arguments that returns a picklable
:class:`RunResult`, and is self-contained in its own folder, so it can execute anywhere.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import re
import shutil
import sys
import tempfile
import time
from concurrent.futures import CancelledError, Executor, Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Collection, Mapping, Sequence

from crashpoint.harness.model.results import SweepResult
from crashpoint.harness.adapters.protocol import EngineAdapter
from crashpoint.harness.judge.verdict import VERDICTS, Invocation, RunResult, judge, needs_fault_free, repro_command, unsupported
from crashpoint.harness.process import kills
from crashpoint.harness.load.loader import Case, Pack
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.pack_driver import Driver, RunOutcome, reap_under
from crashpoint.harness.run import point_classes
from crashpoint.harness.run.executors import result_of, wait_first
from crashpoint.harness.run.point_classes import PointClass

CRASH_MODES = ("sampled", "every", "none", "recovery")
#: ``points``: ``classes`` kills at a sample of each crash-point class's instances (``--crash sampled``'s default),
#: ``all`` at every instance (see :mod:`crashpoint.harness.run.point_classes`).
POINTS_MODES = ("classes", "all")
#: The order a sweep on a time budget starts its runs in (lowest first): the golden runs, each class's first
#: instance, the further instances of racy classes, of recovery classes, the runs of kills during recovery (pairs,
#: extras, ``--crash recovery``), the instances beyond the sample (``points="all"``), further ``repeat`` tries; within
#: a tier, each case's points by :func:`spread_rank` (the middle of its run first).
TIERS = {"golden": 0, "class": 1, "racy": 2, "recovery": 3, "pairs": 4, "instance": 5, "repeat": 6}
#: A crash run's expected wall seconds, before any has finished: this many times its golden run's.
CRASH_RUN_FACTOR = 1.5
#: ``sampled``: per case, the crash runs added to ``every`` (see :func:`sampled_specs`).
SAMPLED_PAIRS = 2       #: kills during the recovery from a kill ("A >> B"), count per case
SAMPLED_ALONGSIDE = 1   #: a second live worker while one is held ("P || worker"), count per case
SAMPLED_TOGETHER = 1    #: several workers recovering at once after a kill ("A >> 3 workers"), count per case
#: Workers that recover at once in a sampled "A >> N workers" run.
TOGETHER_WORKERS = 3
#: Runs a sampled recovery pair ("A >> B", B picked by crashpoint) gets at most: a run whose second kill was never
#: reached (the recovery took another path: another queued workflow first, a racy ordinal) is replaced by a run
#: killed at another point of that recovery, or retried, never reported as an ``error`` (see :class:`_Loop`).
PAIR_TRIES = 3
#: File in a sweep folder that the sweep made itself (and removes when it ends): a pool process whose
#: caller was SIGKILLed removes such a folder (see :func:`abandon`).
TEMPORARY_ROOT = ".crashpoint-temporary"
#: File in a sweep's ``workdir`` that the sweep holds locked (``flock``) while it runs, with its pid: one sweep per
#: folder (see :func:`hold_workdir`).
SWEEP_LOCK = ".crashpoint-sweep.lock"
#: Run folders this process has run (a pool process's record, for :func:`abandon`).
_RUN_DIRS: set[Path] = set()


def _spread(items: Sequence[str], n: int) -> list[str]:
    """``n`` items of ``items`` evenly spread (the middle of each of ``n`` equal slices), in order."""
    if not items or n <= 0:
        return []
    n = min(n, len(items))
    return list(dict.fromkeys(items[(2 * k + 1) * len(items) // (2 * n)] for k in range(n)))


def hold_workdir(root: Path) -> int:
    """Lock ``root`` (a sweep's ``workdir``) for this sweep: an exclusive ``flock`` on ``root/``:data:`SWEEP_LOCK`,
    which holds this process's pid; the lock goes with the returned file descriptor (closed by the sweep when it
    ends, or by the system when its process dies: a SIGKILLed sweep leaves no stale lock).

    Raises:
        UsageError: another sweep holds ``root`` (two sweeps in one folder spoil each other's runs); the message
            names its pid.
    """
    import fcntl
    import os

    from crashpoint.errors import UsageError

    fd = os.open(root / SWEEP_LOCK, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        holder = os.read(fd, 32).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise UsageError(f"--workdir {root}: another sweep (pid {holder}) is running in this folder; two sweeps "
                         "in one folder spoil each other's runs: give each sweep a --workdir of its own") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return fd


def workdir_in_use(root: Path) -> str | None:
    """The pid (as written) of the sweep running in folder ``root`` (:func:`hold_workdir`), ``None`` when none is."""
    import fcntl
    import os

    try:
        fd = os.open(Path(root) / SWEEP_LOCK, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return os.read(fd, 32).decode(errors="replace").strip() or "?"
    finally:
        os.close(fd)
    return None


def spread_rank(n: int) -> list[int]:
    """The rank of each of ``n`` positions when they are taken by halving (the middle first, then the middles of
    each half, ...): ``spread_rank(4) == [3, 1, 0, 2]``. Positions taken in rank order cover the range evenly at any
    point: a time budget that cuts a tier keeps kills spread over each case's run, not its first part."""
    rank, order, halves = [0] * n, 0, [(0, n)]
    while halves:
        lo, hi = halves.pop(0)
        if lo >= hi:
            continue
        mid = (lo + hi) // 2
        rank[mid], order = order, order + 1
        halves += [(lo, mid), (mid + 1, hi)]
    return rank


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


def _isolated(fn: Callable[..., RunResult], run_dir: Path, *args: Any) -> RunResult:
    """``fn(run_dir, *args)`` in a temporary folder of the machine that executes it (``run_dir`` relative),
    removed afterwards: for executors whose workers do not share the caller's file system (Dask)."""
    scratch = Path(tempfile.mkdtemp(prefix="crashpoint-run-"))
    try:
        return fn(scratch / run_dir, *args)
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


class Subject:
    """What a sweep runs: a pack's cases on an adapter (:class:`PackSubject`) or a target's cases on an engine
    (:class:`~crashpoint.harness.run.target_sweep.TargetSubject`). The one sweep loop (:func:`sweep_subject`)
    asks it; a subject holds only picklable state, since its runs execute wherever the executor puts them.

    A unit is what a golden run is made for (a pack's case; a target's case in one durability mode), named by its
    id (the ``case_id`` of its results).
    """

    #: ``pack`` or ``target``.
    kind: str = "pack"
    #: the executor a sweep makes when given none: ``processes`` or ``threads``.
    default_executor: str = "processes"

    def units(self) -> list[str]:
        """The units' ids, in report order."""
        raise NotImplementedError

    def call(self, unit: str, crash_point: str | None, golden: Any, repeat: int) -> tuple[Callable[..., RunResult],
                                                                                           tuple[Any, ...]]:
        """``(fn, args)``: the run of ``unit`` killed at ``crash_point`` (``None``: its golden run), executed as
        ``fn(run_dir, *args)`` (a module-level function on picklable arguments, returning its :class:`RunResult`)."""
        raise NotImplementedError

    def pair_points(self, unit: str, points: list[str]) -> list[str]:
        """``--crash sampled``: the single kills of ``unit`` whose recovery gets a second kill."""
        return sampled_points(points)["pairs"]

    def extras(self, unit: str, points: list[str], golden: Any = None) -> list[str]:
        """``--crash sampled``: the unit's runs beyond single kills and pairs (a pack's second live worker and its
        recovery by several workers at once; a target's engine's forced races), from its golden run's ``points`` (and
        ``golden``, its outcome)."""
        return []

    def sweepable(self, unit: str, points: list[str]) -> list[str]:
        """The crash points of ``unit``'s golden run (``points``, in order) that a crash run can kill at (default: all
        of them)."""
        return points

    def second(self, unit: str, first: str, recovery: list[str]) -> list[str]:
        """``--crash sampled``: the second kill of a pair, from the crash points its recovery passed."""
        return recovery[:1]

    def recovery_seconds(self, unit: str, first: str, recovery: list[str]) -> list[str]:
        """``--crash recovery``: the second kills after a kill at ``first`` (default: every point of its recovery)."""
        return recovery

    def point_classes(self, unit: str, points: list[str], golden: Any) -> list[PointClass]:
        """The crash-point classes of ``unit``'s golden run (``points``; ``golden`` its outcome): see
        :mod:`crashpoint.harness.run.point_classes`. Default: every point a class of its own (a pack's points name
        no thread)."""
        return point_classes.classes(points, roles=None)

    def started(self, pool: Executor, own: bool, workers: int) -> None:
        """Called once the golden runs are submitted (a target's idle pool threads warm their zygotes)."""

    def close(self, own: bool) -> None:
        """Called when the sweep ends, however it ends (``own``: the sweep made its executor)."""

    def result(self, crash: str, results: list[RunResult], points: dict[str, list[str]],
               wall_s: float) -> SweepResult:
        """The sweep's :class:`SweepResult`."""
        raise NotImplementedError

    # what the command line, the results store and --resume ask of a subject

    def describe(self) -> str:
        """One line for the sweep's first line of output: what runs on what."""
        raise NotImplementedError

    def preamble(self) -> list[str]:
        """Lines the sweep's output gives after its first one, before any run (a target's: how its engine compresses
        time); ``[]`` by default."""
        return []

    def store_info(self) -> dict[str, Any]:
        """The results store's run fields this subject fills: ``engine``, ``engine_version``, ``adapter``, ``pack``
        (the pack's or the target's name), ``pack_version`` (a target's: the digest of its file's contents)."""
        raise NotImplementedError

    def selection(self, crash: str, only: Sequence[str], crash_mode: str, points: str | None = None) -> dict[str, Any]:
        """What a sweep of this subject is asked to do, as recorded with its run (``--resume`` appends only to a run
        whose selection is the same): see :func:`crashpoint.harness.run.resume.selection`; ``points``: ``--points``
        (``classes`` | ``all``), recorded when given."""
        raise NotImplementedError

    def narrowed(self, units: Sequence[str]) -> "Subject":
        """The same subject with only ``units`` (``--resume``: the units with runs left)."""
        raise NotImplementedError

    def tags(self, unit: str) -> list[str]:
        """The unit's tags, stored with its results (``incident`` marks a regression case)."""
        return []

    def repro(self, unit: str, crash_point: str | None) -> str:
        """The one-line command that re-runs one run of ``unit`` (a restored result's, which carries none)."""
        raise NotImplementedError

    def sampled_count(self, points: int) -> int:
        """``--crash sampled``: the runs beyond single kills a unit whose golden run passed ``points`` crash points
        gets (``--resume`` counts them)."""
        return min(SAMPLED_PAIRS, points)

    def default_workers(self) -> int | None:
        """Runs at once when the command gives no ``--workers`` (``None``: the machine's CPU count)."""
        return None


def _pack_run(run_dir: Path, driver: Driver, case: Case, pack: Pack, crash_point: str | None,
              golden: RunOutcome | None, how: Invocation | None) -> RunResult:
    """:func:`_run_one` with the run folder first (the shape :meth:`Subject.call` gives)."""
    return _run_one(driver, case, pack, run_dir, crash_point, golden, how)


@dataclass
class PackSubject(Subject):
    """A pack's cases on an adapter (the reference engine, or any engine's adapter)."""

    pack: Pack
    cases: Sequence[Case]
    driver: Driver
    how: Invocation

    kind = "pack"

    def units(self) -> list[str]:
        return [c.case_id for c in self.cases]

    def call(self, unit, crash_point, golden, repeat):
        case = next(c for c in self.cases if c.case_id == unit)
        return _pack_run, (self.driver, case, self.pack, crash_point, golden, self.how)

    def extras(self, unit, points, golden=None):
        sample = sampled_points(points)
        return ([f"{p}{crashpoints.ALONGSIDE}" for p in sample["alongside"]]
                + [f"{p}{crashpoints.THEN}{TOGETHER_WORKERS} workers" for p in sample["together"]])

    def result(self, crash, results, points, wall_s):
        adapter = self.driver.adapter
        return SweepResult(self.pack, adapter.name, adapter.version(), crash, results, points, wall_s,
                           list(self.cases), self.driver.crash_mode)

    def describe(self):
        from crashpoint.text import clip

        adapter = self.driver.adapter
        return (f"pack {self.pack.name} {self.pack.version} ({len(self.cases)} case(s)) on engine {clip(adapter.name)} "
                f"{clip(adapter.version())}")

    def store_info(self):
        from crashpoint.harness.adapters.protocol import adapter_class

        adapter = self.driver.adapter
        return {"engine": adapter.name, "engine_version": adapter.version(), "adapter": adapter_class(adapter),
                "pack": self.pack.name, "pack_version": self.pack.version}

    def selection(self, crash, only, crash_mode, points=None):
        from crashpoint.harness.run.resume import selection

        return selection(self.pack, self.cases, self.driver.adapter, crash, only, crash_mode) | (
            {"points": points} if points else {})

    def narrowed(self, units):
        return dataclasses.replace(self, cases=[c for c in self.cases if c.case_id in set(units)])

    def tags(self, unit):
        case = next((c for c in self.cases if c.case_id == unit), None)
        return list(case.tags) if case is not None else []

    def repro(self, unit, crash_point):
        case = next(c for c in self.cases if c.case_id == unit)
        return repro_command(case.path, crash_point, self.how)

    def sampled_count(self, points):
        return min(SAMPLED_PAIRS, points) + min(SAMPLED_ALONGSIDE, points) + min(SAMPLED_TOGETHER, points)


def _folder(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80]


def sweep(pack: Pack, cases: Sequence[Case], adapter: EngineAdapter, *, crash: str = "every",
          jobs: int | None = None, executor: Executor | str | None = None, workdir: Path | None = None,
          keep: bool = False, worker_timeout_s: float = 60.0, only: Sequence[str] = (),
          pairs: int | None = None, points: str | None = None, time_budget_s: float | None = None,
          on_result: Callable[[RunResult], None] | None = None,
          on_plan: Callable[[int], None] | None = None,
          skip: Collection[tuple[str, str | None]] = (), crash_mode: str = "kill",
          how: Invocation | None = None) -> SweepResult:
    """Sweep a pack's ``cases`` on ``adapter``: :func:`sweep_subject` of a :class:`PackSubject` (see there for
    every option but these).

    Args:
        pack, cases: what to run (from :func:`crashpoint.harness.load.loader.load_target`).
        adapter: the engine under test.
        worker_timeout_s: wall seconds a worker process may take (then the verdict is ``unknown``).
        crash_mode: how workers start and crash (``kill``, ``kill-cold``, ``inprocess``): see
            :class:`crashpoint.harness.run.pack_driver.Driver`.
        how: how the reproduce commands of runs that did not pass name the engine (default: the
            reference engine, ``--crash-mode`` ``crash_mode``).
    """
    driver = Driver(adapter, pack, worker_timeout_s=worker_timeout_s, crash_mode=crash_mode)
    subject = PackSubject(pack, list(cases), driver, how or Invocation(crash_mode=crash_mode))
    return sweep_subject(subject, crash=crash, jobs=jobs, executor=executor, workdir=workdir, keep=keep, only=only,
                         pairs=pairs, points=points, time_budget_s=time_budget_s, on_result=on_result,
                         on_plan=on_plan, skip=skip)


def sweep_subject(subject: Subject, *, crash: str = "every", jobs: int | None = None,
                  executor: Executor | str | None = None, workdir: Path | None = None, keep: bool = False,
                  only: Sequence[str] = (), repeat: int = 1, pairs: int | None = None,
                  points: str | None = None, time_budget_s: float | None = None,
                  on_result: Callable[[RunResult], None] | None = None,
                  on_plan: Callable[[int], None] | None = None,
                  skip: Collection[tuple[str, str | None]] = (), keep_outcomes: bool = True) -> SweepResult:
    """The one sweep loop, for packs and targets: the golden run of every unit, then (``crash="every"``) one run
    per crash point it passed, and the runs the crash selection adds.

    A unit's crash runs are submitted as soon as its golden run is done (its crash points are known then), so a
    slow golden run of one unit does not hold back the runs of the others; a pair's second kill as soon as its
    first kill's run tells what its recovery passed.

    Args:
        subject: what to run (a :class:`PackSubject`, a target's ``TargetSubject``).
        crash: ``every`` | ``none`` | ``recovery`` (``every``, then for each kill ``A`` a run per crash point
            ``B`` of the recovery from ``A`` the subject picks, killed at ``A`` and again at ``B``: ``"A >> B"``) |
            ``sampled`` (``every``, plus per unit a sample of kills during recovery and the subject's extras:
            ``crashpoint run``'s default). With ``only``, ``sampled`` is ``every``.
        points: ``classes`` (default with ``sampled``): the single kills are a sample of each crash-point class's
            instances (:meth:`Subject.point_classes`, :func:`~crashpoint.harness.run.point_classes.sample`), the
            rest of each class is left out (listed in the result's ``classes``); ``all`` (default otherwise): every
            instance. Ignored with ``only``.
        pairs: for ``recovery``, at most this many double-kill runs per unit, spread evenly over the pairs
            (default: every pair).
        time_budget_s: wall seconds the sweep may take (``None``: no limit). The golden runs always run; then runs
            start in :data:`TIERS` order (each class once, racy classes, recovery classes, kills during recovery,
            further instances, repeats), at most as many at once as the executor runs, and none once the time left
            is less than a run is expected to take (the unit's slowest golden or crash run so far, a crash run
            :data:`CRASH_RUN_FACTOR` times its golden run before one finished). What did not start is in the
            result's ``left_out``: neither a failure nor a pass.
        jobs: size of the local pool this call makes (default: the number of CPUs); ignored when ``executor`` is
            an ``Executor``.
        executor: an :class:`concurrent.futures.Executor` (left running: the caller closes it), or a spec for
            :func:`crashpoint.harness.run.executors.make_executor` (``"processes"``, ``"threads"``,
            ``"dask://HOST:PORT"``; default: the subject's), made and closed by this call. With a local pool, run
            folders go under one root here; with any other executor (Dask), each run gets a temporary folder on
            the machine that runs it, removed after the run, unless ``workdir`` is given (then the same absolute
            path is used on that machine).
        workdir: where run folders go (default: a temporary folder, removed unless ``keep``); a folder an earlier
            sweep left there is never reused (a run gets a new one); held by this sweep while it runs
            (:func:`hold_workdir`: a second sweep there raises ``UsageError``).
        only: crash point ids (or schedules) to run (default: all the golden runs passed); an id no golden run
            passed gives an ``error`` result for that unit, never a silent skip.
        repeat: runs per crash point (>= 1): a racy point's outcome can depend on thread timing.
        on_result: called with each result as it completes, in the calling thread, in order of completion.
        on_plan: called in the calling thread with the number of results planned so far (count), each time it
            changes: it grows as runs are planned, and shrinks by one for a sampled pair that no try reached (left
            out of the results, :data:`PAIR_TRIES`). The number of ``on_result`` calls never exceeds the last value
            given.
        skip: ``(unit, crash_point)`` pairs already done (``crash_point`` ``None``: the golden run), for
            ``crashpoint run --resume``: they are neither run nor returned, except that a skipped golden run
            still runs when the unit has other runs to do, as their reference (reported only when it does not
            pass now: a failing reference is a result, never dropped).
        keep_outcomes: keep every run's outcome on its result (``--save-traces`` writes them); ``False`` drops a
            passed crash run's once the sweep has what it needs of it (a big target sweep's memory).

    Returns:
        The subject's :class:`SweepResult`; ``results`` hold the golden runs in unit order, then each unit's
        crash runs in crash point order (each point's tries in order), then its double kills; ``classes`` each
        unit's crash-point classes, ``left_out`` the runs a time budget did not start.

    Raises:
        ValueError: an unknown ``crash`` or ``points`` mode, ``repeat < 1``, a ``time_budget_s`` that is not a
        positive number; ``UsageError`` for a bad executor spec or an unreachable Dask scheduler.
    """
    from crashpoint.harness.run.executors import make_executor

    if crash not in CRASH_MODES or repeat < 1 or points not in (None, *POINTS_MODES):
        raise ValueError(f"--crash must be one of {CRASH_MODES}, points one of {POINTS_MODES} and repeat >= 1, got "
                         f"{crash!r}, {points!r}, {repeat}")
    if time_budget_s is not None and not (time_budget_s > 0 and time_budget_s != float("inf")):
        raise ValueError(f"a time budget is a finite number of seconds > 0, got {time_budget_s!r}")
    began = time.perf_counter()
    closer: Callable[[], None] | None = None
    own = executor is None or isinstance(executor, str)
    if own:
        pool, closer = make_executor(executor or subject.default_executor, jobs)
    else:
        pool = executor
    mode = points or ("classes" if crash == "sampled" else "all")
    try:
        loop = _Loop(subject, pool, crash, workdir, only, repeat, pairs, on_result, on_plan, skip, keep_outcomes,
                     mode, time_budget_s)
    except BaseException:  # the workdir is another sweep's: the pool this call made goes too
        if closer is not None:
            closer()
        raise
    try:
        loop.run(own)
    finally:
        interrupted = isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit))
        if closer is not None:
            closer()
        else:
            loop.cancel()
            if interrupted:  # the caller's executor: its runs stop before their folders are removed
                from crashpoint.harness.run.executors import halt

                halt(pool)
        subject.close(own)
        loop.clean_up(keep, interrupted=interrupted)
    ran = "every" if crash == "sampled" and only else crash  # chosen points run once each: no sampled pairs
    result = subject.result(ran, loop.results(), loop.points, time.perf_counter() - began)
    result.sampled_pairs = loop.pair_cover
    result.points = "all" if only else mode
    result.classes = loop.class_data()
    result.left_out = loop.left_out + loop.pairs_left_out()
    result.time_budget_s = time_budget_s
    return result


class _Loop:
    """The state of one :func:`sweep_subject`: what is planned, running and done, per unit."""

    def __init__(self, subject: Subject, pool: Executor, crash: str, workdir: Path | None, only: Sequence[str],
                 repeat: int, pairs: int | None, on_result: Callable[[RunResult], None] | None,
                 on_plan: Callable[[int], None] | None, skip: Collection[tuple[str, str | None]],
                 keep_outcomes: bool, points: str = "all", time_budget_s: float | None = None) -> None:
        from crashpoint.harness.run.executors import capacity, is_local

        self.subject, self.pool, self.crash, self.workdir = subject, pool, crash, workdir
        self.only, self.repeat, self.pair_limit, self.skip = list(dict.fromkeys(only)), repeat, pairs, skip
        self.on_result, self.on_plan, self.keep_outcomes = on_result, on_plan, keep_outcomes
        self.points_mode = points
        self.isolated = not is_local(pool) and workdir is None
        self.root = Path(workdir).resolve() if workdir else Path(tempfile.mkdtemp(prefix="crashpoint-"))
        self.root.mkdir(parents=True, exist_ok=True)
        if workdir is None:
            (self.root / TEMPORARY_ROOT).touch()
        self.lock = hold_workdir(self.root) if workdir is not None else None  # one sweep per folder
        self.units = subject.units()
        self.planned = 0
        self.golden: dict[str, RunResult] = {}
        self.singles: dict[str, list[RunResult | None]] = {u: [] for u in self.units}
        self.doubles: dict[str, list[RunResult | None]] = {u: [] for u in self.units}
        self.points: dict[str, list[str]] = {}
        self.classes: dict[str, list[PointClass]] = {}
        #: future -> (phase, unit, crash point, repeat, index in its unit's list)
        self.pending: dict[Future, tuple[str, str, str | None, int, int]] = {}
        self.left = {u: 0 for u in self.units}  # single-kill runs of the unit still running (recovery)
        self.pair_from: dict[str, set[str]] = {}  # (sampled) single kills whose recovery gets a second kill
        #: (unit, index in its doubles) -> the sampled pair's first kill and the second kills tried, in order
        self.pairs: dict[tuple[str, int], dict[str, Any]] = {}
        #: unit -> what became of its sampled pairs (:meth:`pair_coverage`)
        self.pair_cover: dict[str, dict[str, Any]] = {}
        self.used: set[Path] = set()
        # a time budget: runs wait in a queue (tier, order) and start while the executor has room and time is left
        self.deadline = None if time_budget_s is None else time.monotonic() + time_budget_s
        self.room = capacity(pool) if time_budget_s is not None else 0
        self.queue: list[tuple[int, int, int, tuple[str, str, str, str | None, int, int]]] = []
        self.spread: dict[tuple[str, str], int] = {}  # (unit, point) -> its spread_rank within its tier
        self.order = itertools.count()  # within a tier: first queued, first started
        self.spent = False
        #: the runs a time budget did not start: {"case_id", "crash_point", "tier"}
        self.left_out: list[dict[str, Any]] = []
        self.took: dict[str, list[float]] = {}  # unit -> wall seconds of its finished crash runs

    def plan(self, more: int) -> None:
        if more and self.on_plan:
            self.planned += more
            self.on_plan(self.planned)

    def folder(self, unit: str, name: str) -> Path:
        """A new run folder (never one an earlier sweep left in ``workdir``)."""
        base = path = self.root / _folder(unit) / name
        n = 1
        while path in self.used or path.exists():
            n += 1
            path = base.with_name(f"{base.name}.{n}")
        self.used.add(path)
        return path

    def submit(self, phase: str, unit: str, name: str, point: str | None, repeat: int, index: int,
               tier: str = "golden") -> None:
        """Start a run now, or (a time budget) queue it at its :data:`TIERS` rank, and within its tier at its point's
        :func:`spread_rank` (so that a cut sweep has spread its kills over each case's run, every case alike)."""
        if self.deadline is None:
            self.start(phase, unit, name, point, repeat, index)
            return
        spread = self.spread.get((unit, point), 0)
        heapq.heappush(self.queue, (TIERS[tier], spread, next(self.order), (phase, unit, name, point, repeat, index)))

    def pump(self) -> None:
        """A time budget: start queued runs, most informative first, while the executor has room and the time left
        is at least what a run is expected to take; once it is not, the queued runs are left out."""
        while self.queue and len(self.pending) < self.room:
            tier, _, _, (phase, unit, name, point, repeat, index) = self.queue[0]
            if tier > 0 and (self.spent or time.monotonic() + self.expected(unit) > self.deadline):
                self.spent = True
                break
            heapq.heappop(self.queue)
            self.start(phase, unit, name, point, repeat, index)
        if self.spent:
            names = {v: k for k, v in TIERS.items()}
            while self.queue:
                tier, _, _, (phase, unit, name, point, repeat, index) = heapq.heappop(self.queue)
                self.left_out.append({"case_id": unit, "crash_point": point, "tier": names[tier]})
                if phase == "single":
                    self.left[unit] -= 1

    def expected(self, unit: str) -> float:
        """Wall seconds a crash run of ``unit`` is expected to take: its slowest crash run so far, else
        :data:`CRASH_RUN_FACTOR` times its golden run."""
        golden = self.golden[unit].wall_s if unit in self.golden else 0.0
        return max([golden * CRASH_RUN_FACTOR, *self.took.get(unit, [])])

    def start(self, phase: str, unit: str, name: str, point: str | None, repeat: int, index: int) -> None:
        golden = self.golden[unit].outcome if point is not None and unit in self.golden else None
        fn, args = self.subject.call(unit, point, golden, repeat)
        run_dir = self.folder(unit, name)
        if self.isolated:
            future = self.pool.submit(_isolated, fn, run_dir.relative_to(self.root), *args)
        else:
            future = self.pool.submit(fn, run_dir, *args)
        self.pending[future] = (phase, unit, point, repeat, index)

    def run(self, own: bool) -> None:
        """Submit the golden runs, then follow each finished run with what it makes possible, until none is left."""
        self.plan(sum((u, None) not in self.skip for u in self.units))
        for u in self.units:
            self.submit("golden", u, "golden", None, 1, 0)
        self.room = max(self.room, len(self.queue))  # every golden run starts at once, as without a budget
        self.pump()
        self.subject.started(self.pool, own, getattr(self.pool, "_max_workers", 0) or 0)
        while self.pending:
            for future in wait_first(list(self.pending)):
                phase, unit, point, repeat, index = self.pending.pop(future)
                result = _lost(future, unit, point)
                if result is not None:
                    if phase != "golden" and result.wall_s:
                        self.took.setdefault(unit, []).append(result.wall_s)
                    self.finished(phase, unit, point, repeat, index, result)
            if self.deadline is not None:
                from crashpoint.harness.run.executors import capacity

                self.room = capacity(self.pool)
                self.pump()

    def finished(self, phase: str, unit: str, point: str | None, repeat: int, index: int, result: RunResult) -> None:
        if phase == "double" and (unit, index) in self.pairs and self.replaced(unit, index, result):
            return  # a sampled pair whose second kill was never reached: another run takes its place
        if phase == "golden" and self.crash != "none":
            result = _needs_crash_points(result)
        again = phase == "golden" and _golden_again(self.skip, unit, result.verdict)
        if again:
            self.plan(1)
        if (phase != "golden" or (unit, None) not in self.skip or again) and phase != "probe" and self.on_result:
            self.on_result(result)  # a golden run re-run as a reference that does not pass now is a result
        if phase == "golden":
            self.golden[unit] = result
            self.crash_runs(unit, result)
        elif phase in ("single", "probe"):
            if phase == "single":
                self.singles[unit][index] = result
                self.left[unit] -= 1
            if point in self.pair_from.get(unit, ()) and repeat == 1 and result.outcome is not None \
                    and result.crash_fired:
                self.pair(unit, point, crashpoints.recovery_points(result.outcome.crash_points, point))
            if self.crash == "recovery" and self.left[unit] == 0 and phase == "single":
                self.double_runs(unit)
            elif self.crash != "recovery":
                self.drop(result)
        else:
            self.doubles[unit][index] = result
            self.drop(result)

    def drop(self, result: RunResult) -> None:
        """A passed crash run's outcome, unless the caller keeps every outcome (a big sweep's memory)."""
        if result.verdict == "passed" and not self.keep_outcomes:
            result.outcome = None

    def chosen(self, unit: str, golden: RunResult) -> tuple[list[str], dict[str, str]]:
        """The single kills of ``unit`` in golden-run order, and each one's tier: with ``points="classes"`` the sample
        of each class, else every point (with ``only``: those); each one's :func:`spread_rank` within its tier."""
        if self.only:
            return self.only, {}
        found = point_classes.sample(self.subject.point_classes(unit, self.points[unit], golden.outcome))
        self.classes[unit] = found
        tiers = {p: why for p, why in point_classes.plan_order(found)}
        if self.points_mode == "classes":
            wanted = [p for p in self.points[unit] if p in tiers]
        else:
            for c in found:
                c.every = True
            wanted, tiers = self.points[unit], {p: tiers.get(p, "instance") for p in self.points[unit]}
        for tier in set(tiers.values()):
            mine = [p for p in wanted if tiers[p] == tier]
            self.spread.update({(unit, p): r for p, r in zip(mine, spread_rank(len(mine)))})
        return wanted, tiers

    def crash_runs(self, unit: str, golden: RunResult) -> None:
        """The runs a unit's golden run makes possible: a kill at each chosen crash point (:meth:`chosen`, each
        ``repeat`` times), and with ``sampled`` the pairs' first kills' second kills and the subject's extras."""
        self.points[unit] = self.subject.sweepable(unit, golden.outcome.crash_points) if golden.outcome else []
        if self.crash == "none" or golden.outcome is None:
            return
        wanted, tiers = self.chosen(unit, golden)
        todo = [(n, p, k) for n, p in enumerate(wanted) for k in range(1, self.repeat + 1)
                if (unit, p) not in self.skip]
        self.plan(len(todo))
        for n, point, k in todo:
            self.singles[unit].append(None)
            self.submit("single", unit, f"{n:03d}-{_folder(point)}" + (f"-try{k}" if self.repeat > 1 else ""), point,
                        k, len(self.singles[unit]) - 1, "repeat" if k > 1 else tiers.get(point, "class"))
        self.left[unit] = len(todo)
        if self.crash == "sampled" and not self.only:
            self.pair_from[unit] = set(self.subject.pair_points(unit, wanted))
            for point in sorted(self.pair_from[unit]):  # resumed: a stored single kill runs again for its pair
                if (unit, point) in self.skip and not _pair_stored(self.skip, unit, point):
                    self.submit("probe", unit, f"p-{_folder(point)}", point, 1, 0, "pairs")
            self.extra(self.subject.extras(unit, wanted, golden.outcome), unit)
        if self.crash == "recovery" and not todo:
            self.double_runs(unit)
        self.pump()

    def extra(self, specs: list[str], unit: str) -> None:
        """Submit the runs of crash specs beyond single kills (sampled extras and pairs), as double runs."""
        specs = [p for p in specs if (unit, p) not in self.skip]
        self.plan(len(specs))
        for spec in specs:
            self.doubles[unit].append(None)
            n = len(self.doubles[unit]) - 1
            self.submit("double", unit, f"r{n:04d}", spec, 1, n, "pairs")

    def pair(self, unit: str, first: str, recovery: list[str]) -> None:
        """``sampled``: the recovery pair of the single kill at ``first`` (whose recovery passed ``recovery``): a run
        killed at ``first``, then at the second point the subject picks in that recovery."""
        second = self.subject.second(unit, first, recovery)[:1]
        if not second or (unit, f"{first}{crashpoints.THEN}{second[0]}") in self.skip:
            return
        self.extra([f"{first}{crashpoints.THEN}{second[0]}"], unit)
        self.pairs[(unit, len(self.doubles[unit]) - 1)] = {"first": first, "tried": [second[0]], "recovery": recovery}
        self.pair_cover.setdefault(unit, {"sampled": 0, "reached": 0, "replaced": [], "not_reached": []})
        self.pair_cover[unit]["sampled"] += 1

    def replaced(self, unit: str, index: int, result: RunResult) -> bool:
        """Whether the sampled pair at ``index`` of ``unit``'s doubles is run again instead of reported: its run
        reached no second kill (:func:`~crashpoint.harness.judge.verdict.only_unreached`: nothing else went
        wrong, no rule found anything), so it tested only what the single kill at its first point tests, and the
        point was crashpoint's choice, not the user's. The next try is killed at the subject's pick among the
        points this run's own recovery passed that no try has used (else the same pair again), at most
        :data:`PAIR_TRIES` runs in all; a pair no try reached is left out of the results (the plan shrinks by one)
        and named in the sweep's ``sampled_pairs``, as each replacement is."""
        from crashpoint.harness.judge.verdict import only_unreached

        pair, cover = self.pairs[(unit, index)], self.pair_cover[unit]
        first, tried = pair["first"], pair["tried"]
        spec = f"{first}{crashpoints.THEN}{tried[-1]}"
        if not only_unreached(result):
            cover["reached"] += 1
            if len(tried) > 1:
                cover["replaced"].append({"pair": f"{first}{crashpoints.THEN}{tried[0]}", "by": spec,
                                          "tries": len(tried)})
            return False
        if len(tried) >= PAIR_TRIES:
            cover["not_reached"].append({"first": first, "tried": list(tried)})
            self.plan(-1)
            return True
        fired = [k.get("crash_point") for k in result.kill_log][:1] == [first]
        own = crashpoints.recovery_points(result.outcome.crash_points, first) if fired and result.outcome else []
        fresh = [p for p in own if p not in tried]  # the first kill did not fire: the same pair again
        second = (self.subject.second(unit, first, fresh) if fresh else [])[:1] or tried[-1:]
        tried.append(second[0])
        self.submit("double", unit, f"r{index:04d}", f"{first}{crashpoints.THEN}{second[0]}", 1, index, "pairs")
        return True

    def double_runs(self, unit: str) -> None:
        """``recovery``: once every single kill of ``unit`` is done, a second kill in each recovery (``pairs``)."""
        mine = [r for r in self.singles[unit] if r is not None and r.repeat == 1]
        pairs = [f"{r.crash_point}{crashpoints.THEN}{b}" for r in mine if r.outcome is not None and r.crash_fired
                 for b in self.subject.recovery_seconds(
                     unit, r.crash_point, crashpoints.recovery_points(r.outcome.crash_points, r.crash_point))]
        if self.pair_limit is not None and len(pairs) > self.pair_limit:
            step = len(pairs) / self.pair_limit
            pairs = [pairs[int(i * step)] for i in range(self.pair_limit)]
        self.extra(pairs, unit)
        for r in mine:  # what the pairs needed of the single kills' outcomes is taken
            self.drop(r)

    def pairs_left_out(self) -> list[dict[str, Any]]:
        """The sampled pairs a time budget cut before they were planned: their first kill did not run, so the second
        kill's point was never chosen (``{"case_id", "crash_point": FIRST, "tier": "pairs", "second_kill":
        "during the recovery (not chosen)"}``)."""
        cut = {(r["case_id"], r["crash_point"]) for r in self.left_out if r["tier"] != "pairs"}
        return [{"case_id": u, "crash_point": p, "tier": "pairs", "second_kill": "during the recovery (not chosen)"}
                for u in self.units for p in sorted(self.pair_from.get(u, ())) if (u, p) in cut]

    def class_data(self) -> dict[str, list[dict[str, Any]]]:
        """unit -> its crash-point classes as JSON (:meth:`PointClass.to_dict`), the instances a time budget cut
        named."""
        cut: dict[str, set[str]] = {}
        for r in self.left_out:
            if r["crash_point"] is not None:
                cut.setdefault(r["case_id"], set()).add(r["crash_point"])
        return {u: [c.to_dict(cut.get(u, ())) for c in found] for u, found in self.classes.items()}

    def cancel(self) -> None:
        for future in self.pending:
            future.cancel()

    def clean_up(self, keep: bool, interrupted: bool) -> None:
        """An interrupted sweep's workers (and what they started) die with it; its forked workers, which carry no
        marker that /proc shows, are found by the files they hold in its folder: only in a folder the sweep made
        itself (a user's --workdir may be the cwd of their shell or hold their editor's files: never theirs)."""
        reap_under(self.root, wait_s=5.0, holders=interrupted and self.workdir is None)
        if not keep and self.workdir is None:
            shutil.rmtree(self.root, ignore_errors=True)
        if self.lock is not None:
            import os

            os.close(self.lock)  # the folder is free for another sweep
            self.lock = None

    def results(self) -> list[RunResult]:
        """Every result: golden runs in unit order, then each unit's single kills, then its double kills."""
        out = [self.golden[u] for u in self.units if u in self.golden
               and ((u, None) not in self.skip or _golden_again(self.skip, u, self.golden[u].verdict))]
        out += [r for u in self.units for r in self.singles[u] if r is not None]
        return out + [r for u in self.units for r in self.doubles[u] if r is not None]


if __name__ == "__main__":  # the cleaner started by abandon()
    import json
    import sys

    if sys.argv[1:2] == ["--clean-after"]:
        _clean_after(int(sys.argv[2]), json.loads(sys.argv[3]))
