"""Terminal tables of a result document (tabulate)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from crashpoint.reports.summary import visible

MARK = {"passed": "passed", "failed": "FAILED", "error": "ERROR", "unknown": "UNKNOWN", "unsupported": "UNSUPPORTED"}


def _ratio(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def case_tables(data: dict[str, Any]) -> str:
    """One table per case: a row per run (golden first, then each crash point)."""
    blocks = []
    for case_id, info in data["per_case"].items():
        rows = []
        for r in data["results"]:
            if r["case_id"] != case_id:
                continue
            first = r["failures"][0] if r["failures"] else None
            detail = f"[{first['oracle']}] {first['message']}" if first else (r["error"] or "")
            rows.append([f"kill@{r['crash_point']}" if r["crash_point"] != "none" else "golden (no kill)",
                         MARK[r["verdict"]], r["final_status"] or "-", f"{r['wall_s']:.2f}", detail[:100]])
        head = (f"{case_id}: {info['passed']}/{info['runs']} passed, {info['crash_points']} crash points")
        blocks.append(head + "\n" + tabulate(rows, headers=["run", "verdict", "final status", "wall s", "detail"]))
    return visible("\n\n".join(blocks))


def failures(data: dict[str, Any]) -> str:
    """Every run that did not pass, with each oracle finding and its evidence."""
    lines = []
    for r in data["results"]:
        if r["verdict"] == "passed":
            continue
        lines.append(f"{MARK[r['verdict']]} {r['case_id']}[kill@{r['crash_point']}]")
        if r["error"]:
            lines.append(f"    error: {r['error']}")
        for f in r["failures"]:
            lines.append(f"    [{f['oracle']}] {f['message']}")
            lines.extend(f"        {e}" for e in f["evidence"][:6])
        if r.get("reproduce"):
            lines.append(f"    reproduce: {r['reproduce']}")
    return visible("\n".join(lines))


def coverage(data: dict[str, Any]) -> str:
    """The durability-coverage matrix: a row per workflow step, a column per fault kind, cells ``passed/runs``."""
    cells = data.get("coverage") or {}
    kinds = sorted({k for row in cells.values() for k in row})
    rows = [[step] + [f"{row[k]['passed']}/{row[k]['runs']}" if k in row else "-" for k in kinds]
            for step, row in sorted(cells.items())]
    head = ["step"] + [k.replace("kill@", "kill ").replace("_", " ") for k in kinds]
    lines = ["durability coverage (passed/runs; - = not covered)", tabulate(rows, headers=head)]
    vac = data.get("vacuity") or {}
    if vac.get("findings"):
        lines.append(f"vacuity: {vac['runs_with_findings']} run(s) with faults or events that did nothing:")
        lines.extend(f"  - {f}" for f in vac["findings"][:10])
    return "\n".join(lines)


def summary(data: dict[str, Any]) -> str:
    """The summary block: counts, crash points, metrics, wall time."""
    s = data["summary"]
    rows = [["engine", f"{data['engine']['name']} {data['engine']['version']}"],
            ["pack", f"{data['pack']['name']} {data['pack']['version']}"],
            ["cases", s["cases"]], ["crash points", s["crash_points"]],
            ["recovery pairs", s.get("recovery_pairs", 0)], ["runs", s["runs"]],
            ["passed", s["passed"]], ["failed", s["failed"]], ["errors", s["errors"]], ["unknown", s["unknown"]]]
    if s.get("unsupported"):
        rows.append(["unsupported", s["unsupported"]])
    rows += [[name.replace("_", " "), _ratio(value)] for name, value in s["metrics"].items()]
    rows.append(["wall time", f"{data['wall_s']:.1f} s"])
    return tabulate(rows, tablefmt="simple", headers=["summary", ""])
