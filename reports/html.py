"""One self-contained HTML file for a stored run: no script, no external resource.

Sections: the summary (run info, runs by verdict), the metrics, charts (runs by verdict per case,
the ratio metrics; base64 PNG images from :mod:`crashpoint.reports.charts`), the per-case table,
the durability-coverage matrix (step x fault kind, ``passed/runs``; recorded when the run
finished), and the runs that did not pass grouped by rule and crash-point family: each group's first
run with its findings, its reproduce command and its **timeline**, the others a row each. The
timeline is: the external deliveries and kills, then the trace events with virtual time since the
first event. Every string from a case, an engine or a trace goes through :func:`html.escape`; a
Content-Security-Policy forbids scripts as a second line of defence.
"""

from __future__ import annotations

import html
from typing import Any

from crashpoint.reports import charts
from crashpoint.text import MAX_TEXT, clip
from crashpoint.reports.summary import (METRICS, counts, failure_groups, fmt_metric, golden_points, group_title,
                                       metrics, per_case, result_id, run_title, visible)

#: Failure groups whose first run is shown with a timeline (:func:`~crashpoint.reports.summary.failure_groups`;
#: the other runs of a group are a table row each, never a timeline).
MAX_TIMELINES = 50

STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px}
table{border-collapse:collapse;margin:.5em 0 1.2em}th,td{border:1px solid #ccc;padding:2px 6px;font-size:13px}
th{background:#f3f3f3;text-align:left}td.n{text-align:right}.passed{color:#2e7d32}.failed{color:#c62828}
.error{color:#ef6c00}.unknown{color:#6a1b9a}code,pre{font-size:12px;background:#f7f7f7}
details{margin:.6em 0;border:1px solid #ddd;padding:.4em}tr.kill td{background:#fde0dc}
tr.resume td{background:#e3f2fd}.banner{padding:.5em;background:#fff3cd;border:1px solid #e0c36b}
"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def e(value: Any) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe in attributes; control characters,
    NUL included, shown as ``\\xNN``; cut at 4 x :data:`crashpoint.text.MAX_TEXT` characters, room for
    a block of evidence lines of at most that size each)."""
    return html.escape(visible(clip("" if value is None else str(value), 4 * MAX_TEXT)), quote=True)


def table(head: list[str], rows: list[list[str]], numeric: set[int] = frozenset()) -> str:
    """An HTML table: ``head`` is escaped here; ``rows`` cells must already be HTML (escape with
    :func:`e`); columns whose index is in ``numeric`` are right-aligned."""
    out = ["<table><thead><tr>", *(f"<th>{e(h)}</th>" for h in head), "</tr></thead><tbody>"]
    for row in rows:
        cells = "".join(f'<td class="n">{c}</td>' if i in numeric else f"<td>{c}</td>" for i, c in enumerate(row))
        out.append(f"<tr>{cells}</tr>")
    out.append("</tbody></table>")
    return "".join(out)


def _coverage(coverage: dict[str, dict[str, dict[str, int]]] | None) -> str:
    if not isinstance(coverage, dict) or not coverage:
        return "<p>No coverage matrix recorded (it is written when a run finishes).</p>"
    coverage = {step: row for step, row in coverage.items() if isinstance(row, dict)}
    kinds = sorted({str(k) for row in coverage.values() for k in row})
    rows = []
    for step, row in coverage.items():
        cells = [e(step)]
        for k in kinds:
            cell = row.get(k)
            ok = isinstance(cell, dict) and isinstance(cell.get("runs"), int) and isinstance(cell.get("passed"), int)
            cells.append("-" if not ok else f'<span class="{"passed" if cell["passed"] == cell["runs"] else "failed"}">'
                                              f'{cell["passed"]}/{cell["runs"]}</span>')
        rows.append(cells)
    return table(["step", *[k.replace("_", " ") for k in kinds]], rows, set(range(1, len(kinds) + 1)))


def _timeline(r: dict[str, Any]) -> str:
    tl = r.get("timeline") or {}
    events, deliveries = tl.get("events") or [], tl.get("deliveries") or []
    parts = []
    if deliveries:
        rows = []
        for d in deliveries:
            fields = ", ".join(f"{k}={v}" for k, v in d.items() if k not in ("step", "kind"))
            rows.append(f'<tr class="{"kill" if d.get("kind") == "kill" else ""}"><td class="n">{e(d.get("step"))}</td>'
                        f"<td>{e(d.get('kind'))}</td><td>{e(fields)}</td></tr>")
        parts.append("<h4>Deliveries and kills</h4><table><thead><tr><th>step</th><th>kind</th><th>detail</th></tr>"
                     "</thead><tbody>" + "".join(rows) + "</tbody></table>")
    if events:
        t0 = next((ev["at"] for ev in events if isinstance(ev.get("at"), (int, float))), None)
        rows = []
        for ev in events:
            at = ev.get("at")
            rel = f"+{at - t0:g} s" if isinstance(at, (int, float)) and t0 is not None else "-"
            cls = "resume" if ev.get("kind") == "workflow_resumed" else ""
            rows.append(f'<tr class="{cls}"><td class="n">{e(ev.get("seq"))}</td><td class="n">{e(rel)}</td>'
                        f"<td>{e(ev.get('kind'))}</td><td>{e(ev.get('text'))}</td></tr>")
        note = f"<p>{tl['truncated']} earlier event(s) not stored.</p>" if tl.get("truncated") else ""
        parts.append(f"<h4>Trace timeline ({len(events)} events; resumes highlighted)</h4>{note}"
                     "<table><thead><tr><th>#</th><th>virtual time</th><th>kind</th><th>event</th></tr></thead>"
                     "<tbody>" + "".join(rows) + "</tbody></table>")
    return "".join(parts) or "<p>No timeline: the run left no trace.</p>"


def _failure(r: dict[str, Any], with_timeline: bool) -> str:
    findings = "".join(f"<li>[{e(f['oracle'])}] {e(f['message'])}"
                       + ("<pre>" + e("\n".join(f.get("evidence") or [])) + "</pre>" if f.get("evidence") else "")
                       + "</li>" for f in r.get("failures") or [])
    error = f"<p>{e(r['error'])}</p>" if r.get("error") else ""
    repro = f"<p>reproduce: <code>{e(r['reproduce'])}</code></p>" if r.get("reproduce") else ""
    body = _timeline(r) if with_timeline else "<p>(timeline omitted: too many failures)</p>"
    return (f'<details class="run" open><summary><span class="{e(r["verdict"])}">{e(r["verdict"].upper())}</span> '
            f"{e(result_id(r))} - final status {e(r.get('final_status') or '-')} "
            f"({e(r.get('stop_reason') or '')})</summary>{error}<ul>{findings}</ul>{repro}{body}</details>")


def _group(g: dict[str, Any], with_timeline: bool) -> str:
    """One failure group: its title, its first run in full (timeline included), the others in a table."""
    rest = [[e(result_id(r)), e(r.get("final_status") or "-"),
             e((r.get("failures") or [{}])[0].get("message") or r.get("error") or ""),
             f"<code>{e(r['reproduce'])}</code>" if r.get("reproduce") else ""] for r in g["runs"][1:]]
    others = f"<p>The same in {len(rest)} other run(s):</p>" + table(["run", "final status", "first finding",
                                                                       "reproduce"], rest) if rest else ""
    return (f'<section class="group"><h3 class="{e(g["verdict"])}">{e(group_title(g))}</h3>'
            f"{_failure(g['runs'][0], with_timeline)}{others}</section>")


def render(stored: dict[str, Any]) -> str:
    """The HTML document (``str``) of a stored run."""
    run, results = stored["run"], stored["results"]
    c, cases, values = counts(results), per_case(results), metrics(results)
    summary = (run.get("summary") or {})
    banner = "" if run.get("complete") else \
        '<p class="banner">This run did not finish: the results below are those recorded before it stopped.</p>'
    info = table(["field", "value"], [[e(k), e(run.get(k))] for k in
                                       ("run_id", "engine", "engine_version", "adapter", "pack", "pack_version",
                                        "crash", "seed", "git_commit", "host", "source", "started_at", "ended_at",
                                        "complete")])
    verdicts = table(["cases", "runs", "passed", "failed", "errors", "unknown"],
                      [[str(c["cases"]), str(c["runs"]), str(c["passed"]), str(c["failed"]), str(c["error"]),
                        str(c["unknown"])]], set(range(6)))
    points = golden_points(results)
    metric_rows = [[e(label), e(fmt_metric(name, values[name], points))] for name, (label, _) in METRICS.items()]
    case_rows = [[e(cid), str(x["runs"]), str(x["passed"]), str(x["failed"]), str(x["error"]), str(x["unknown"])]
                 for cid, x in cases.items()]
    ratio_labels = {k: label for k, (label, unit) in METRICS.items() if unit == "ratio"}
    images = ""
    if results:
        images = (f'<img alt="runs by verdict per case" src="{charts.verdicts_by_case(cases)}">'
                  f'<img alt="ratio metrics" src="{charts.ratios(values, ratio_labels)}">')
    bad = [r for r in results if r["verdict"] != "passed"]
    failures = "".join(_group(g, i < MAX_TIMELINES) for i, g in enumerate(failure_groups(results))) \
        or "<p>Every run passed.</p>"
    vacuity = summary.get("vacuity") if isinstance(summary.get("vacuity"), dict) else {}
    findings = vacuity.get("findings") if isinstance(vacuity.get("findings"), list) else []
    vac = "".join(f"<li>{e(f)}</li>" for f in findings)
    ok = c["passed"] == c["runs"] and run.get("complete")
    title = f"crashpoint: {'PASSED' if ok else 'FAILED' if run.get('complete') else 'INCOMPLETE'} - {run_title(run)}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{CSP}">
<title>{e(title)}</title><style>{STYLE}</style></head>
<body>
<h1 id="summary">{e(title)}</h1>
{banner}
<section><h2>Summary</h2>{verdicts}{info}</section>
<section><h2>Metrics</h2>{table(["metric", "value"], metric_rows, {1})}{images}</section>
<section><h2>Cases</h2>{table(["case", "runs", "passed", "failed", "errors", "unknown"], case_rows, {1, 2, 3, 4, 5})}</section>
<section><h2>Durability coverage</h2>{_coverage(summary.get("coverage"))}
{f"<h3>Vacuity findings</h3><ul>{vac}</ul>" if vac else ""}</section>
<section id="failures"><h2>Runs that did not pass ({len(bad)})</h2>{failures}</section>
</body></html>
"""
