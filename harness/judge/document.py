"""The result data of a sweep: the one JSON-able document every report renders.

Shape (stable; README "The JSON report")::

    {"format": "crashpoint.results/1", "crashpoint_version", "created_at" (ISO 8601 UTC),
     "engine": {"name", "version"}, "pack": {"name", "version", "path"}, "crash": "every"|"none",
     "wall_s",
     "summary": {"cases", "runs", "passed", "failed", "errors", "unknown", "unsupported", "crash_points",
                 "recovery_pairs", "kills_verified", "metrics": {metric: ratio|null}},
     "per_case": {case_id: {"runs", "passed", "failed", "errors", "unknown", "unsupported", "crash_points",
                            "recovery_pairs", "metrics": {...}}},

``summary.sampled_pairs`` counts the recovery pairs ``--crash sampled`` picked (``{"sampled", "reached", "replaced",
"not_reached"}``) and top-level ``"sampled_pairs"`` names them per unit (``{"sampled", "reached", "replaced": [{"pair",
"by", "tries"}], "not_reached": [{"first", "tried"}]}``): a pair whose second kill a run did not reach is run again
at another point of its recovery (or retried), never an ``error``; one that no try reached is left out of
``results``.

plus ``"coverage"``: ``{step: {fault kind: {"runs", "passed", "failed"}}}`` (the durability-coverage
matrix) and ``"vacuity"``: ``{"runs_with_findings", "findings"}``; each result also has ``"vacuity"``.

``"points"`` is ``classes`` (the single kills were a sample of each crash-point class) or ``all``; ``"classes"``:
``{case_id: [{"class", "instances", "sample", "covered", "left_out", "budget_cut", "racy", "recovery"}]}`` (every
class of the unit's golden run: the instances a sampled sweep kills at, those this sweep killed at, those it did
not, those a time budget cut); ``"budget"``: see
:func:`budget_data` (a run a budget left out is listed there, never in ``results``: neither failed nor passed).

``crash_point`` of a result is ``"none"`` (golden run), an id, or ``"A >> B"`` (killed at ``A``,
then at ``B`` during the recovery).
     "results": [{"case_id", "crash_point", "verdict", "failures": [{"oracle", "message",
                  "evidence"}], "error", "final_status", "stop_reason", "crash_fired",
                  "workers", "kills", "kill_log", "kill_problems", "notes", "wall_s", "reproduce"?}]}

``kill_log`` holds the run's verified kills, each ``{"worker", "pid", "signal" ("SIGKILL" | "simulated"),
"crash_point", "resumed_by"}``; ``kill_problems`` why a kill did not land (the run is then ``error``);
``crash_fired`` is true only when every kill of the run's schedule is verified, and ``kills_verified``
counts those crash runs (see :mod:`crashpoint.harness.process.kills`).

``reproduce`` (added by the CLI for runs that did not pass) is the one-line command that
re-runs that case at that crash point.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timezone
from typing import Any

from crashpoint import __version__
from crashpoint.harness.judge.coverage import matrix
from crashpoint.harness.process.crashpoints import THEN
from crashpoint.harness.judge.metrics import aggregate
from crashpoint.harness.model.results import SweepResult

FORMAT = "crashpoint.results/1"


def _counts(verdicts: Counter[str]) -> dict[str, int]:
    return {"runs": sum(verdicts.values()), "passed": verdicts["passed"], "failed": verdicts["failed"],
            "errors": verdicts["error"], "unknown": verdicts["unknown"], "unsupported": verdicts["unsupported"]}


def subject_of(result: SweepResult) -> dict[str, Any]:
    """``{"kind", "name", "version", "path"}`` of what a sweep ran: a pack (its name, version and folder) or a
    target (its name, the digest of its file's contents as its version, and the file)."""
    subject = result.subject
    where = subject.file if result.kind == "target" else subject.root
    return {"kind": result.kind, "name": subject.name, "version": subject.version,
            "path": str(where) if where else None}


def _units(result: SweepResult) -> dict[str, dict[str, Any]]:
    """unit -> ``{"events", "workflow", "faults"}`` for the coverage matrix (a pack's from its cases)."""
    if result.units:
        return result.units
    return {c.case_id: {"case": c.case_id, "variant": None, "events": c.events, "faults": c.faults,
                        "workflow": result.subject.workflows[c.workflow]} for c in result.cases}


def pair_summary(pairs: dict[str, dict[str, Any]]) -> dict[str, int]:
    """``{"sampled", "reached", "replaced", "not_reached"}``: the recovery pairs ``--crash sampled`` picked, summed over
    units (:attr:`~crashpoint.harness.model.results.SweepResult.sampled_pairs`); ``replaced``: reached at another
    second point, or on a later try, than the first pick."""
    return {"sampled": sum(p["sampled"] for p in pairs.values()), "reached": sum(p["reached"] for p in pairs.values()),
            "replaced": sum(len(p["replaced"]) for p in pairs.values()),
            "not_reached": sum(len(p["not_reached"]) for p in pairs.values())}


def sweep_data(result: SweepResult) -> dict[str, Any]:
    """Build the result document of a sweep, of a pack or of a target (see the module docstring)."""
    metrics = aggregate(result.results)
    per_case: dict[str, Any] = {}
    for case_id, points in result.crash_points.items():
        verdicts = Counter(r.verdict for r in result.results if r.case_id == case_id)
        pairs = sum(1 for r in result.results if r.case_id == case_id and r.crash_point
                    and THEN in r.crash_point)
        per_case[case_id] = _counts(verdicts) | {"crash_points": len(points), "recovery_pairs": pairs,
                                                 "metrics": metrics["per_case"].get(case_id, {})}
    verdicts = Counter(r.verdict for r in result.results)
    units = _units(result)
    unit = {cid: units.get(cid) or {"events": [], "faults": [], "workflow": None} for cid in per_case}
    subject = subject_of(result)
    return {
        "format": FORMAT,
        "crashpoint_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": {"name": result.engine, "version": result.engine_version},
        "subject": subject,
        "pack": {k: subject[k] for k in ("name", "version", "path")},
        "crash": result.crash,
        "crash_mode": result.crash_mode,
        "wall_s": round(result.wall_s, 3),
        "summary": {"cases": len(result.crash_points)} | _counts(verdicts) | {
            "crash_points": sum(len(p) for p in result.crash_points.values()),
            "recovery_pairs": sum(c["recovery_pairs"] for c in per_case.values()),
            "kills_verified": sum(1 for r in result.results if r.crash_point and r.crash_fired),
            "runs_by_kind": result.runs_by_kind(),
            "sampled_pairs": pair_summary(result.sampled_pairs),
            "findings": result.findings(),
            "metrics": metrics["overall"]},
        "per_case": per_case,
        "sampled_pairs": {u: result.sampled_pairs[u] for u in sorted(result.sampled_pairs)},
        "results": (rows := [r.to_dict() for r in result.results]),
        "coverage": matrix(rows, {c: unit[c]["events"] for c in per_case}, {c: unit[c]["workflow"] for c in per_case},
                           {c: unit[c]["faults"] for c in per_case}),
        "vacuity": {"runs_with_findings": sum(1 for r in rows if r["vacuity"]),
                    "findings": sorted({f for r in rows for f in r["vacuity"]})},
        "points": result.points,
        "classes": result.classes,
        "budget": budget_data(result),
    }


def budget_data(result: SweepResult) -> dict[str, Any]:
    """``{"seconds", "left_out": [{"case_id", "crash_point", "tier"}], "left_out_by_tier": {tier: N},
    "crash_runs_started", "only_golden"}``: what a time budget let run (``seconds`` ``None``: no budget, nothing left
    out). ``only_golden``: the budget cut every crash run (the sweep tested the golden runs only)."""
    started = sum(1 for r in result.results if r.crash_point is not None)
    tiers = Counter(r["tier"] for r in result.left_out)
    return {"seconds": result.time_budget_s, "left_out": list(result.left_out), "left_out_by_tier": dict(tiers),
            "crash_runs_started": started, "only_golden": bool(result.left_out) and started == 0}
