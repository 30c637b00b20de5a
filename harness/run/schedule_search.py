"""Generated fault schedules: hypothesis draws schedules for a case, runs them, and shrinks a failure.

For each case, a golden run tells the generator what exists: the crash points the run
passes, the tools the workflow uses, the external events. :func:`faults` draws faults over
those (see :mod:`crashpoint.harness.load.schedule` for the kinds), :func:`search_case` runs
schedules of up to ``max_faults`` faults with real worker processes and real SIGKILLs until
one fails an oracle, and hypothesis' shrinker (``hypothesis.find``) reduces it to a minimal
failing schedule, which :func:`write_repro` writes out as a case file that fails on its own.

Searches are reproducible: the same seed, budget, case and engine draw the same schedules
(``hypothesis.find`` with a seeded ``random.Random`` and no example database). The approach
is property-based testing with integrated shrinking (MacIver et al., "Hypothesis: A new
approach to property-based testing", JOSS 2019) applied to fault schedules, as Jepsen's
generators and FoundationDB's simulation do for distributed systems.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import secrets
import shutil
import threading
import time
import zlib
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml
from hypothesis import HealthCheck, Phase, Verbosity, find, settings
from hypothesis import strategies as st
from hypothesis.errors import NoSuchExample

from crashpoint.errors import EngineCrashed, UsageError, WorkerTimeout
from crashpoint.harness.adapters.protocol import EngineAdapter
from crashpoint.harness.run.pack_driver import Driver, RunOutcome
from crashpoint.harness.run.executors import result_of
from crashpoint.harness.process.launch import reaping
from crashpoint.harness.load.loader import Case, Pack
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.results import unit_id
from crashpoint.harness.model.rules import Finding
from crashpoint.harness.judge.verdict import Invocation, RunResult, is_vacuous, repro_command, unsupported
from crashpoint.harness.judge.verdict import judge as judge_run
from crashpoint.harness.faults import kinds as registry
from crashpoint.harness.faults.kinds import Space
from crashpoint.harness.load.schedule import Fault, _split, apply, case_data, describe, is_masked, schedule_id

#: Runs allowed for shrinking after the first failure, per case (hypothesis stops earlier when it can).
MAX_SHRINK_RUNS = 200
#: Runs of the shrunk schedule after it failed once, to tell a repro that fails every time from one that depends on
#: timing (a kill at a racy point): :func:`_confirm`.
CONFIRM_RUNS = 2
SEED_FILE = "last-seed"
#: Folders one shrunk schedule's repro may take (``CASE_gen_ID``, then ``_2`` ...): copies with other contents.
MAX_REPRO_COPIES = 100


def faults(case: Case, pack: Pack, golden: RunOutcome, kinds: Sequence[str] | None = None) -> st.SearchStrategy:
    """A hypothesis strategy of single faults for ``case``, over what its golden run passed.

    ``kinds`` restricts the fault kinds (default: every registered kind of
    :mod:`crashpoint.harness.faults.kinds` that has a generator). Each kind draws over a
    :class:`~crashpoint.harness.faults.kinds.Space`: kill and hold points are the golden run's crash
    points; tool faults hit the calls the golden run made (tool and call number).

    Raises:
        ValueError: the golden run passed no crash point (nothing to place a fault at), or an unknown kind.
    """
    points = list(golden.crash_points)
    if not points:
        raise ValueError(f"{case.case_id}: the golden run passed no crash point")
    called: dict[str, int] = {}
    for c in golden.calls:
        called[c["tool"]] = called.get(c["tool"], 0) + 1
    space = Space(points, called, sorted(pack.tools(case.workflow)), len(_split(case)[1]))
    choices = {k.name: k.strategy(space) for k in registry.all_kinds()}
    choices = {name: strategy for name, strategy in choices.items() if strategy is not None}
    wanted = list(kinds) if kinds else list(choices)
    unknown = [k for k in wanted if k not in choices]
    if unknown:
        raise ValueError(f"unknown fault kind(s) {unknown}; known: {', '.join(choices)}")
    return st.one_of([choices[k] for k in wanted])


@dataclass
class Trial:
    """One schedule run: the schedule, the case it made, and the verdict.

    ``verdict`` is ``result.verdict`` (``passed``, ``failed``: a rule finding, ``error``: the engine
    broke, ``unknown``: a worker hung or a rule could not decide), or ``vacuous`` where that is an
    ``error`` only because nothing was tested (a fault never fired, or no tool was called; see
    :func:`crashpoint.harness.judge.verdict.is_vacuous`), which is not a failure. ``result``: the
    run's record from :func:`crashpoint.harness.judge.verdict.judge`.
    """

    schedule: list[Fault]
    case: Case
    verdict: str
    failures: list[Finding] = field(default_factory=list)
    error: str | None = None
    missed: list[str] = field(default_factory=list)
    result: RunResult | None = None

    @property
    def failing(self) -> bool:
        """``True`` for failed, error and unknown: what the search looks for."""
        return self.verdict in ("failed", "error", "unknown")


@dataclass
class SearchResult:
    """What one case's search found.

    Attributes:
        case_id, seed: the case and the seed of its search.
        budget: schedules the search could generate (count); ``generated`` how many it ran before
            it found a failure or ran out; ``runs`` every schedule run, shrinking included.
        found: the shrunk failing trial, or ``None``.
        first: the first failing schedule, before shrinking.
        schedules: the generated schedules in order (what ``--chaos-seed`` reproduces).
        vacuous: generated schedules with a fault that never fired (count).
        repro: the repro case file written for ``found`` (set by :func:`write_repro`).
        reproduced: ``(failed, runs)`` of ``found``'s schedule: the run that found it and :data:`CONFIRM_RUNS` more
            (:func:`_confirm`); fewer failures than runs say the repro depends on timing.
        wall_s: wall seconds of the search.
    """

    case_id: str
    seed: int
    budget: int
    generated: int = 0
    runs: int = 0
    found: Trial | None = None
    first: list[Fault] | None = None
    schedules: list[list[Fault]] = field(default_factory=list)
    vacuous: int = 0
    repro: Path | None = None
    golden_error: str | None = None
    reproduced: tuple[int, int] | None = None
    wall_s: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        found = self.found
        return {"case_id": self.case_id, "seed": self.seed, "budget": self.budget, "generated": self.generated,
                "runs": self.runs, "vacuous": self.vacuous, "golden_error": self.golden_error,
                "found": None if found is None else {
                    "schedule": found.schedule, "faults": len(found.schedule), "verdict": found.verdict,
                    "failures": [f.to_dict() for f in found.failures], "error": found.error,
                    "first_schedule": self.first,
                    "reproduced": list(self.reproduced) if self.reproduced else None},
                "repro": str(self.repro) if self.repro else None, "wall_s": round(self.wall_s, 3)}


def case_seed(seed: int, case_id: str) -> int:
    """The seed of one case's search within a search seeded with ``seed``."""
    return (seed ^ zlib.crc32(case_id.encode())) & 0xFFFFFFFF


def trial(driver: Driver, case: Case, pack: Pack, schedule: list[Fault], run_dir: Path,
          golden: RunOutcome, how: Invocation | None = None) -> Trial:
    """Run ``case`` with ``schedule`` applied in ``run_dir`` and judge it with
    :func:`crashpoint.harness.judge.verdict.judge`, as ``crashpoint run`` judges the case file the
    schedule makes.

    Masked schedules (kills, duplicate deliveries) must end like ``golden`` (the base case's run: the
    fault-free run that the ``like_fault_free`` of the case file :func:`apply` makes stands for);
    every run must satisfy the side-effect and trace invariants. A schedule that tested nothing (its
    faults never fired, or no tool was called) and found nothing is ``vacuous``.
    """
    derived = apply(case, pack, schedule)
    lacks = unsupported(driver.adapter, derived, pack)
    if lacks is not None:
        return Trial(schedule, derived, lacks.verdict, error=lacks.error, result=lacks)
    began = time.perf_counter()
    try:
        out: RunOutcome | BaseException = driver.run(derived, run_dir)
    except Exception as exc:  # judged: a hang is unknown, anything else an error
        out = exc
    masked = is_masked(schedule, case, pack)
    result = judge_run(derived, pack, out, golden=golden, masked=masked, how=how, began=began)
    verdict = "vacuous" if is_vacuous(result) else result.verdict
    missed = out.faults_missed if isinstance(out, RunOutcome) else []
    return Trial(schedule, derived, verdict, result.failures, result.error, missed=missed, result=result)


def search_case(case: Case, pack: Pack, adapter: EngineAdapter, *, seed: int, budget: int, workdir: Path,
                max_faults: int = 4, kinds: Sequence[str] | None = None, worker_timeout_s: float = 60.0,
                keep: bool = False, golden: RunOutcome | None = None,
                stop: threading.Event | None = None) -> SearchResult:
    """Generate up to ``budget`` schedules of 1..``max_faults`` faults for ``case``; shrink the first failure.

    Args:
        seed: the case's seed (see :func:`case_seed`); the same seed draws the same schedules.
        workdir: a folder for run folders (each removed after its run unless ``keep``).
        golden: the case's fault-free run, when the caller already has it.
        stop: once set (the caller was interrupted), no further schedule runs: the search ends at once.

    Raises:
        ValueError: ``budget`` < 1 or ``max_faults`` < 1, or an unknown fault kind.
    """
    if budget < 1 or max_faults < 1:
        raise ValueError(f"budget and max_faults must be at least 1, got {budget} and {max_faults}")
    began = time.perf_counter()
    result = SearchResult(case.case_id, seed, budget)
    workdir.mkdir(parents=True, exist_ok=True)
    driver = Driver(adapter, pack, worker_timeout_s=worker_timeout_s)
    if golden is None:
        try:
            golden = driver.run(case, workdir / "golden")
        except (EngineCrashed, WorkerTimeout) as exc:
            result.golden_error = f"{type(exc).__name__}: {exc}"
            result.wall_s = time.perf_counter() - began
            return result
    strategy = st.lists(faults(case, pack, golden, kinds), min_size=1, max_size=max_faults)
    _find(result, strategy, lambda schedule, run_dir: trial(driver, case, pack, schedule, run_dir, golden),
          workdir, keep, stop)
    result.wall_s = time.perf_counter() - began
    return result


def _find(result: SearchResult, strategy: st.SearchStrategy, run: Callable[[list[Fault], Path], Trial],
          workdir: Path, keep: bool, stop: threading.Event | None) -> None:
    """Draw up to ``result.budget`` schedules from ``strategy`` (seeded by ``result.seed``), run each with ``run``
    (schedule, its run folder) until one fails, then shrink it (at most :data:`MAX_SHRINK_RUNS` more runs);
    ``result`` gets the counts, the schedules, the first failure and the shrunk one (``found``). The loop packs and
    targets share: only ``run`` differs."""
    seen: dict[str, Trial] = {}
    state = {"failing": False, "shrink_runs": 0}

    def condition(schedule: list[Fault]) -> bool:
        if stop is not None and stop.is_set():
            return False  # interrupted: the remaining examples cost no run
        key = json.dumps(schedule, sort_keys=True)
        if key in seen:
            return seen[key].failing
        if state["failing"]:
            if state["shrink_runs"] >= MAX_SHRINK_RUNS:
                return False
            state["shrink_runs"] += 1
        else:
            result.generated += 1
            result.schedules.append(schedule)
        run_dir = workdir / f"s{result.runs:05d}"
        result.runs += 1
        outcome = run(schedule, run_dir)
        if not keep:
            shutil.rmtree(run_dir, ignore_errors=True)
        seen[key] = outcome
        result.vacuous += outcome.verdict == "vacuous"
        if outcome.failing and not state["failing"]:
            state["failing"] = True
            result.first = schedule
        return outcome.failing

    config = settings(max_examples=result.budget, database=None, deadline=None,
                      phases=(Phase.generate, Phase.shrink), suppress_health_check=list(HealthCheck),
                      verbosity=Verbosity.quiet)
    try:
        shrunk = find(strategy, condition, settings=config, random=random.Random(result.seed))
        result.found = seen[json.dumps(shrunk, sort_keys=True)]
    except NoSuchExample:
        return
    _confirm(result, [shrunk] + ([result.first] if result.first and result.first != shrunk else []),
             run, workdir, keep, stop, seen)


def _confirm(result: SearchResult, candidates: list[list[Fault]], run: Callable[[list[Fault], Path], Trial],
             workdir: Path, keep: bool, stop: threading.Event | None, seen: dict[str, Trial]) -> None:
    """Run the shrunk schedule :data:`CONFIRM_RUNS` more times: a kill at a point whose outcome depends on thread
    timing may fail once and pass alone (a shrunk repro that did not fail when run, seen on a LangGraph target's
    search, 1 of 3). When it does not fail every time, the first failing schedule (the next of ``candidates``) is
    tried the same way; ``found`` becomes the first that failed every run, else the one that failed most often, and
    ``reproduced`` its ``(failed, runs)``."""
    best: tuple[int, int, list[Fault]] | None = None
    for schedule in candidates:
        failed, runs = 1, 1  # the run that found it
        for _ in range(CONFIRM_RUNS):
            if stop is not None and stop.is_set():
                break
            run_dir = workdir / f"c{result.runs:05d}"
            result.runs += 1
            trial = run(schedule, run_dir)
            if not keep:
                shutil.rmtree(run_dir, ignore_errors=True)
            failed, runs = failed + trial.failing, runs + 1
        if best is None or failed * best[1] > best[0] * runs:
            best = (failed, runs, schedule)
        if failed == runs:
            break
    assert best is not None
    result.found, result.reproduced = seen[json.dumps(best[2], sort_keys=True)], (best[0], best[1])


def search(pack: Pack, cases: Sequence[Case], adapter: EngineAdapter, *, seed: int, budget: int, workdir: Path,
           max_faults: int = 4, kinds: Sequence[str] | None = None, worker_timeout_s: float = 60.0,
           jobs: int | None = None, executor: Executor | None = None, keep: bool = False,
           on_result: Callable[[SearchResult], None] | None = None) -> list[SearchResult]:
    """:func:`search_case` for every case (``budget`` schedules each), in parallel on ``executor``
    (default: a thread pool of ``jobs`` threads; each search waits on its own worker processes).

    Returns the results in case order.
    """
    own = executor is None
    pool = executor or ThreadPoolExecutor(max_workers=jobs or os.cpu_count() or 2)
    stop = threading.Event()
    try:
        futures = [pool.submit(search_case, c, pack, adapter, seed=case_seed(seed, c.case_id), budget=budget,
                               workdir=workdir / c.case_id, max_faults=max_faults, kinds=kinds,
                               worker_timeout_s=worker_timeout_s, keep=keep,
                               stop=stop if isinstance(pool, ThreadPoolExecutor) else None)  # a pool process is killed
                   for c in cases]
        results = []
        for f in futures:
            results.append(result_of(f))
            if on_result:
                on_result(results[-1])
        return results
    except BaseException:  # Ctrl-C, SIGTERM: the searches stop at their next schedule and their running workers
        stop.set()          # die, so that the pool's threads end at once (its close waits for them)
        if own:
            with reaping(workdir):
                pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        if own:
            pool.shutdown(wait=True, cancel_futures=True)


def write_repro(result: SearchResult, pack: Pack, out_dir: Path) -> Path:
    """Write the shrunk failure of ``result`` as a self-contained pack folder with one case.

    The folder ``out_dir/CASE_gen_ID/`` gets a copy of ``pack.yaml`` and the pack's workflow
    files, and the case file in the pack's cases folder; the case names the seed and the
    schedule in its description. Returns the case file's path (also set on ``result.repro``).
    A folder that already holds exactly these files (the same search run again, ``--chaos-seed``) is
    reused as it is; one with other contents (the same schedule found from another seed, or a repro
    edited by hand) is left alone, and the repro goes to ``CASE_gen_ID_2/`` (``_3``, ...) instead.

    Raises:
        ValueError: ``result`` found nothing.
        UsageError: :data:`MAX_REPRO_COPIES` folders of that name already exist with other contents.
    """
    if result.found is None:
        raise ValueError(f"{result.case_id}: the search found no failure to write")
    case = dataclasses.replace(result.found.case, case_id=f"{result.case_id}_gen_{schedule_id(result.found.schedule)}")
    root = Path(out_dir) / case.case_id
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    shutil.copy2(pack.root / "pack.yaml", staging / "pack.yaml")
    for wf_file in dict.fromkeys(pack.workflow_files.values()):
        target = staging / Path(wf_file).resolve().relative_to(pack.root.resolve())
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(wf_file, target)
    cases_dir = staging / pack.cases_dir.resolve().relative_to(pack.root.resolve())
    cases_dir.mkdir(parents=True, exist_ok=True)
    note = (f"Generated by crashpoint search (seed {result.seed}, case {result.case_id}): the shrunk schedule "
            f"of {len(result.found.schedule)} fault(s) that fails: "
            + "; ".join(f"[{f.rule}] {f.message}" for f in result.found.failures[:3])
            + (f" {result.found.error}" if result.found.error else ""))
    data = case_data(case, schedule=result.found.schedule, note=note)
    (cases_dir / f"{case.case_id}.yaml").write_text(yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
    for n in range(1, MAX_REPRO_COPIES + 1):  # a folder that holds other contents is never overwritten
        candidate = root if n == 1 else root.with_name(f"{root.name}_{n}")
        if not candidate.exists():
            staging.rename(candidate)
            break
        if _same_tree(staging, candidate):
            shutil.rmtree(staging, ignore_errors=True)
            break
    else:
        shutil.rmtree(staging, ignore_errors=True)
        raise UsageError(f"{root}: it and {MAX_REPRO_COPIES - 1} numbered copies already exist with other contents; "
                         "a repro is never overwritten (move them away to write this one)")
    root = candidate
    result.repro = root / cases_dir.relative_to(staging) / f"{case.case_id}.yaml"
    return result.repro


def _same_tree(a: Path, b: Path) -> bool:
    """``True`` when folders ``a`` and ``b`` hold the same files (relative paths) with the same bytes."""
    def files(root: Path) -> dict[str, bytes]:
        return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}
    try:
        return files(a) == files(b)
    except OSError:
        return False


def resolve_seed(raw: str | int | None, state_dir: Path) -> int:
    """The search seed: an integer as given, ``last`` (the seed of the previous search, kept in
    ``state_dir/last-seed``), or a fresh random seed when ``raw`` is ``None``. The seed used is
    written back to ``state_dir/last-seed``.

    Raises:
        UsageError: ``last`` with no previous seed, or a value that is neither an integer nor ``last``.
    """
    path = Path(state_dir) / SEED_FILE
    previous = None
    if raw == "last" and path.is_file():
        text = path.read_text().strip()
        if not text.isdigit():
            raise UsageError(f"{path}: line 1: not a seed: {text[:40]!r}")
        previous = int(text)
    seed = choose_seed(raw, previous, str(path))
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(f"{seed}\n")
    tmp.replace(path)
    return seed


def choose_seed(raw: str | int | None, previous: int | None, where: str) -> int:
    """A seed from a ``--chaos-seed`` value: an integer in 0..2**32-1, ``last`` (``previous``, kept in
    ``where``), or a fresh random one for ``None``.

    Raises:
        UsageError: ``last`` with no ``previous``, not an integer, or out of range.
    """
    if raw == "last":
        if previous is None:
            raise UsageError(f"--chaos-seed last: no previous seed in {where}")
        return previous
    if raw is None:
        return secrets.randbelow(2**32)
    try:
        seed = int(raw)
    except ValueError:
        raise UsageError(f"--chaos-seed: expected an integer or 'last', got {raw!r}") from None
    if not 0 <= seed < 2**32:
        raise UsageError(f"--chaos-seed: {seed} is outside 0..4294967295")
    return seed


def summary_lines(result: SearchResult) -> list[str]:
    """Human lines for one case's search result."""
    head = (f"{result.case_id}: {result.generated} schedule(s) generated, {result.runs} run(s), "
            f"{result.vacuous} vacuous, seed {result.seed}, {result.wall_s:.1f} s")
    if result.golden_error:
        return [head, f"    the golden run broke: {result.golden_error}"]
    if result.found is None:
        return [head + ": no failure"]
    lines = [head + f": FAILS with {len(result.found.schedule)} fault(s) after shrinking "
                    f"(first failing schedule had {len(result.first or [])})"]
    if result.reproduced:
        failed, runs = result.reproduced
        lines.append(f"    failed {failed} of {runs} runs of this schedule" + (
            "" if failed == runs else ": its outcome depends on timing (a racy point), so its repro may pass "
                                      "when run once"))
    lines += [f"    - {describe(f)}" for f in result.found.schedule]
    lines += [f"    [{f.rule}] {f.message}" for f in result.found.failures[:4]]
    if result.found.error:
        lines.append(f"    {result.found.verdict}: {result.found.error}")
    return lines


# ------------------------------------------------------------------ a target's search (the team's own code)

#: Kinds a target's case holds once at most (a second fault of the kind in a schedule is dropped: it adds nothing,
#: and :class:`~crashpoint.harness.load.target.TargetCase` refuses two ``workers`` or ``deploy`` faults).
ONCE_PER_CASE = ("workers", "deploy", "server_crash")


def target_space(target: Target, golden: TargetOutcome) -> Space:
    """The :class:`~crashpoint.harness.faults.kinds.Space` a target's schedules draw over, from its golden run: the
    crash points it passed (kills; sorted, so that a seed draws the same points however thread timing ordered them), the effect calls it made (tool faults: ``{effect: calls}``), the requests it
    delivered (``start``; ``answer`` when it answered a human), the engine's capabilities, the target's code versions
    (deploys) and whether a workflow waited at rest (a deploy or a server crash happens only then)."""
    from crashpoint.harness.engines.base import engine_for

    engine = engine_for(target.engine)
    calls: dict[str, int] = {}
    for c in golden.calls:
        calls[c.effect] = calls.get(c.effect, 0) + 1
    answered = any(d.get("kind") in ("answer", "late_answer") for d in golden.deliveries)
    waited = answered or any(t.get("status") == "waiting" for t in (golden.threads or {}).values())
    # sorted: a seed draws the same points whatever order thread timing gave the golden run's log
    return Space(sorted(set(golden.crash_points)), calls, sorted(calls), 1, subject="target",
                 capabilities=engine.capabilities(), requests=("start", *(("answer",) if answered else ())),
                 versions=tuple(engine.versions(target)[1]), waits=waited)


def target_faults(target: Target, golden: TargetOutcome, kinds: Sequence[str] | None = None) -> st.SearchStrategy:
    """A hypothesis strategy of single faults for a target's case (:func:`target_space` of its golden run): the kinds
    a target's case holds whose engine capabilities its engine has (:func:`~crashpoint.harness.faults.kinds.
    strategies`), or only ``kinds``.

    Raises:
        ValueError: the golden run passed no crash point, or a kind in ``kinds`` draws nothing here.
    """
    if not golden.crash_points:
        raise ValueError(f"{golden.case}: the golden run passed no crash point")
    choices = registry.strategies(target_space(target, golden))
    wanted = list(kinds) if kinds else list(choices)
    unknown = [k for k in wanted if k not in choices]
    if unknown:
        raise ValueError(f"fault kind(s) {unknown} draw nothing on this target's case (its engine, versions or golden "
                         f"run); these do: {', '.join(choices)}")
    return st.one_of([choices[k] for k in wanted])


def in_golden_order(schedule: Sequence[Fault], points: Sequence[str]) -> list[Fault]:
    """``schedule`` with its kills in the order the golden run passed their points (``points``), a second kill at a
    point already killed at dropped; the other faults stay where they are. Kills fire one after the other, each
    during the recovery from the one before, so a kill at a point the golden run passed earlier than the one
    before it seldom fires: drawn in any order, 20 of 25 schedules of a LangGraph target's search were vacuous."""
    order = {p: n for n, p in enumerate(points)}
    kills, seen = [], set()
    for fault in schedule:
        if fault["kind"] == "kill" and fault["at"] not in seen:
            seen.add(fault["at"])
            kills.append(fault)
    kills.sort(key=lambda f: order.get(f["at"], len(order)))
    placed = iter(kills)
    out = []
    for fault in schedule:
        if fault["kind"] != "kill":
            out.append(fault)
        elif fault["at"] in seen:
            seen.discard(fault["at"])
            out.append(next(placed))
    return out


def target_case(case: TargetCase, schedule: Sequence[Fault]) -> TargetCase:
    """``case`` with ``schedule``'s faults after its own (a fault of :data:`ONCE_PER_CASE` the case already holds
    dropped), and ``like_fault_free`` when every fault of the schedule is one a correct target masks
    (:meth:`~crashpoint.harness.faults.kinds.FaultKind.masked_on_target`) and the case has no fault of its own (its
    fault-free run is then the reference a repro file's run makes again)."""
    faults = list(case.faults)
    for fault in schedule:
        if fault["kind"] in ONCE_PER_CASE and any(f["kind"] == fault["kind"] for f in faults):
            continue
        faults.append(dict(fault))
    masked = all(registry.get(f["kind"]).masked_on_target(registry.normalize(f)) for f in schedule)
    return case.with_faults(faults, name=f"{case.name}_gen_{schedule_id(schedule)}",
                            like_fault_free=case.like_fault_free or (masked and not case.faults))


def target_trial(target: Target, case: TargetCase, durability: str, schedule: list[Fault], run_dir: Path,
                 golden: TargetOutcome, run_options: dict[str, Any] | None = None) -> Trial:
    """Run ``case`` of ``target`` with ``schedule`` (:func:`target_case`) once in ``run_dir`` (its golden run: the
    kills are the schedule's) and judge it as ``crashpoint run`` judges the repro file it makes: a schedule a correct
    target masks must end as ``golden`` (the case's run without the schedule) ends. A schedule whose faults never
    fired (a kill at a point this run did not pass, a deploy with no workflow waiting) is ``vacuous``."""
    from crashpoint.harness.run.target_sweep import run_one

    derived = target_case(case, schedule)
    masked = all(registry.get(f["kind"]).masked_on_target(registry.normalize(f)) for f in schedule)
    result = run_one(dataclasses.replace(target, cases=[derived]), derived, durability, run_dir, None,
                     golden if masked else None, **(run_options or {}))
    verdict = "vacuous" if is_vacuous(result) else str(result.verdict)
    out = result.outcome
    return Trial(schedule, derived, verdict, result.failures, result.error,
                 missed=list(out.faults_missed) if out is not None else [], result=result)


def search_target_case(target: Target, case: TargetCase, durability: str, *, seed: int, budget: int, workdir: Path,
                       max_faults: int = 3, kinds: Sequence[str] | None = None, keep: bool = False,
                       run_options: dict[str, Any] | None = None, stop: threading.Event | None = None) -> SearchResult:
    """:func:`search_case` for one case of a target in one durability mode (its unit ``CASE[MODE]``): its golden
    run (judged: one that does not pass is ``golden_error``, nothing searched), then up to ``budget`` generated
    schedules of 1..``max_faults`` faults (:func:`target_faults`), each a :func:`target_trial`, the first failure
    shrunk by the loop packs use. ``run_options``: :func:`~crashpoint.harness.run.target_sweep.run_one`'s
    (``warm``, ``server``, ...).

    Raises:
        ValueError: ``budget`` < 1 or ``max_faults`` < 1, or a kind in ``kinds`` that draws nothing here.
    """
    from crashpoint.harness.run.target_sweep import run_one

    if budget < 1 or max_faults < 1:
        raise ValueError(f"budget and max_faults must be at least 1, got {budget} and {max_faults}")
    began = time.perf_counter()
    result = SearchResult(unit_id(case.name, durability), seed, budget)
    workdir.mkdir(parents=True, exist_ok=True)
    first = run_one(target, case, durability, workdir / "golden", None, None, **(run_options or {}))
    if first.verdict != "passed" or first.outcome is None:
        why = first.error or "; ".join(f"[{f.rule}] {f.message}" for f in first.failures[:3])
        result.golden_error = f"{first.verdict}: {why}"
        result.wall_s = time.perf_counter() - began
        return result
    golden: TargetOutcome = first.outcome
    strategy = st.lists(target_faults(target, golden, kinds), min_size=1, max_size=max_faults).map(
        lambda schedule: in_golden_order(schedule, golden.crash_points))
    _find(result, strategy, lambda schedule, run_dir: target_trial(target, case, durability, schedule, run_dir,
                                                                   golden, run_options), workdir, keep, stop)
    result.wall_s = time.perf_counter() - began
    return result


def search_target(target: Target, cases: Sequence[TargetCase], durability: Sequence[str], *, seed: int, budget: int,
                  workdir: Path, max_faults: int = 3, kinds: Sequence[str] | None = None, jobs: int | None = None,
                  keep: bool = False, run_options: dict[str, Any] | None = None,
                  on_result: Callable[[SearchResult], None] | None = None) -> list[SearchResult]:
    """:func:`search_target_case` for every case in every durability mode, ``jobs`` at once in threads (each waits
    on its own worker processes); each unit's seed is :func:`case_seed` of its unit id. Returns the results in order.
    """
    units = [(c, m) for c in cases for m in durability]
    stop = threading.Event()
    pool = ThreadPoolExecutor(max_workers=jobs or 2)
    try:
        futures = [pool.submit(search_target_case, target, c, m, seed=case_seed(seed, unit_id(c.name, m)),
                               budget=budget, workdir=workdir / unit_id(c.name, m), max_faults=max_faults,
                               kinds=kinds, keep=keep, run_options=run_options, stop=stop) for c, m in units]
        results = []
        for f in futures:
            results.append(result_of(f))
            if on_result:
                on_result(results[-1])
        return results
    except BaseException:  # Ctrl-C, SIGTERM: the searches stop at their next schedule and their workers die
        stop.set()
        with reaping(workdir):
            pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def write_target_repro(result: SearchResult, target: Target, out_dir: Path) -> Path:
    """Write the shrunk failure of ``result`` as a target file of its own, ``out_dir/CASE_gen_ID.yaml``: the target
    (its paths absolute) with the one case the schedule made, in the durability mode searched; its seed and schedule
    in a comment. ``crashpoint run FILE --crash none`` runs it (:func:`target_repro_line`). An existing file with
    other contents is left alone (``_2``, ``_3``, ... instead). Returns the path (also set on ``result.repro``).

    Raises:
        ValueError: ``result`` found nothing.
        UsageError: :data:`MAX_REPRO_COPIES` files of that name already exist with other contents.
    """
    if result.found is None:
        raise ValueError(f"{result.case_id}: the search found no failure to write")
    case: TargetCase = result.found.case
    mode = result.case_id.rsplit("[", 1)[1].rstrip("]")
    data = dataclasses.replace(target, cases=[case], durability=[mode]).to_data()
    why = "; ".join(f"[{f.rule}] {f.message}" for f in result.found.failures[:3]) or str(result.found.error)
    head = (f"# Generated by crashpoint search (seed {result.seed}, {result.case_id}): the shrunk schedule of "
            f"{len(result.found.schedule)} fault(s) that fails:\n"
            + "".join(f"#   - {describe(f)}\n" for f in result.found.schedule)
            + "# " + " ".join(why.split())[:400] + "\n")
    text = head + yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    for n in range(1, MAX_REPRO_COPIES + 1):  # a file with other contents is never overwritten
        path = Path(out_dir) / (f"{case.name}.yaml" if n == 1 else f"{case.name}_{n}.yaml")
        if not path.exists():
            tmp = path.with_name(path.name + ".partial")
            tmp.write_text(text)
            tmp.replace(path)
            break
        if path.read_text(errors="replace") == text:
            break
    else:
        raise UsageError(f"{out_dir}/{case.name}.yaml: it and {MAX_REPRO_COPIES - 1} numbered copies already exist "
                         "with other contents; a repro is never overwritten (move them away to write this one)")
    result.repro = path
    return path


def target_repro_line(path: Path) -> str:
    """The one-line command that runs a target repro file (its faults are in it): ``crashpoint run FILE --crash
    none``."""
    return repro_command(path, None)


__all__ = ["faults", "search", "search_case", "trial", "write_repro", "resolve_seed", "case_seed",
           "SearchResult", "Trial", "summary_lines", "target_space", "target_faults", "target_case", "target_trial",
           "search_target_case", "search_target", "write_target_repro", "target_repro_line"]
