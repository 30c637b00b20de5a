"""Counts and metrics of a stored run, computed from its result data alone.

A *stored run* is what :meth:`crashpoint.reports.results_store.ResultStore.load_run` returns and every
renderer takes: ``{"run": {run columns}, "results": [result dicts]}``.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

from crashpoint.text import no_surrogates

VERDICTS = ("passed", "failed", "error", "unknown", "unsupported")

#: metric name -> (label, unit): every metric of a stored run and of the weekly report.
METRICS = {
    "resume_success": ("resume success", "ratio"),
    "duplicate_event_safety": ("duplicate-event safety", "ratio"),
    "retry_success": ("retry success", "ratio"),
    "compensation_success": ("compensation success", "ratio"),
    "cancellation_correctness": ("cancellation correctness", "ratio"),
    "approval_wait_s": ("approval wait time", "virtual s"),
    "crash_points_covered": ("crash points covered", "crash points"),
}


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
#: Bidirectional controls (Trojan Source, CVE-2021-42574) and line/paragraph separators.
_BIDI = re.compile("[\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: str) -> str:
    """``text`` with every control character (C0 but tab and newline, DEL, C1) shown as ``\\xNN``,
    every bidirectional control and line/paragraph separator as ``\\uNNNN`` and every lone surrogate
    as ``\\udXXX`` (:func:`crashpoint.text.no_surrogates`), so no terminal escape sequence, NUL,
    bell or reordered text from an engine reaches a reader raw, and writing it never raises."""
    text = _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text))
    return no_surrogates(text)


def rule_of(finding: dict[str, Any]) -> str:
    """The rule id of a stored finding (``side_effects.at_most_once``); a finding stored before rule
    ids has only its oracle family, which then stands for the rule."""
    return str(finding.get("rule") or finding.get("oracle") or "?")


def counts(results: Iterable[dict[str, Any]]) -> dict[str, int]:
    """``{"runs", "passed", "failed", "error", "unknown", "unsupported", "cases"}`` over ``results``."""
    out = {"runs": 0, **{v: 0 for v in VERDICTS}}
    cases = set()
    for r in results:
        out["runs"] += 1
        out[r["verdict"]] = out.get(r["verdict"], 0) + 1
        cases.add(r["case_id"])
    out["cases"] = len(cases)
    return out


def per_case(results: Iterable[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """``{case_id: counts}`` in order of first appearance."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        groups.setdefault(r["case_id"], []).append(r)
    return {cid: counts(rows) for cid, rows in groups.items()}


def _ratio(num: int, den: int) -> float | None:
    return None if den == 0 else round(num / den, 4)


def metrics(results: Iterable[dict[str, Any]]) -> dict[str, float | None]:
    """Every metric of :data:`METRICS` from the stored ``measures`` of each result (``None`` when
    nothing measured it). Ratios in [0, 1]; ``approval_wait_s`` is the mean virtual wait in seconds;
    ``crash_points_covered`` counts distinct (case, crash point) whose kill fired, a run counted at its first kill
    (:func:`first_kill`)."""
    m = [(r, r.get("measures") or {}) for r in results]
    crashed = [(r, x) for r, x in m if x.get("crashed")]
    waits = [x["approval_wait_s"] for _, x in m if x.get("approval_wait_s") is not None]
    return {
        "resume_success": _ratio(sum(r["verdict"] == "passed" for r, _ in crashed), len(crashed)),
        "duplicate_event_safety": _ratio(sum(bool(x.get("dup_safe")) for _, x in m), sum(bool(x.get("dup")) for _, x in m)),
        "retry_success": _ratio(sum(bool(x.get("retry_ok")) for _, x in m), sum(bool(x.get("retry")) for _, x in m)),
        "compensation_success": _ratio(sum(bool(x.get("comp_ok")) for _, x in m), sum(bool(x.get("comp")) for _, x in m)),
        "cancellation_correctness": _ratio(sum(bool(x.get("cancel_ok")) for _, x in m),
                                           sum(bool(x.get("cancel")) for _, x in m)),
        "approval_wait_s": round(sum(waits) / len(waits), 3) if waits else None,
        "crash_points_covered": len({(r["case_id"], first_kill(r["crash_point"])) for r, _ in crashed
                                     if first_kill(r["crash_point"])}) if m else None,
    }


def first_kill(spec: str | None) -> str | None:
    """The crash point a run's spec kills at first: ``"A"``, ``"A >> B"``, ``"A >> 3 workers"`` and ``"A with P
    held"`` -> ``"A"``; ``"P || worker"`` and ``"fault:E#1=timeout"`` (which kill nothing), ``"none"`` and ``None`` ->
    ``None``. A point is covered once however many runs kill there, so *crash points covered* is at most 100%, as the
    terminal's (:func:`crashpoint.harness.judge.metrics.aggregate`) is."""
    if not spec or spec == "none":
        return None
    # the spec's syntax: crashpoint.harness.process.crashpoints.parse
    parts = [p.strip() for p in spec.split(" with ", 1)[0].split(">>")]
    kills = [p for p in parts if p and "||" not in p and not p.startswith("fault:")]
    return kills[0] if kills else None


def golden_points(results: Iterable[dict[str, Any]]) -> int | None:
    """Crash points the golden runs passed (the stored ``measures.golden_points``), summed; ``None``
    when no result recorded it: the denominator of *crash points covered*."""
    points = [(r.get("measures") or {}).get("golden_points") for r in results]
    known = [p for p in points if isinstance(p, int)]
    return sum(known) if known else None


def fmt_metric(name: str, value: float | None, of: int | None = None) -> str:
    """A metric value for people: ``97.5%``, ``3600 s``, ``12``, or ``n/a``. A count of crash points
    with ``of`` (the crash points there were, :func:`golden_points`) is a percentage like the
    terminal's: ``100.0% (428 of 428)``."""
    if value is None:
        return "n/a"
    unit = METRICS.get(name, ("", "ratio"))[1]
    if unit == "ratio":
        return f"{100 * value:.1f}%"
    if unit == "virtual s":
        return f"{value:g} s"
    if unit == "crash points" and of:
        return f"{100 * value / of:.1f}% ({value:g} of {of})"
    return f"{value:g}"


def run_title(run: dict[str, Any]) -> str:
    """``refunds 1.0.0 on reference 0.1.0 (crash every), run 1a2b3c4d, 2026-11-30T11:00:00+00:00``."""
    state = "" if run.get("complete") else " [INCOMPLETE: the run did not finish]"
    return (f"{run.get('pack')} {run.get('pack_version')} on {run.get('engine')} {run.get('engine_version')} "
            f"(crash {run.get('crash')}), run {str(run.get('run_id'))[:8]}, {run.get('started_at')}{state}")


def result_id(r: dict[str, Any]) -> str:
    """``case_id[golden]`` or ``case_id[kill@POINT]``: the id of one result, as pytest names it."""
    return f"{r['case_id']}[golden]" if r["crash_point"] == "none" else f"{r['case_id']}[kill@{r['crash_point']}]"


def crash_family(point: str | None) -> str:
    """The family of a crash point: its kind with any name (``before_effect:*``), ``golden`` for a run
    without a kill, and ``A >> B`` for a kill during the recovery from another (each a family)."""
    if not point or point == "none":
        return "golden"
    if " >> " in point:
        return " >> ".join(crash_family(p) for p in point.split(" >> "))
    kind, sep, _ = point.partition(":")
    return f"{kind}:*" if sep else kind.split("#")[0]


def finding_rule(r: dict[str, Any]) -> str:
    """The rule a run that did not pass broke: its first finding's ``rule`` (or ``oracle``), else its
    verdict (``error``, ``unknown``)."""
    first = (r.get("failures") or [None])[0]
    if isinstance(first, dict):
        return str(first.get("rule") or first.get("oracle") or r["verdict"])
    return str(r["verdict"])


def failure_groups(results: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs that did not pass, grouped by verdict and :func:`finding_rule`, and within a group by
    :func:`crash_family`: twelve failures of one bug are one group with its families counted, not
    twelve. Largest group first, then by verdict and rule; within a group the golden runs come first, then the
    runs in case and crash point order, so a report does not depend on the order parallel workers finished in.

    Returns:
        ``[{"verdict", "rule", "runs": [result dicts by case id, crash point], "cases": [ids],
        "families": {family: [result dicts]}}]``.
    """
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in results:
        if r["verdict"] != "passed":
            groups.setdefault((r["verdict"], finding_rule(r)), []).append(r)
    out = []
    for (verdict, rule), runs in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        # golden runs first: a golden run that fails shows the bug with no kill in the way (the group's example)
        runs = sorted(runs, key=lambda r: (crash_family(r.get("crash_point")) != "golden", r["case_id"],
                                           str(r.get("crash_point"))))
        families: dict[str, list[dict[str, Any]]] = {}
        for r in runs:
            families.setdefault(crash_family(r.get("crash_point")), []).append(r)
        out.append({"verdict": verdict, "rule": rule, "runs": runs,
                    "cases": list(dict.fromkeys(r["case_id"] for r in runs)),
                    "families": dict(sorted(families.items(), key=lambda kv: (-len(kv[1]), kv[0])))})
    return out


def group_title(g: dict[str, Any]) -> str:
    """``FAILED [side_effects]: 14 runs in 1 case, at before_checkpoint:* (4), golden (1), ...``."""
    runs, cases = len(g["runs"]), len(g["cases"])
    mark = "FAILED" if g["verdict"] == "failed" else g["verdict"].upper()
    where = ", ".join(f"{fam} ({len(rs)})" for fam, rs in g["families"].items())
    return (f"{mark} [{g['rule']}]: {runs} run{'s' * (runs != 1)} in {cases} case{'s' * (cases != 1)}, "
            f"at {where}")
