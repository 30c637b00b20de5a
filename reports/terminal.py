"""Terminal tables of a result document (tabulate)."""

from __future__ import annotations

from typing import Any

from tabulate import tabulate

from crashpoint.reports.summary import failure_groups, group_title, result_id, rule_of, visible

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
            detail = f"[{rule_of(first)}] {first['message']}" if first else (r["error"] or "")
            rows.append([f"kill@{r['crash_point']}" if r["crash_point"] != "none" else "golden (no kill)",
                         MARK[r["verdict"]], r["final_status"] or "-", f"{r['wall_s']:.2f}", detail[:100]])
        head = (f"{case_id}: {info['passed']}/{info['runs']} passed, {info['crash_points']} crash points")
        blocks.append(head + "\n" + tabulate(rows, headers=["run", "verdict", "final status", "wall s", "detail"]))
    return visible("\n\n".join(blocks))


#: Other runs of a failure group named by id after its first, at most.
MAX_ALSO = 10


def _run_detail(r: dict[str, Any], indent: str) -> list[str]:
    lines = [f"{indent}{MARK[r['verdict']]} {result_id(r)}: final status {r.get('final_status') or '-'}"]
    if r["error"]:
        lines.append(f"{indent}    error: {r['error']}")
    for f in r["failures"]:
        lines.append(f"{indent}    [{rule_of(f)}] {f['message']}")
        lines.extend(f"{indent}        {e}" for e in f["evidence"][:6])
    if r.get("reproduce"):
        lines.append(f"{indent}    reproduce: {r['reproduce']}")
    return lines


def failures(data: dict[str, Any]) -> str:
    """The runs that did not pass, grouped by rule and crash-point family
    (:func:`~crashpoint.reports.summary.failure_groups`): each group's title, its first run with every
    finding, evidence and reproduce command, then the other runs by id."""
    lines = []
    for g in failure_groups(data["results"]):
        lines.append(group_title(g))
        lines.extend(_run_detail(g["runs"][0], "    "))
        rest = g["runs"][1:]
        if rest:
            named = ", ".join(result_id(r) for r in rest[:MAX_ALSO])
            more = f", and {len(rest) - MAX_ALSO} more" if len(rest) > MAX_ALSO else ""
            lines.append(f"    same in: {named}{more}")
            shown = {rule_of(f) for f in g["runs"][0]["failures"]}
            others: dict[str, int] = {}
            for r in rest:  # rules the example above does not show: each run's other findings
                for rule in dict.fromkeys(rule_of(f) for f in r["failures"]):
                    if rule not in shown:
                        others[rule] = others.get(rule, 0) + 1
            if others:
                lines.append("    these runs also failed: " + ", ".join(f"[{k}] ({n})" for k, n in sorted(others.items())))
    return visible("\n".join(lines))


def cases_table(data: dict[str, Any]) -> str:
    """One row per case: its runs by verdict and its crash points (the default view of a sweep; the
    per-run tables of :func:`case_tables` are ``crashpoint run -v``)."""
    rows = [[case_id, info["runs"], info["passed"], info["failed"], info["errors"], info["unknown"],
             info["crash_points"]] for case_id, info in data["per_case"].items()]
    return visible(tabulate(rows, headers=["case", "runs", "passed", "failed", "errors", "unknown", "crash points"]))


#: Columns a terminal table may take (``crashpoint run``'s output; a wider table wraps into parts).
WIDTH = 120


def _width(table: str) -> int:
    return max((len(line) for line in table.splitlines()), default=0)


def _column_parts(rows: list[list[str]], head: list[str], width: int) -> list[str]:
    """``tabulate(rows, head)`` cut into tables of at most ``width`` columns: the first column (the row names) in
    each, then as many of the other columns, in order, as fit (one at least, however wide)."""
    parts, cols = [], list(range(1, len(head)))
    while cols:
        take = 1
        while take < len(cols):
            keep = [0, *cols[:take + 1]]
            if _width(tabulate([[r[i] for i in keep] for r in rows], headers=[head[i] for i in keep])) > width:
                break
            take += 1
        keep = [0, *cols[:take]]
        parts.append(tabulate([[r[i] for i in keep] for r in rows], headers=[head[i] for i in keep]))
        cols = cols[take:]
    return parts or [tabulate(rows, headers=head[:1])]


def coverage(data: dict[str, Any], width: int = WIDTH) -> str:
    """The durability-coverage matrix: a row per workflow step, a column per fault kind, cells ``passed/runs``.

    Headers are folded a word a line and a matrix wider than ``width`` columns (120 by default: 15 fault kinds made
    260) is printed as several tables, each with the step column and the next fault kinds that fit."""
    cells = data.get("coverage") or {}
    kinds = sorted({k for row in cells.values() for k in row})
    rows = [[step] + [f"{row[k]['passed']}/{row[k]['runs']}" if k in row else "-" for k in kinds]
            for step, row in sorted(cells.items())]
    head = ["step"] + [k.replace("kill@", "kill ").replace("_", " ").replace(" ", "\n") for k in kinds]
    lines = (["durability coverage (passed/runs; - = not covered)", "\n\n".join(_column_parts(rows, head, width))]
             if rows else ["durability coverage: no fault ran (golden runs only)"])
    vac = data.get("vacuity") or {}
    if vac.get("findings"):
        lines.append(f"vacuity: {vac['runs_with_findings']} run(s) with faults or events that did nothing:")
        lines.extend(f"  - {f}" for f in vac["findings"][:10])
    return visible("\n".join(lines))


def _kinds(s: dict[str, Any]) -> str:
    """What ran, from ``runs_by_kind``: ``1 golden, 47 single kill(s), 2 during a recovery``."""
    kinds = s.get("runs_by_kind") or {}
    return (f"{kinds.get('golden', 0)} golden, {kinds.get('single', 0)} single kill(s), "
            f"{kinds.get('double', 0)} during a recovery or with another worker"
            + (f", {kinds['effect_fault']} with an effect call failed" if kinds.get("effect_fault") else ""))


def _sampled_row(pairs: dict[str, int] | None) -> list[list[Any]]:
    """The summary row of the recovery pairs ``--crash sampled`` picked (none when it picked none)."""
    if not pairs or not pairs.get("sampled"):
        return []
    text = f"{pairs['reached']} of {pairs['sampled']} reached"
    if pairs.get("replaced"):
        text += f" ({pairs['replaced']} at another point or try)"
    if pairs.get("not_reached"):
        text += f", {pairs['not_reached']} not reached (left out)"
    return [["sampled pairs", text]]


def unreached_pairs(data: dict[str, Any]) -> list[str]:
    """One line per recovery pair ``--crash sampled`` picked that no try reached (left out of the results, never an
    error): the unit, its first kill and the second kills tried."""
    return [f"sampled pair not reached in {len(p['tried'])} tries, left out: {unit}: {p['first']} >> "
            f"{' | '.join(p['tried'])} (a correct recovery took another path; the single kill at {p['first']} "
            "was run and judged)"
            for unit, cover in (data.get("sampled_pairs") or {}).items() for p in cover.get("not_reached", [])]


def engine_label(name: str, version: str) -> str:
    """The summary's engine cell: ``name version``, or the version alone where it names the engine's packages
    already (a target's ``langgraph 1.2.24, langgraph-checkpoint 4.3.2``; ``temporalio 1.35.0`` for ``temporal``)."""
    return version if name and version.split(" ", 1)[0].startswith(name) else f"{name} {version}"


def summary(data: dict[str, Any]) -> str:
    """The summary block: counts, crash points, metrics, wall time."""
    s = data["summary"]
    rows = [["engine", engine_label(data["engine"]["name"], str(data["engine"]["version"]))],
            [(data.get("subject") or {}).get("kind", "pack"), f"{data['pack']['name']} {data['pack']['version']}"],
            ["cases", s["cases"]], ["crash points", s["crash_points"]],
            ["verified kills", s.get("kills_verified", 0)],
            ["recovery pairs", s.get("recovery_pairs", 0)], *_sampled_row(s.get("sampled_pairs")), ["runs", s["runs"]],
            ["runs by kind", _kinds(s)],
            ["passed", s["passed"]], ["failed", s["failed"]], ["errors", s["errors"]], ["unknown", s["unknown"]]]
    if s.get("unsupported"):
        rows.append(["unsupported", s["unsupported"]])
    rows += [[name.replace("_", " "), _ratio(value)] for name, value in s["metrics"].items()]
    rows.append(["wall time", f"{data['wall_s']:.1f} s"])
    return visible(tabulate(rows, tablefmt="simple", headers=["summary", ""]))


def sampling(data: dict[str, Any]) -> list[str]:
    """The lines that say what a sweep left out: its crash-point classes (how many, how many instances were killed at,
    how many not), when a class has more than one instance; and a time budget's cut (what did not start, by tier),
    saying so plainly when only the golden runs ran. ``[]`` when nothing was left out."""
    lines = []
    found = [c for per in (data.get("classes") or {}).values() for c in per]
    if any(c["instances"] > 1 for c in found):
        instances = sum(c["instances"] for c in found)
        cut = sum(len(c["budget_cut"]) for c in found)
        if data.get("points") == "classes":
            sampled = sum(len(c["sample"]) for c in found)
            line = (f"crash-point classes: {len(found)} classes of {instances} crash points; {sampled} sampled (one "
                    f"instance of each class, two of a racy or recovery class), {instances - sampled} not "
                    "(--points all kills at every one)")
        else:
            line = f"crash-point classes: {len(found)} classes of {instances} crash points; every one sampled"
        lines.append(line + (f"; {cut} of them cut by the time budget" if cut else ""))
    budget = data.get("budget") or {}
    if budget.get("left_out"):
        tiers = ", ".join(f"{n} {tier}" for tier, n in budget["left_out_by_tier"].items())
        if budget.get("only_golden"):
            lines.append(f"time budget {budget['seconds']:g} s: only the golden runs ran; no crash run fit, so no crash "
                         f"was tested: {len(budget['left_out'])} run(s) left out ({tiers}); neither failed nor passed")
        else:
            lines.append(f"time budget {budget['seconds']:g} s: {budget['crash_runs_started']} crash run(s) ran, "
                         f"{len(budget['left_out'])} left out ({tiers}): neither failed nor passed (the JSON's "
                         "budget.left_out lists them)")
    return [visible(line) for line in lines]
