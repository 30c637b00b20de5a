"""The result data of a sweep: the one JSON-able document every report renders.

Shape (stable; README "The JSON report")::

    {"format": "crashpoint.results/1", "crashpoint_version", "created_at" (ISO 8601 UTC),
     "engine": {"name", "version"}, "pack": {"name", "version", "path"}, "crash": "every"|"none",
     "wall_s",
     "summary": {"cases", "runs", "passed", "failed", "errors", "unknown", "unsupported", "crash_points",
                 "recovery_pairs", "kills_verified", "metrics": {metric: ratio|null}},
     "per_case": {case_id: {"runs", "passed", "failed", "errors", "unknown", "unsupported", "crash_points",
                            "recovery_pairs", "metrics": {...}}},

plus ``"coverage"``: ``{step: {fault kind: {"runs", "passed", "failed"}}}`` (the durability-coverage
matrix) and ``"vacuity"``: ``{"runs_with_findings", "findings"}``; each result also has ``"vacuity"``.

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


def sweep_data(result: SweepResult) -> dict[str, Any]:
    """Build the result document of a sweep (see the module docstring)."""
    metrics = aggregate(result.results)
    per_case: dict[str, Any] = {}
    for case_id, points in result.crash_points.items():
        verdicts = Counter(r.verdict for r in result.results if r.case_id == case_id)
        pairs = sum(1 for r in result.results if r.case_id == case_id and r.crash_point
                    and THEN in r.crash_point)
        per_case[case_id] = _counts(verdicts) | {"crash_points": len(points), "recovery_pairs": pairs,
                                                 "metrics": metrics["per_case"].get(case_id, {})}
    verdicts = Counter(r.verdict for r in result.results)
    cases = {c.case_id: c for c in result.cases}
    events_of = {cid: cases[cid].events if cid in cases else [] for cid in per_case}
    workflows_of = {cid: result.pack.workflows[cases[cid].workflow] if cid in cases else {"phases": []}
                    for cid in per_case}
    return {
        "format": FORMAT,
        "crashpoint_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "engine": {"name": result.engine, "version": result.engine_version},
        "pack": {"name": result.pack.name, "version": result.pack.version, "path": str(result.pack.root)},
        "crash": result.crash,
        "crash_mode": result.crash_mode,
        "wall_s": round(result.wall_s, 3),
        "summary": {"cases": len(result.crash_points)} | _counts(verdicts) | {
            "crash_points": sum(len(p) for p in result.crash_points.values()),
            "recovery_pairs": sum(c["recovery_pairs"] for c in per_case.values()),
            "kills_verified": sum(1 for r in result.results if r.crash_point and r.outcome and r.outcome.crash_fired),
            "metrics": metrics["overall"]},
        "per_case": per_case,
        "results": (rows := [r.to_dict() for r in result.results]),
        "coverage": matrix(rows, {c: events_of[c] for c in per_case}, {c: workflows_of[c] for c in per_case},
                           {c: cases[c].faults if c in cases else [] for c in per_case}),
        "vacuity": {"runs_with_findings": sum(1 for r in rows if r["vacuity"]),
                    "findings": sorted({f for r in rows for f in r["vacuity"]})},
    }
