"""The verdict on runs, as data: one run's :class:`RunResult` and a whole sweep's :class:`SweepResult`, the same for
both kinds of subject (a pack's case on an adapter, a target's case on an engine). Every front end, the results
store and every report read these.

A result's ``case_id`` is its *unit*: a pack's case id, or a target's ``CASE[MODE]`` (the case and the durability
mode it ran in, :func:`unit_id`), so that per-case tables, the results store and the weekly report group a target's
runs as they group a pack's.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterable

from crashpoint.harness.model.outcomes import RunOutcome, TargetOutcome
from crashpoint.harness.model.points import FAULT_PREFIX, THEN
from crashpoint.harness.model.rules import Finding
from crashpoint.harness.model.verdicts import VERDICTS, Verdict, is_green, merge

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.loader import Case


def unit_id(case: str, variant: str | None) -> str:
    """The unit a run belongs to: ``case`` for a pack (``variant`` ``None``), ``case[variant]`` for a target
    (``approved[sync]``: the case in one durability mode)."""
    return case if variant is None else f"{case}[{variant}]"


@dataclass
class RunResult:
    """The verdict on one run: the one result record every front end and report uses, for packs and targets.

    Attributes:
        case_id: the unit (:func:`unit_id`): a pack's case id, a target's ``CASE[MODE]``. ``crash_point``: the
            crash point id or schedule (``"A >> B"``), ``None`` for the golden run.
        verdict: a :class:`~crashpoint.harness.model.verdicts.Verdict`: ``passed`` | ``failed`` | ``error`` (the
            harness or the engine broke, or nothing was tested) | ``unknown`` (a worker neither finished nor
            crashed in time, or a rule could not decide; never counts as passed) | ``unsupported`` (the engine
            lacks what the run needs, named in ``error``: never counts as passed nor as failed).
        failures: rule findings (kept whatever the verdict), each with its rule id.
        error: the error text for ``error``/``unknown`` (and for ``failed`` when a rule also raised).
        vacuity: faults scheduled that never fired, work that never happened (see
            :mod:`crashpoint.harness.judge.coverage`).
        outcome: the run's outcome (a :class:`~crashpoint.harness.model.outcomes.RunOutcome` or
            :class:`~crashpoint.harness.model.outcomes.TargetOutcome`; ``None`` when the run produced none, or
            dropped for a passed run of a big sweep: what reports need is copied into the fields below).
        wall_s: wall seconds of the run (and its judging).
        rules_unknown: ids of the rules that raised instead of judging.
        reproduce: the one-line command that re-runs it (runs that did not pass).
        measures: the per-run metric inputs (:func:`crashpoint.harness.judge.record.measures`), kept so that
            restored results count in metrics as they did when they ran.
        variant: the durability mode of a target run (``None`` for a pack's). ``repeat``: which try of its crash
            point (``--repeat``; 1 for the first).
        final_status / stop_reason / crash_fired / workers / kills / kill_log / kill_problems / notes / pids: what
            the outcome showed (:meth:`observe`), kept when the outcome itself is dropped. ``final_status`` of a
            target run is its threads' statuses (``finished``, or ``order-1=finished, order-2=waiting``).
    """

    case_id: str
    crash_point: str | None
    verdict: str
    failures: list[Finding] = field(default_factory=list)
    error: str | None = None
    outcome: "RunOutcome | TargetOutcome | None" = None
    wall_s: float = 0.0
    vacuity: list[str] = field(default_factory=list)
    rules_unknown: list[str] = field(default_factory=list)
    reproduce: str | None = None
    measures: dict[str, Any] | None = None
    variant: str | None = None
    repeat: int = 1
    final_status: str | None = None
    stop_reason: str | None = None
    crash_fired: bool = False
    workers: int = 0
    kills: int = 0
    kill_log: list[dict[str, Any]] = field(default_factory=list)
    kill_problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    pids: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.verdict = Verdict(self.verdict)
        if self.outcome is not None:
            self.observe(self.outcome)

    def observe(self, outcome: "RunOutcome | TargetOutcome") -> None:
        """Copy what reports need from ``outcome`` into this result's fields (and keep the outcome)."""
        self.outcome = outcome
        if isinstance(outcome, TargetOutcome):
            statuses = {t: s.get("status") for t, s in outcome.threads.items()}
            self.final_status = (next(iter(set(statuses.values()))) if len(set(statuses.values())) == 1
                                 else ", ".join(f"{t}={s}" for t, s in statuses.items())) if statuses else None
            self.stop_reason = outcome.over_budget
            self.crash_fired = bool(self.crash_point) and not outcome.kill_problems and \
                outcome.kills >= len(self.crash_point.split(THEN))
            self.pids = list(outcome.pids)
        else:
            self.final_status, self.stop_reason = outcome.status, outcome.stop_reason
            self.crash_fired = outcome.crash_fired
        self.workers, self.kills = outcome.workers, outcome.kills
        self.kill_log = [dict(k) for k in outcome.kill_log]
        self.kill_problems = list(outcome.kill_problems)
        self.notes = list(outcome.notes)

    @property
    def case(self) -> str:
        """The case's own name (the unit without its ``[MODE]``)."""
        return self.case_id[: -len(self.variant) - 2] if self.variant else self.case_id

    @property
    def durability(self) -> str | None:
        """A target run's durability mode (``variant``)."""
        return self.variant

    @property
    def rules(self) -> list[str]:
        """The rule ids of the findings, each once, in order."""
        return list(dict.fromkeys(f.rule for f in self.failures))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (see the JSON report's reference); ``reproduce`` only when set, ``variant`` and ``repeat`` only
        for a target run; every string bounded by :func:`crashpoint.text.bounded` (an engine's 20 MB stop reason is
        kept as its first :data:`crashpoint.text.MAX_TEXT` characters)."""
        from crashpoint.text import bounded

        data = {
            "case_id": self.case_id,
            "crash_point": self.crash_point or "none",
            "verdict": str(self.verdict),
            "failures": [f.to_dict() for f in self.failures],
            "error": self.error,
            "final_status": self.final_status,
            "stop_reason": self.stop_reason,
            "crash_fired": self.crash_fired,
            "workers": self.workers,
            "kills": self.kills,
            "kill_log": [dict(k) for k in self.kill_log],
            "kill_problems": list(self.kill_problems),
            "notes": list(self.notes),
            "vacuity": list(self.vacuity),
            "wall_s": round(self.wall_s, 3),
        }
        if self.variant is not None:
            data |= {"case": self.case, "variant": self.variant, "repeat": self.repeat, "pids": list(self.pids)}
        if self.rules_unknown:
            data["rules_unknown"] = list(self.rules_unknown)
        if self.reproduce:
            data["reproduce"] = self.reproduce
        return bounded(data)


@dataclass
class SweepResult:
    """All runs of a sweep, of a pack or of a target, plus what is needed to report them.

    Attributes:
        subject: what was swept: a :class:`~crashpoint.harness.load.loader.Pack` or a
            :class:`~crashpoint.harness.load.target.Target` (``kind`` says which).
        engine / engine_version: the engine's name and its installed version(s).
        crash: the crash selection (``sampled``, ``every``, ``none``, ``recovery``). ``crash_mode``: how workers
            crashed (``kill``, ``kill-cold``, ``inprocess``).
        results: every run's :class:`RunResult`, golden runs first.
        crash_points: unit -> the crash point ids its golden run passed.
        wall_s: wall seconds of the whole sweep.
        cases: a pack's cases as run (``[]`` for a target).
        units: unit -> ``{"case", "variant", "events", "faults", "workflow"}``: what the coverage matrix reads
            (a pack case's tool events and workflow definition; ``workflow`` ``None`` for a target).
        sampled_pairs: unit -> what became of the recovery pairs ``--crash sampled`` picked for it: ``{"sampled",
            "reached", "replaced": [{"pair", "by", "tries"}], "not_reached": [{"first", "tried"}]}`` (a pair whose
            second kill a correct run did not reach is run again at another point of its recovery, or retried;
            one no try reached is left out of ``results``, named here).
        points: ``classes`` (the single kills were a sample of each crash-point class) or ``all``.
        classes: unit -> its crash-point classes, ``[{"class", "instances", "sample", "covered", "left_out",
            "budget_cut", "racy", "recovery"}]`` (:meth:`~crashpoint.harness.run.point_classes.PointClass.to_dict`).
        left_out: the runs a time budget did not start, ``[{"case_id", "crash_point", "tier"}]``: neither failed
            nor passed. ``time_budget_s``: the budget (``None``: none).
    """

    subject: Any
    engine: str
    engine_version: str
    crash: str
    results: list[RunResult]
    crash_points: dict[str, list[str]]
    wall_s: float
    cases: list["Case"] = field(default_factory=list)
    crash_mode: str = "kill"
    units: dict[str, dict[str, Any]] = field(default_factory=dict)
    sampled_pairs: dict[str, dict[str, Any]] = field(default_factory=dict)
    points: str = "all"
    classes: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    left_out: list[dict[str, Any]] = field(default_factory=list)
    time_budget_s: float | None = None

    @property
    def kind(self) -> str:
        """``pack`` or ``target``."""
        return "target" if hasattr(self.subject, "entry") else "pack"

    @property
    def pack(self) -> Any:
        """The pack swept (a pack sweep's subject)."""
        return self.subject

    @property
    def target(self) -> Any:
        """The target swept (a target sweep's subject)."""
        return self.subject

    def runs_by_kind(self) -> dict[str, int]:
        """What was run: ``{"golden": N, "single": N, "double": N, "effect_fault": N}`` (``double``: more than one
        fault in one run: a kill during a recovery ``A >> B``, a second live worker, several recovering workers;
        ``effect_fault``: an effect call failed and no kill, ``"fault:E#N=OUTCOME"``)."""
        out = {"golden": 0, "single": 0, "double": 0, "effect_fault": 0}
        for r in self.results:
            kind = "golden" if r.crash_point is None else "effect_fault" if r.crash_point.startswith(FAULT_PREFIX) \
                else "double" if THEN.strip() in r.crash_point or "||" in r.crash_point else "single"
            out[kind] += 1
        return out

    def verdict(self) -> Verdict:
        """The sweep's verdict: :func:`~crashpoint.harness.model.verdicts.merge` of its runs'."""
        return merge(r.verdict for r in self.results)

    @property
    def passed(self) -> bool:
        """``True`` when the sweep is green (:func:`~crashpoint.harness.model.verdicts.is_green`): at least one run
        passed and every run that could be judged passed."""
        return is_green(r.verdict for r in self.results)

    def counts(self) -> dict[str, int]:
        """Verdict -> runs."""
        out = {str(v): 0 for v in VERDICTS}
        for r in self.results:
            out[str(r.verdict)] += 1
        return out

    def findings(self) -> dict[str, int]:
        """Rule id -> runs that it failed."""
        out: dict[str, int] = {}
        for r in self.results:
            for rule in sorted({f.rule for f in r.failures}):
                out[rule] = out.get(rule, 0) + 1
        return out


__all__ = ["VERDICTS", "Verdict", "RunResult", "SweepResult", "unit_id", "merge", "is_green"]
