"""The one verdict path: a finished run (or the exception it raised) becomes its result record.

Every front end (``crashpoint run`` and ``--resume``, ``crashpoint search``, ``crashpoint certify``,
``pytest --chaos``) runs the engine its own way and then calls :func:`judge` (a pack's run) or
:func:`judge_target` (a run of a team's own code), so the same run gets the same verdict, the same
findings (with the same rule ids), the same vacuity, the same reproduce command and the same measures
everywhere. Both gather what the run showed and leave the verdict to :func:`decide`, the one decision
order:

1. the run raised: :class:`~crashpoint.errors.Unsupported` (the engine lacks what it needs):
   ``unsupported``; :class:`~crashpoint.errors.WorkerTimeout` (a worker hung): ``unknown``; any other
   exception (the engine or its adapter broke): ``error`` naming it;
2. the run did not test what it claims: ``error`` with the first reason, in this order: the fault-free
   run a ``like_fault_free`` case is compared with broke; a kill was not verified; an effect was called in a
   process that is not a worker (targets: a node's subprocess); the case's own faults
   never fired on its golden run; the golden run made no tool call (a target's case may say its path makes none:
   ``no_effect``); a target's golden run never called an ``effects:`` entry or never asked for a human answer the
   case gives (:mod:`~crashpoint.harness.judge.target_scope`); a duplicate whose processes never
   overlapped (targets); the targeted crash point was never reached (unless some of its kills
   fired and a property rule, which holds for any run, found something: that finding stands, ``failed``, the
   unreached point named in the run's notes);
3. a rule found something: ``failed``;
4. a rule raised instead of judging: ``unknown`` (that rule could not decide the run);
5. otherwise ``passed``.

Findings and vacuity are kept in every case, so an ``error`` still shows what the rules saw.
"""

from __future__ import annotations

import shlex
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from crashpoint.harness.model.results import VERDICTS, RunResult, unit_id
from crashpoint.harness.model.verdicts import Verdict
from crashpoint.errors import Unsupported, WorkerTimeout
from crashpoint.harness.process.kills import unverified
from crashpoint.harness.judge.invariants import point_at_cause
from crashpoint.harness.model.rules import Finding, Judgement, Rule, RuleContext, evaluate, is_property

if TYPE_CHECKING:
    from crashpoint.harness.load.loader import Case, Pack
    from crashpoint.harness.model.outcomes import RunOutcome



@dataclass(frozen=True)
class Invocation:
    """How the command that re-runs a run names the engine: ``engine`` (``--engine MODULE:CLASS``),
    ``adapter`` (``--adapter SPEC``), ``crash_mode`` (``--crash-mode``, omitted for ``kill``)."""

    engine: str | None = None
    adapter: str | None = None
    crash_mode: str = "kill"


def repro_command(case_path: Path | str, crash_point: str | None, how: Invocation | None = None) -> str:
    """The one-line command that re-runs one case at one crash point (``--crash none`` for a golden
    run, or a case whose faults are in its file): ``crashpoint run CASE --crash-point P [--engine E]
    [--crash-mode M] [--adapter A]``, the case path relative to the working folder when inside it.
    Every word is quoted for a POSIX shell (:func:`shlex.join`), so a case file named
    ``x$(touch P).yaml`` or a crash point holding ``'`` runs nothing when the line is pasted. The one
    place a reproduce line is built: the CLI, certify, search and pytest all call it."""
    how = how or Invocation()
    path = Path(case_path)
    try:
        path = path.resolve().relative_to(Path.cwd())
    except (ValueError, OSError):
        pass
    words = ["crashpoint", "run", str(path)]
    words += ["--crash-point", crash_point] if crash_point else ["--crash", "none"]
    if how.engine:
        words += ["--engine", how.engine]
    if how.crash_mode != "kill":
        words += ["--crash-mode", how.crash_mode]
    if how.adapter:
        words += ["--adapter", how.adapter]
    return shlex.join(words)




def unsupported(adapter: Any, case: "Case", pack: "Pack", crash_point: str | None = None) -> RunResult | None:
    """The ``unsupported`` record of a case that needs a feature ``adapter`` declares its engine lacks
    (:func:`crashpoint.harness.adapters.support.lacking`, named in ``error``), or ``None`` when the
    adapter can run it. Front ends call it before they run the case."""
    from crashpoint.harness.adapters.support import lacking, unsupported_message
    from crashpoint.harness.judge.record import measures

    missing = lacking(adapter, case, pack)
    if not missing:
        return None
    result = RunResult(case.case_id, crash_point, "unsupported", error=unsupported_message(adapter, missing))
    result.measures = measures(result)
    return result


def exception_text(exc: BaseException) -> str:
    """``Name: message`` of an exception that broke a run (with a short traceback when the message is empty)."""
    text = f"{type(exc).__name__}: {exc}"
    if not str(exc):
        text += "\n" + "".join(traceback.format_exception(type(exc), exc, exc.__traceback__, limit=3))
    return text


def needs_fault_free(case: "Case") -> bool:
    """``True`` when the case must end like its fault-free self (``expected.like_fault_free``): the
    front end then runs :func:`crashpoint.harness.run.sweep.fault_free` of it and hands the outcome to
    :func:`judge`."""
    return bool(case.expected.get("like_fault_free"))


def judge(case: Any, subject: Any, run: Any, *, crash_point: str | None = None, golden: Any = None,
          fault_free: "RunOutcome | BaseException | None" = None, masked: bool = False, how: Invocation | None = None,
          wall_s: float | None = None, began: float | None = None, rules: Sequence[Rule] | None = None,
          variant: str | None = None, repeat: int = 1, reached: bool | None = None) -> RunResult:
    """The result record of one run, of a pack's case or of a target's case (see the module docstring for the order
    of the decision): the one place a run's verdict is reached.

    Args:
        case, subject: what ran: a pack's :class:`~crashpoint.harness.load.loader.Case` (faults applied) and its
            :class:`~crashpoint.harness.load.loader.Pack`, or a target's
            :class:`~crashpoint.harness.load.target.TargetCase` and its :class:`~crashpoint.harness.load.target.Target`.
        run: the run's :class:`~crashpoint.harness.model.outcomes.RunOutcome` (a pack's) or
            :class:`~crashpoint.harness.model.outcomes.TargetOutcome` (a target's), or the exception it raised.
        crash_point: the crash point the harness targeted (``None``: a golden run, or a schedule whose
            kills are the case's own faults).
        golden: the unit's golden run (``None`` for the golden run itself); a crashed run must end like it.
        fault_free: for a ``like_fault_free`` case (:func:`needs_fault_free`), the fault-free run's
            outcome or the exception it raised.
        masked: the run's faults are ones a correct engine masks (a generated schedule of kills and
            duplicates): it must end like ``golden`` too.
        how: how to name the engine in a pack run's reproduce command (for runs that did not pass).
        wall_s / began: the run's wall seconds, or its ``time.perf_counter()`` start (default 0).
        rules: the rules to apply (default: every registered rule that judges this kind of run).
        variant / repeat: a target run's durability mode and which try of its crash point.
        reached: every kill of ``crash_point`` fired (default: what the outcome says).

    Returns:
        The :class:`RunResult` (its ``case_id`` the unit, :func:`~crashpoint.harness.model.results.unit_id`), with
        ``measures`` and, unless passed, ``reproduce``.
    """
    target = hasattr(subject, "entry")
    unit = unit_id(case.name if target else case.case_id, variant if target else None)
    result = _decide(case, subject, run, crash_point, golden, fault_free, masked, rules, target, reached)
    result.case_id, result.variant, result.repeat = unit, variant if target else None, repeat
    if wall_s is None:
        wall_s = time.perf_counter() - began if began is not None else 0.0
    result.wall_s = wall_s
    from crashpoint.harness.judge.record import measures

    result.measures = measures(result)
    if result.verdict != "passed":
        if target:
            result.reproduce = target_repro(subject, case.name, variant, crash_point)
        elif case.path is not None:
            result.reproduce = repro_command(case.path, crash_point, how)
    return result


def target_repro(target: Any, case: str, durability: str | None, crash_point: str | None) -> str:
    """The one-line command that re-runs one run of a target (``crashpoint run TARGET.yaml --case C --durability D
    --crash-point P``, or ``--crash none`` for a golden run), every word quoted for a POSIX shell."""
    where = str(target.file or "TARGET.yaml")
    try:
        where = str(Path(where).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError):
        pass
    cp = ["--crash-point", crash_point] if crash_point else ["--crash", "none"]
    return shlex.join(["crashpoint", "run", where, "--case", str(case),
                       *(["--durability", str(durability)] if durability else []), *cp])


def decide(raised: BaseException | None = None, not_tested: Iterable[str | None] = (), *, found: bool = False,
           broken: str = "") -> tuple[str, str | None]:
    """The one decision order of a run's verdict (the module docstring's list).

    Args:
        raised: the exception the run raised instead of finishing, or ``None``.
        not_tested: why the run did not test what it claims, in the documented order; ``None`` or ``""``
            entries are reasons that do not hold (the first one that holds is the ``error`` text).
        found: a rule or invariant found something.
        broken: the text naming the rules that raised instead of judging (``""``: none did).

    Returns:
        ``(verdict, error)``: one of :data:`VERDICTS` and its error text (``None`` for ``passed``, and for
        ``failed`` when no rule raised).
    """
    if isinstance(raised, Unsupported):
        return Verdict.UNSUPPORTED, str(raised)
    if isinstance(raised, WorkerTimeout):
        return Verdict.UNKNOWN, str(raised)
    if raised is not None:  # the engine or its adapter broke: a verdict, never a silent skip
        return Verdict.ERROR, exception_text(raised)
    reason = next((r for r in not_tested if r), None)
    if reason:
        return Verdict.ERROR, reason
    if found:
        return Verdict.FAILED, broken or None
    if broken:
        return Verdict.UNKNOWN, broken
    return Verdict.PASSED, None


#: The words of :func:`unreached`'s text after the crash point.
UNREACHED = "was never reached, so nothing was tested"


def unreached(crash_point: str | None, reached: bool, passed: str) -> str | None:
    """The ``error`` text of a run whose targeted crash point was never reached (``None`` when it was, or
    for a golden run); ``passed`` names what the golden run passed instead."""
    if crash_point is None or reached:
        return None
    return f"crash point {crash_point} {UNREACHED}; {passed}"


def only_unreached(result: RunResult) -> bool:
    """``True`` when ``result`` is an ``error`` for one reason only: its targeted crash point was never reached
    (:func:`unreached`, the last reason of the decision order, so no earlier one held), with no finding and no rule
    that raised. A sweep replaces such a run of a pair it sampled itself (:data:`crashpoint.harness.run.sweep.
    PAIR_TRIES`); a point the user named stays this ``error``."""
    return (result.verdict == Verdict.ERROR and not result.failures and not result.rules_unknown
            and (result.error or "").startswith(f"crash point {result.crash_point} {UNREACHED};"))


#: Why a golden run that called no effect tested nothing, per kind of subject.
NO_CALL = {"pack": "the golden run made no tool call: the case exercised nothing",
           "target": "the golden run made no tool call: no effect of the target was called (mark the team's side "
                     "effects with crashpoint.effect, or name them under effects:), so the effect rules had nothing "
                     "to judge"}


def _decide(case: Any, subject: Any, run: Any, crash_point: str | None, golden: Any,
            fault_free: "RunOutcome | BaseException | None", masked: bool, rules: Sequence[Rule] | None,
            target: bool, reached: bool | None) -> RunResult:
    from crashpoint.harness.judge.coverage import vacuity

    cid = case.name if target else case.case_id
    if isinstance(run, BaseException):
        verdict, error = decide(run)
        return RunResult(cid, crash_point, verdict, error=error)
    refs: list[tuple[str, Any]] = []
    if golden is not None and (crash_point is not None or masked):
        refs.append(("golden", golden))
    ff_broke = None
    if isinstance(fault_free, BaseException):
        ff_broke = f"the fault-free run broke: {type(fault_free).__name__}: {fault_free}"
    elif fault_free is not None:
        refs.append(("fault-free", fault_free))
    if target:
        from crashpoint.harness.judge.target_rules import judge as judge_target_rules

        findings, unknown = judge_target_rules(subject, run, golden)
        broken_ids = [u.split(":", 1)[0] if not u.startswith("target.invariant:") else ":".join(u.split(":", 2)[:2])
                      for u in unknown]
        broken, passed_points = "; ".join(unknown), f"fired: {', '.join(run.fired) or 'none'}; with --repeat, a " \
                                                     "racy point may be reached in some tries only"
        reached = reached if reached is not None else True
    else:
        judgement: Judgement = evaluate(RuleContext(case, subject, run, golden, tuple(refs)), rules)
        findings = point_at_cause(judgement.findings, run)  # end-state findings name the delivery or kill before it
        broken, broken_ids = judgement.broken_text(), [rid for rid, _ in judgement.broken]
        known = ", ".join(golden.crash_points) if golden else "(no golden run)"
        passed_points = f"the golden run of {cid} passes: {known}"
        reached = run.crash_fired if reached is None else reached
    notes, nothing = vacuity(run, golden=crash_point is None)
    # a golden run's vacuity (faults that never fired, no effect call) is an ``error`` unless a property rule found
    # something: that finding holds whatever the faults did (an expectation's does not: it was written for them)
    vacuous_ok = crash_point is None and not any(is_property(f.rule) for f in findings)
    missed = unreached(crash_point, reached, passed_points)
    if missed and run.kill_log and findings and all(is_property(f.rule) for f in findings):
        # some kills fired (verified below) and a property, which holds for any run, found what they caused
        notes = [*notes, f"{missed.split(';')[0]}: the findings come from the kills that fired"]
        missed = None
    verdict, error = decide(None, [
        ff_broke,
        unverified(run),  # a kill that did not land, or a changed crash log: nothing was tested
        "; ".join(getattr(run, "outside", ())),  # effects called where the ledger never saw them (a subprocess)
        "; ".join(getattr(run, "unobserved", ())),  # a process started without the run's marker: nothing seen
        ("the case's faults never fired, so nothing was tested: " + "; ".join(run.faults_missed)
         if run.faults_missed and vacuous_ok else None),
        NO_CALL["target" if target else "pack"] if nothing and vacuous_ok and not (target and case.makes_no()) else None,
        _untested(subject, case, run) if target and vacuous_ok else None,  # effects: never called, answers never asked
        "; ".join(getattr(run, "not_tested", ())),  # a duplicate whose processes never overlapped
        missed,
    ], found=bool(findings), broken=broken)
    return RunResult(cid, crash_point, verdict, findings, error=error, outcome=run, vacuity=notes,
                     rules_unknown=broken_ids)


def _untested(target: Any, case: Any, run: Any) -> str | None:
    """What a target's golden run did not test of what its file names (:func:`crashpoint.harness.judge.target_scope.
    untested`: ``effects:`` entries never called, answers never asked for)."""
    from crashpoint.harness.judge.target_scope import untested

    return untested(target, case, run)


def judge_target(target: Any, case: Any, durability: str, run: Any, *, crash_point: str | None = None,
                 golden: Any = None, reached: bool = True, repeat: int = 1, wall_s: float = 0.0) -> RunResult:
    """:func:`judge` of one run of a target (the team's own code) in durability mode ``durability``: the same
    verdict, findings and vacuity a pack's run in the same situation gets. An engine release that lacks what the run
    needs raises :class:`~crashpoint.harness.run.target_driver.TargetUnsupported` (an
    :class:`~crashpoint.errors.Unsupported`); ``reached``: every kill of ``crash_point`` fired."""
    return judge(case, target, run, crash_point=crash_point, golden=golden, variant=durability, repeat=repeat,
                 wall_s=wall_s, reached=reached)


#: The starts of the ``error`` texts that say only that nothing was tested (no finding involved).
NOTHING_TESTED = ("the case's faults never fired", "the golden run made no tool call", "the golden run never")


def is_vacuous(result: RunResult) -> bool:
    """``True`` for an ``error`` that says nothing was tested (faults that never fired, or a run that
    made no tool call): what a generated search skips as ``vacuous`` rather than counts as a failure (a
    schedule that cancels before the first step tests no engine bug). Findings of such a run do not count:
    they compare it with expectations written for faults it never had (a held cancel that was never
    delivered makes "expected cancelled" fail on a correct engine)."""
    return result.verdict == "error" and bool(result.error) and result.error.startswith(NOTHING_TESTED)


__all__ = ["judge", "judge_target", "decide", "unreached", "only_unreached", "unsupported", "VERDICTS", "RunResult", "Invocation", "repro_command", "needs_fault_free", "exception_text", "is_vacuous"]
