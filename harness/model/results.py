"""The verdict on runs, as data: one run's :class:`RunResult` (a pack's) and :class:`TargetRunResult` (a target's),
and a whole sweep's :class:`SweepResult` and :class:`TargetSweep`. Every front end and report reads these.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from crashpoint.harness.model.outcomes import RunOutcome, TargetOutcome
from crashpoint.harness.model.points import THEN
from crashpoint.harness.model.rules import Finding

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.loader import Case, Pack
    from crashpoint.harness.load.target import Target

#: The verdicts a run can get (README "Oracle rules and the verdict").
VERDICTS = ("passed", "failed", "error", "unknown", "unsupported")


@dataclass
class RunResult:
    """The verdict on one run: the one result record every front end and report uses.

    Attributes:
        case_id: the case. ``crash_point``: the crash point id, or ``None`` for the golden run.
        verdict: ``passed`` | ``failed`` | ``error`` (the harness or the engine broke, or nothing was
            tested) | ``unknown`` (a worker neither finished nor crashed in time, or a rule could not
            decide; never counts as passed) | ``unsupported`` (the case needs a feature the adapter
            declares its engine lacks, named in ``error``: not run, never counts as passed; see
            :func:`unsupported`).
        failures: rule findings (empty when passed), each with its rule id.
        error: the error text for ``error``/``unknown``.
        vacuity: faults scheduled that never fired, work that never happened (see
            :mod:`crashpoint.harness.judge.coverage`).
        outcome: the run's outcome (``None`` when the run could not produce one).
        wall_s: wall seconds of the run (and its judging).
        rules_unknown: ids of the rules that raised instead of judging.
        reproduce: the command that re-runs it (:func:`repro_command`; runs that did not pass).
        measures: the per-run metric inputs (:func:`crashpoint.harness.judge.record.measures`), kept
            so that restored results count in metrics as they did when they ran.
    """

    case_id: str
    crash_point: str | None
    verdict: str
    failures: list[Finding] = field(default_factory=list)
    error: str | None = None
    outcome: "RunOutcome | None" = None
    wall_s: float = 0.0
    vacuity: list[str] = field(default_factory=list)
    rules_unknown: list[str] = field(default_factory=list)
    reproduce: str | None = None
    measures: dict[str, Any] | None = None

    @property
    def rules(self) -> list[str]:
        """The rule ids of the findings, each once, in order."""
        return list(dict.fromkeys(f.rule for f in self.failures))

    def to_dict(self) -> dict[str, Any]:
        """JSON form (see README, "The JSON report"); ``reproduce`` only when set; every string bounded
        by :func:`crashpoint.text.bounded` (an engine's 20 MB stop reason is kept as its first
        :data:`crashpoint.text.MAX_TEXT` characters)."""
        from crashpoint.text import bounded

        out = self.outcome
        data = {
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
            "kill_log": [dict(k) for k in out.kill_log] if out else [],
            "kill_problems": list(out.kill_problems) if out else [],
            "notes": out.notes if out else [],
            "vacuity": list(self.vacuity),
            "wall_s": round(self.wall_s, 3),
        }
        if self.rules_unknown:
            data["rules_unknown"] = list(self.rules_unknown)
        if self.reproduce:
            data["reproduce"] = self.reproduce
        return bounded(data)


@dataclass
class TargetRunResult:
    """The verdict on one run (see the module docstring). ``outcome`` is dropped for passed runs of a big sweep.
    ``kill_log``: the verified kills (``{"worker", "pid", "signal", "crash_point", "resumed_by"}``)."""

    case: str
    durability: str
    crash_point: str | None
    repeat: int
    verdict: str
    failures: list[Finding] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    error: str | None = None
    kills: int = 0
    workers: int = 0
    pids: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    outcome: TargetOutcome | None = None
    kill_log: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"case": self.case, "durability": self.durability, "crash_point": self.crash_point or "none",
                "repeat": self.repeat, "verdict": self.verdict, "failures": [f.to_dict() for f in self.failures],
                "unknown": self.unknown, "error": self.error, "kills": self.kills, "workers": self.workers,
                "pids": self.pids, "kill_log": self.kill_log, "notes": self.notes, "wall_s": round(self.wall_s, 3)}

    def repro(self, target: Target) -> str:
        """The command that runs this run alone, every word quoted for a POSIX shell."""
        where = str(target.file or "TARGET.yaml")
        cp = ["--crash-point", self.crash_point] if self.crash_point else ["--crash", "none"]
        return shlex.join(["crashpoint", "run", where, "--case", str(self.case), "--durability", str(self.durability),
                           *cp])


@dataclass
class TargetSweep:
    """All runs of a target's sweep. ``crash_points``: (case, durability) -> the golden run's crash point ids."""

    target: Target
    results: list[TargetRunResult]
    crash_points: dict[tuple[str, str], list[str]]
    wall_s: float
    engine_version: str = ""
    crash: str = "every"

    def runs_by_kind(self) -> dict[str, int]:
        """What was run: ``{"golden": N, "single": N, "double": N}`` (``double``: a kill during a recovery, ``A >> B``)."""
        out = {"golden": 0, "single": 0, "double": 0}
        for r in self.results:
            kind = "golden" if r.crash_point is None else ("double" if THEN.strip() in r.crash_point
                                                            else "single")
            out[kind] += 1
        return out

    @property
    def passed(self) -> bool:
        """``True`` when every run passed (``unsupported`` runs aside, and at least one passed)."""
        judged = [r for r in self.results if r.verdict != "unsupported"]
        return bool(judged) and all(r.verdict == "passed" for r in judged)

    def counts(self) -> dict[str, int]:
        """Verdict -> runs."""
        out = {v: 0 for v in ("passed", "failed", "error", "unknown", "unsupported")}
        for r in self.results:
            out[r.verdict] += 1
        return out

    def findings(self) -> dict[str, int]:
        """Rule id -> runs that it failed."""
        out: dict[str, int] = {}
        for r in self.results:
            for rule in sorted({f.rule for f in r.failures}):
                out[rule] = out.get(rule, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON form of the whole sweep."""
        return {"target": self.target.name, "engine": self.target.engine, "engine_version": self.engine_version,
                "crash": self.crash, "runs_by_kind": self.runs_by_kind(),
                "wall_s": round(self.wall_s, 3), "counts": self.counts(), "findings": self.findings(),
                "crash_points": {f"{c}/{d}": pts for (c, d), pts in self.crash_points.items()},
                "runs": [r.to_dict() | {"repro": r.repro(self.target)} for r in self.results]}


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
    crash_mode: str = "kill"


__all__ = ["VERDICTS", "RunResult", "TargetRunResult", "TargetSweep", "SweepResult"]
