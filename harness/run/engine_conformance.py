"""The engine conformance kit: what a new engine's author runs first (in the spirit of Hypothesis's
``provider_conformance.py``, which outside backend authors run against their provider).

It takes a **correct** target on the engine and a **broken** variant of it (a mistake the engine does not forgive:
an effect without an idempotency key, ...) and checks, in a handful of runs:

1. ``declarations``: the engine's declarations hold together (:func:`check_declarations`, no run): its name is its
   module's, its worker module exists, its packages are installed, its capability flags come with the methods they
   need, its options block is in the target schema;
2. ``crash points``: the golden run of the correct target passes and records crash points of the engine's own
   (kinds other than the team's effects, :data:`~crashpoint.harness.engines.base.EFFECT_KINDS`): the engine's hooks
   record where it makes state durable, with no code of the team's;
3. ``kill lands``: a crash run at one of those points (the middle one) kills its worker with a real SIGKILL, verified
   as every run's is (:func:`crashpoint.harness.process.kills.check_worker`: the pid the harness started, its exit by
   SIGKILL, the probe's witness records; the run is not an ``error``);
4. ``resumes``: in that run (workers started as new interpreters, ``warm=False``: only the run folder's files and the
   engine's server carry state) the next worker is a new process that took over, the run passes (the end and the
   effects of the golden run, no repeat unexplained), and it resumed: it passed fewer crash points than the golden
   run did (a worker that starts every workflow over passes them all again);
5. ``broken caught``: the broken variant fails (a rule's finding) at ``broken_point`` (its golden run when
   ``None``), where the correct target passes;
6. ``durability``: a durability mode the engine does not declare is ``unsupported`` (its worker says why), never a
   pass.

:func:`check_engine` returns every check (:class:`Check`); :func:`assert_conforms` raises :class:`AssertionError`
naming each one that failed. ``tests/adapters/test_engine_conformance.py`` runs it on each installed engine.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine, engine_for
from crashpoint.harness.load.target import DURABILITY, Target
from crashpoint.harness.model.results import RunResult
from crashpoint.harness.model.verdicts import Verdict
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.target_sweep import run_one


@dataclass(frozen=True)
class Check:
    """One conformance check: ``name`` (``kill lands``), ``ok``, and ``detail`` (what was seen, in one line)."""

    name: str
    ok: bool
    detail: str


def _overrides(engine: Engine, method: str) -> bool:
    return getattr(type(engine), method) is not getattr(Engine, method)


def check_declarations(engine: Engine) -> list[Check]:
    """The engine's declarations, without a run (see the module docstring, check 1)."""
    import importlib.util

    from crashpoint.harness.load.loader import _schema

    problems = []
    module = type(engine).__module__
    if module.rsplit(".", 1)[-1] != engine.name or engine.worker_module != f"{module}_worker":
        problems.append(f"name {engine.name!r} and worker_module {engine.worker_module!r} are not {module}'s")
    if importlib.util.find_spec(engine.worker_module) is None:
        problems.append(f"no worker module {engine.worker_module}")
    if not getattr(engine, "title", ""):
        problems.append("no title")
    if not engine.packages or "(not installed)" in engine.version():
        problems.append(f"packages: {engine.version() or 'none declared'}")
    if not engine.durability_modes or set(engine.durability_modes) - set(DURABILITY):
        problems.append(f"durability_modes {engine.durability_modes!r} are not among {', '.join(DURABILITY)}")
    kinds = [*engine.recovery_kinds, *engine.pair_kinds]
    if not engine.recovery_kinds or any(not k.endswith(":") or k.count(":") != 1 for k in kinds):
        problems.append(f"recovery_kinds / pair_kinds must be crash point kinds ('KIND:'): {kinds!r}")
    for flag, method in (("worker_identities", "identity_args"), ("server", "server_for")):
        if getattr(engine, flag) and not _overrides(engine, method):
            problems.append(f"{flag} is declared but {method} is not answered")
    if engine.workers_per_cpu is not None and not (isinstance(engine.workers_per_cpu, int)
                                                   and engine.workers_per_cpu >= 1):
        problems.append(f"workers_per_cpu {engine.workers_per_cpu!r} is not None or a count >= 1")
    block = _schema("target")["properties"].get(engine.options_key) if engine.options_key else {"type": "object"}
    if not isinstance(block, dict) or block.get("type") != "object":
        problems.append(f"scenarios/schemas/target.schema.json has no object block {engine.options_key!r}")
    return [Check("declarations", not problems, "; ".join(problems) or f"{engine.name}: {engine.version()}")]


def _why(result: RunResult) -> str:
    return "; ".join([*(f"{f.rule}: {f.message}" for f in result.failures), *result.rules_unknown,
                      *([result.error] if result.error else [])])[:600]


def _own_points(points: list[str]) -> list[str]:
    return [p for p in points if not p.startswith(EFFECT_KINDS)]


def _kill_and_resume(correct: Target, case: str, golden: RunResult, workdir: Path) -> list[Check]:
    """Checks 3 and 4: a crash run of the correct target, cold, at the middle one of the golden run's own points."""
    assert golden.outcome is not None
    points = golden.outcome.crash_points
    own = _own_points(points)
    if not own:
        return [Check("kill lands", False, "no crash point of the engine's own to kill at"),
                Check("resumes", False, "no crash point of the engine's own to kill at")]
    point = own[len(own) // 2]
    run = run_one(correct, correct.case(case), "sync", workdir / "kill", point, golden.outcome, warm=False, keep=True)
    out = run.outcome
    log = out.kill_log if out is not None else []
    killed = [k for k in log if k.get("signal") == "SIGKILL"]
    landed = len(killed) == 1 and not (out and out.kill_problems) and run.verdict != Verdict.ERROR and \
        any(p.get("rc") == -9 and p.get("pid") == killed[0]["pid"] for p in run.pids)
    lands = Check("kill lands", landed,
                  f"at {point}: {run.verdict}, kills {[(k['pid'], k['signal']) for k in log]}, exits "
                  f"{[(p.get('pid'), p.get('rc')) for p in run.pids]}"
                  + (f", problems {out.kill_problems}" if out and out.kill_problems else "") + (f"; {_why(run)}"
                                                                                                if _why(run) else ""))
    if not killed or out is None:
        return [lands, Check("resumes", False, f"no verified kill at {point} to resume from")]
    dead, by = killed[0]["pid"], killed[0].get("resumed_by")
    after = crashpoints.recovery_points(out.crash_points, point)
    new_process = by is not None and by != dead  # kills.check_worker: a new process that started the probe
    resumed = run.verdict == Verdict.PASSED and new_process and len(after) < len(points)
    return [lands, Check("resumes", resumed,
                         f"pid {dead} killed at {point}, resumed by pid {by} (a new interpreter): the recovery passed "
                         f"{len(after)} crash points, the golden run {len(points)} ({run.verdict})")]


def _broken_caught(correct: Target, broken: Target, case: str, point: str | None, golden: RunResult,
                   workdir: Path) -> Check:
    """Check 5: the broken variant fails at ``point`` (its golden run when ``None``); the correct target passes it."""
    if point is None:
        bad = run_one(broken, broken.case(case), "sync", workdir / "broken-golden", None, None)
        ok = golden
    else:
        bad_golden = run_one(broken, broken.case(case), "sync", workdir / "broken-golden", None, None, keep=True)
        if bad_golden.outcome is None:
            return Check("broken caught", False, f"the broken variant's golden run is {bad_golden.verdict}: "
                                                 f"{_why(bad_golden)}")
        bad = run_one(broken, broken.case(case), "sync", workdir / "broken", point, bad_golden.outcome)
        ok = run_one(correct, correct.case(case), "sync", workdir / "correct-at-broken", point, golden.outcome)
    rules = sorted({f.rule for f in bad.failures})
    return Check("broken caught", bad.verdict == Verdict.FAILED and bool(rules) and ok.verdict == Verdict.PASSED,
                 f"at {point or 'the golden run'}: the broken variant {bad.verdict} {rules}, the correct target "
                 f"{ok.verdict}" + (f" ({_why(ok)})" if ok.verdict != Verdict.PASSED else ""))


def _undeclared_durability(engine: Engine, correct: Target, case: str, workdir: Path) -> Check:
    """Check 6: the first durability mode the engine does not declare is ``unsupported``."""
    missing = [m for m in DURABILITY if m not in engine.durability_modes]
    if not missing:
        return Check("durability", True, f"every mode declared: {', '.join(engine.durability_modes)}")
    run = run_one(correct, correct.case(case), missing[0], workdir / f"durability-{missing[0]}", None, None)
    return Check("durability", run.verdict == Verdict.UNSUPPORTED,
                 f"durability {missing[0]} (not declared): {run.verdict}"
                 + (f" ({run.error.removeprefix('unsupported: ')})" if run.error else ""))


def check_engine(correct: Target, broken: Target, *, case: str | None = None, broken_point: str | None = None,
                 workdir: Path | None = None) -> list[Check]:
    """Run the kit (see the module docstring) on ``correct``'s engine: ``broken`` is a broken variant of ``correct``
    on the same engine, caught at ``broken_point`` (a crash point id; ``None``: its golden run fails); ``case`` is the
    case run (default: the first). About six runs, in ``workdir`` (default a temporary folder, removed).

    Returns:
        every :class:`Check`, in the order of the module docstring (a failed golden run skips the runs after it).

    Raises:
        ValueError: the two targets are on different engines.
    """
    if broken.engine != correct.engine:
        raise ValueError(f"the broken variant runs on {broken.engine}, the correct target on {correct.engine}")
    engine = engine_for(correct.engine)
    case = case or correct.cases[0].name
    with tempfile.TemporaryDirectory(prefix="crashpoint-conformance-") as scratch:
        root = Path(workdir) if workdir else Path(scratch)
        checks = check_declarations(engine)
        golden = run_one(correct, correct.case(case), "sync", root / "golden", None, None, keep=True)
        own = _own_points(golden.outcome.crash_points) if golden.outcome else []
        checks.append(Check("crash points", golden.verdict == Verdict.PASSED and bool(own),
                            f"the golden run {golden.verdict}, {len(golden.outcome.crash_points) if golden.outcome else 0}"
                            f" crash points, {len(own)} of the engine's own ({', '.join(own[:4])}"
                            f"{', ...' if len(own) > 4 else ''})" + (f"; {_why(golden)}" if _why(golden) else "")))
        if golden.verdict != Verdict.PASSED or golden.outcome is None:
            return checks
        checks += _kill_and_resume(correct, case, golden, root)
        checks.append(_broken_caught(correct, broken, case, broken_point, golden, root))
        checks.append(_undeclared_durability(engine, correct, case, root))
    return checks


def assert_conforms(correct: Target, broken: Target, **options: object) -> list[Check]:
    """:func:`check_engine`, raising when a check failed.

    Raises:
        AssertionError: naming every failed check and what it saw.
    """
    checks = check_engine(correct, broken, **options)  # type: ignore[arg-type]
    failed = [c for c in checks if not c.ok]
    if failed:
        raise AssertionError(f"engine {correct.engine} does not conform: "
                             + " | ".join(f"{c.name}: {c.detail}" for c in failed))
    return checks


def report(checks: list[Check]) -> str:
    """One line per check: ``ok|FAIL NAME: DETAIL``."""
    return "\n".join(f"{'ok  ' if c.ok else 'FAIL'} {c.name}: {c.detail}" for c in checks)


__all__ = ["Check", "check_declarations", "check_engine", "assert_conforms", "report"]
