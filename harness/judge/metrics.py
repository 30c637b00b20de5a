"""Metrics aggregated per case and overall, from run results only.

Definitions (each a ratio in [0, 1], ``None`` when nothing was measured):

* ``resume_success``: crashed runs (the kill fired) that passed / crashed runs.
* ``duplicate_event_safety``: runs with a duplicate delivery and no duplicated effect /
  runs with a duplicate delivery.
* ``retry_success``: runs with a ``retry_scheduled`` event whose retried task later
  returned ``ok`` / runs with a retry.
* ``compensation_success``: runs with a ``compensation_required``/``compensating`` move
  whose compensations all succeeded / such runs.
* ``crash_points_covered``: distinct crash points whose run fired the kill / crash points the
  golden runs passed (a ``--crash-point`` selection covers only part of them).

Source: the measures named by the durable-workflows seed ("tasa de éxito al reanudar,
seguridad ante eventos duplicados, éxito de retries, éxito de compensaciones").
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable

from crashpoint.harness.judge.pack_rules import DUPLICATE_RULES
from crashpoint.harness.process.crashpoints import parse

if TYPE_CHECKING:
    import pandas as pd

    from crashpoint.harness.model.results import RunResult


def _duplicates_sent(out: Any) -> int:
    """Events a run delivered more than once: a pack run's count, or a target run's duplicated requests."""
    if out is None:
        return 0
    if isinstance(out.deliveries, dict):
        return out.deliveries["duplicates_sent"]
    return sum(1 for d in out.deliveries if str(d.get("kind", "")).startswith("duplicate_"))


def _row(r: "RunResult") -> dict[str, Any]:
    out = r.outcome
    trace = getattr(out, "trace", None) or []  # a target's run has no engine trace
    retried = {e["task"] for e in trace if e["kind"] == "retry_scheduled"}
    recovered = {e["task"] for e in trace if e["kind"] == "tool_result" and e.get("ok")}
    compensating = any(e["kind"] == "transition" and e["to"] == "compensating" for e in trace)
    comp_ok = compensating and all(e.get("ok") for e in trace if e["kind"] == "compensation_result") and \
        out is not None and out.status in ("failed", "cancelled") and "compensation of" not in (out.stop_reason or "")
    dup_sent = _duplicates_sent(out)
    dup_effect = any(f.rule in DUPLICATE_RULES for f in r.failures)
    return {
        "case_id": r.case_id,
        "point": r.crash_point,
        "crashed": bool(r.crash_point and r.crash_fired),
        "is_crash_run": r.crash_point is not None,
        "passed": r.verdict == "passed",
        "dup": dup_sent > 0,
        "dup_safe": dup_sent > 0 and not dup_effect,
        "retry": bool(retried),
        "retry_ok": bool(retried) and retried <= recovered,
        "comp": compensating,
        "comp_ok": bool(comp_ok),
        "golden_points": len(out.crash_points) if (out and r.crash_point is None) else 0,
    }


def run_row(r: "RunResult") -> dict[str, Any]:
    """The per-run inputs of the metrics: ``{"case_id", "point", "crashed", "is_crash_run", "passed",
    "dup", "dup_safe", "retry", "retry_ok", "comp", "comp_ok", "golden_points"}`` (booleans, one int).
    The results store keeps them with each result, so trends over weeks use the same definitions."""
    return _row(r)


#: The per-run inputs a result's stored ``measures`` carry (see :mod:`crashpoint.harness.judge.record`).
MEASURED = ("crashed", "dup", "dup_safe", "retry", "retry_ok", "comp", "comp_ok", "golden_points")


def _stored_row(r: "RunResult") -> dict[str, Any]:
    """The row of a result from the measures it carries (a result restored from the store, whose
    outcome is gone, counts as it did when it ran); from its outcome when it carries none."""
    measures = r.measures
    if not measures or any(k not in measures for k in MEASURED):
        return _row(r)
    row = {k: bool(measures[k]) for k in MEASURED if k != "golden_points"}
    return {"case_id": r.case_id, "point": r.crash_point, "is_crash_run": r.crash_point is not None,
            "passed": r.verdict == "passed", **row, "golden_points": int(measures["golden_points"] or 0)}


def _first_kill(spec: str | None) -> str | None:
    """The crash point a run's spec kills at first (``"A >> B"``, ``"A >> 3 workers"`` -> ``"A"``;
    ``"P || worker"``, which kills nothing, -> ``None``): a point is covered once however many runs
    kill there."""
    kills = parse(spec).kills
    return kills[0] if kills else None


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else round(num / den, 4)


def _metrics(df: pd.DataFrame) -> dict[str, float | None]:
    crashed = df[df.crashed]
    return {
        "resume_success": _ratio(int(crashed.passed.sum()), len(crashed)),
        "duplicate_event_safety": _ratio(int(df.dup_safe.sum()), int(df.dup.sum())),
        "retry_success": _ratio(int(df.retry_ok.sum()), int(df.retry.sum())),
        "compensation_success": _ratio(int(df.comp_ok.sum()), int(df.comp.sum())),
        "crash_points_covered": _ratio(crashed.assign(point=crashed.point.map(_first_kill)).dropna(subset=["point"])
                                       .drop_duplicates(["case_id", "point"]).shape[0],
                                       int(df.golden_points.sum())),
    }


def aggregate(results: Iterable["RunResult"]) -> dict[str, Any]:
    """``{"overall": {metric: ratio}, "per_case": {case_id: {metric: ratio}}}`` (pandas group-by), from
    each result's measures (restored results included)."""
    import pandas as pd  # here, not at the top: importing pandas takes about 1 s, and every run's judge imports this

    df = pd.DataFrame([_stored_row(r) for r in results])
    if df.empty:
        return {"overall": {}, "per_case": {}}
    return {"overall": _metrics(df),
            "per_case": {cid: _metrics(group) for cid, group in df.groupby("case_id", sort=True)}}
