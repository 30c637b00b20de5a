"""One self-contained HTML file for a stored run: no script, no external resource.

Sections: the summary (run info, runs by verdict), the metrics, charts (runs by verdict per case,
the ratio metrics; base64 PNG images from :mod:`crashpoint.reports.charts`), the per-case table,
the durability-coverage matrix (step x fault kind, ``passed/runs``; recorded when the run
finished), and the runs that did not pass grouped by rule and crash-point family: each group's first
run with its findings, its reproduce command and its **timeline**, the others a row each. The
timeline is: the external deliveries and kills, then the trace events with virtual time since the
first event.

The page is the Jinja2 template ``templates/run.html.j2`` (the weekly report's is
``weekly.html.j2``; both extend ``_layout.html.j2``). The environment autoescapes, and every value a
template prints goes through :func:`e` (its ``finalize``): escaping is the default, not a call to
remember; only what this package builds itself (chart data URIs, the style sheet, the policy) is
marked safe. A Content-Security-Policy forbids scripts as a second line of defence.
"""

from __future__ import annotations

import functools
import html
from typing import Any

from crashpoint.reports import charts
from crashpoint.text import MAX_TEXT, clip
from crashpoint.reports.summary import (METRICS, counts, failure_groups, fmt_metric, golden_points, group_title,
                                       metrics, per_case, result_id, rule_of, run_title, visible)

#: Failure groups whose first run is shown with a timeline (:func:`~crashpoint.reports.summary.failure_groups`;
#: the other runs of a group are a table row each, never a timeline).
MAX_TIMELINES = 50

#: Every table fits the page (``tests/integration/test_html_fits.py``, at 800 px): a cell's text (paths, crash point
#: ids, reproduce commands: long words with no break opportunity) wraps anywhere rather than widening its table,
#: and ``pre`` blocks wrap their lines.
STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:1200px;overflow-wrap:anywhere}
table{border-collapse:collapse;margin:.5em 0 1.2em;max-width:100%}
th,td{border:1px solid #ccc;padding:2px 6px;font-size:13px;overflow-wrap:anywhere}
th{background:#f3f3f3;text-align:left}td.n{text-align:right;white-space:nowrap;overflow-wrap:normal}.passed{color:#2e7d32}.failed{color:#c62828}
.error{color:#ef6c00}.unknown{color:#6a1b9a}code,pre{font-size:12px;background:#f7f7f7;overflow-wrap:anywhere}
pre{white-space:pre-wrap}img{max-width:100%;height:auto}
details{margin:.6em 0;border:1px solid #ddd;padding:.4em}tr.kill td{background:#fde0dc}
tr.resume td{background:#e3f2fd}.banner{padding:.5em;background:#fff3cd;border:1px solid #e0c36b}
"""

CSP = "default-src 'none'; img-src data:; style-src 'unsafe-inline'"


def e(value: Any) -> str:
    """``value`` as HTML text (quotes escaped too, so it is safe in attributes; control characters,
    NUL included, shown as ``\\xNN``; cut at 4 x :data:`crashpoint.text.MAX_TEXT` characters, room for
    a block of evidence lines of at most that size each)."""
    return html.escape(visible(clip("" if value is None else str(value), 4 * MAX_TEXT)), quote=True)


def _shown(value: Any) -> Any:
    """The environment's ``finalize``: a value the code marked safe as it is, anything else as :func:`e`."""
    from markupsafe import Markup

    return value if isinstance(value, Markup) else Markup(e(value))


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    """The Jinja2 environment of the report templates (``templates/``): autoescape on, every printed
    value through :func:`e`, undefined names an error."""
    import jinja2

    return jinja2.Environment(loader=jinja2.PackageLoader("crashpoint.reports", "templates"), autoescape=True,
                              finalize=_shown, undefined=jinja2.StrictUndefined, trim_blocks=True,
                              lstrip_blocks=True, keep_trailing_newline=True)


def page(template: str, title: str, **context: Any) -> str:
    """Render the report template ``template`` with ``title`` and ``context`` inside the shared layout
    (style sheet and Content-Security-Policy)."""
    from markupsafe import Markup

    return environment().get_template(template).render(title=title, csp=Markup(CSP), style=Markup(STYLE), **context)


def _coverage(coverage: Any) -> dict[str, Any] | None:
    if not isinstance(coverage, dict) or not coverage:
        return None
    coverage = {step: row for step, row in coverage.items() if isinstance(row, dict)}
    kinds = sorted({str(k) for row in coverage.values() for k in row})

    def cell(value: Any) -> dict[str, int] | None:
        ok = isinstance(value, dict) and isinstance(value.get("runs"), int) and isinstance(value.get("passed"), int)
        return {"passed": value["passed"], "runs": value["runs"]} if ok else None

    return {"kinds": [k.replace("_", " ") for k in kinds],
            "rows": [(step, [cell(row.get(k)) for k in kinds]) for step, row in coverage.items()]}


def _run(r: dict[str, Any], with_timeline: bool) -> dict[str, Any]:
    """The context of one run that did not pass: its findings and timeline as plain values."""
    tl = r.get("timeline") or {}
    events, deliveries = tl.get("events") or [], tl.get("deliveries") or []
    t0 = next((ev["at"] for ev in events if isinstance(ev.get("at"), (int, float))), None)

    def since(at: Any) -> str:
        return f"+{at - t0:g} s" if isinstance(at, (int, float)) and t0 is not None else "-"

    return {
        "verdict": r["verdict"], "id": result_id(r), "final_status": r.get("final_status"),
        "stop_reason": r.get("stop_reason"), "error": r.get("error"), "reproduce": r.get("reproduce"),
        "findings": [{"oracle": rule_of(f), "message": f["message"], "evidence": "\n".join(f.get("evidence") or [])}
                     for f in r.get("failures") or []],
        "with_timeline": with_timeline, "truncated": tl.get("truncated"),
        "deliveries": [{"step": d.get("step"), "kind": d.get("kind"),
                        "detail": ", ".join(f"{k}={v}" for k, v in d.items() if k not in ("step", "kind"))}
                       for d in deliveries],
        "events": [{"seq": ev.get("seq"), "at": since(ev.get("at")), "kind": ev.get("kind"), "text": ev.get("text")}
                   for ev in events],
    }


def _group(g: dict[str, Any], with_timeline: bool) -> dict[str, Any]:
    """The context of one failure group: its title and verdict, its first run in full (timeline
    included), the others as rows (run, final status, first finding, reproduce)."""
    return {"title": group_title(g), "verdict": g["verdict"], "first": _run(g["runs"][0], with_timeline),
            "rest": [(result_id(r), r.get("final_status") or "-",
                      (r.get("failures") or [{}])[0].get("message") or r.get("error") or "", r.get("reproduce"))
                     for r in g["runs"][1:]]}


def render(stored: dict[str, Any]) -> str:
    """The HTML document (``str``) of a stored run (``{"run": {...}, "results": [...]}``, as
    :meth:`crashpoint.reports.results_store.ResultStore.load_run` returns it)."""
    from markupsafe import Markup

    run, results = stored["run"], stored["results"]
    c, cases, values = counts(results), per_case(results), metrics(results)
    summary = (run.get("summary") or {})
    ratio_labels = {k: label for k, (label, unit) in METRICS.items() if unit == "ratio"}
    images = [("runs by verdict per case", Markup(charts.verdicts_by_case(cases))),
              ("ratio metrics", Markup(charts.ratios(values, ratio_labels)))] if results else []
    bad = [r for r in results if r["verdict"] != "passed"]
    vacuity = summary.get("vacuity") if isinstance(summary.get("vacuity"), dict) else {}
    findings = vacuity.get("findings") if isinstance(vacuity.get("findings"), list) else []
    ok = c["passed"] == c["runs"] and run.get("complete")
    title = f"crashpoint: {'PASSED' if ok else 'FAILED' if run.get('complete') else 'INCOMPLETE'} - {run_title(run)}"
    return page(
        "run.html.j2", title, complete=bool(run.get("complete")),
        verdicts=[c["cases"], c["runs"], c["passed"], c["failed"], c["error"], c["unknown"], c["unsupported"]],
        info=[(k, run.get(k)) for k in ("run_id", "engine", "engine_version", "adapter", "pack", "pack_version",
                                         "crash", "seed", "git_commit", "host", "source", "started_at", "ended_at",
                                         "complete")],
        metrics=[(label, fmt_metric(name, values[name], golden_points(results))) for name, (label, _) in METRICS.items()],
        images=images,
        cases=[(cid, x["runs"], x["passed"], x["failed"], x["error"], x["unknown"], x["unsupported"])
               for cid, x in cases.items()],
        coverage=_coverage(summary.get("coverage")), vacuity=findings,
        bad=len(bad), groups=[_group(g, i < MAX_TIMELINES) for i, g in enumerate(failure_groups(results))])
