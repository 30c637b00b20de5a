"""The weekly reliability report: stored runs of a date range compared week by week (pandas).

Weeks are 7-day windows from ``since`` (``since``, ``since + 7 d``, ...; the last ends at ``until``,
inclusive), keyed by the runs' start time (UTC). A *key* is an (engine, case, crash point) triple (a
broken engine's failures next to the reference engine's passes are two keys, not one flaky key); a
key is *failing* in a set of runs when any of its runs there did not pass (failed, error or unknown).
The *latest week* is the last week with data; *before* is every earlier run in the range.

* **trends**: each metric of :data:`crashpoint.reports.summary.METRICS` per week (same definitions
  as a single run), and its direction from the last earlier week that measured it to the latest
  week: ``improved``, ``worsened``, ``unchanged`` (lower is better for approval wait time), or
  ``n/a`` when the latest week did not measure it or no earlier week did.
* **new failures**: keys failing in the latest week whose last run before it passed, or that never
  ran before. **fixed**: keys whose runs all passed in the latest week and whose last run before it
  failed. Flaky keys are in neither.
* **flaky**: keys whose verdict flips between runs on the same git commit (anywhere in the range).
* **disappeared**: cases run before the latest week and not in it, on any engine (a coverage gap,
  not a regression).
* **incident recurrences**: cases tagged ``incident`` (regression cases from ``crashpoint incident``)
  with a run that did not pass, anywhere in the range.
* **alerts**: runs with a retry storm (at least :data:`RETRY_STORM` retries scheduled), an approval
  stuck past its deadline, a side effect applied more than once, or a replay failure (the
  differential oracle: a resumed run that did not end as its golden run did).
"""

from __future__ import annotations

import json
from datetime import date, datetime, time, timedelta, timezone
from typing import TYPE_CHECKING, Any

from crashpoint.errors import UsageError
from crashpoint.reports.summary import METRICS, first_kill, fmt_metric

if TYPE_CHECKING:
    import pandas as pd

#: The columns of a key: which engine, which case, which crash point.
KEY = ["engine", "case_id", "crash_point"]
#: A run with at least this many ``retry_scheduled`` events is a retry storm.
RETRY_STORM = 6

ALERTS = {
    "retry_storm": "retry storm",
    "approval_overdue": "approval stuck past its deadline",
    "dup_effect": "duplicate side effect",
    "replay_failed": "replay failure",
}

_FLAGS = ("crashed", "dup", "dup_safe", "retry", "retry_ok", "comp", "comp_ok", "cancel", "cancel_ok",
          "approval_overdue", "dup_effect", "replay_failed")


def parse_date(value: str, option: str) -> date:
    """``YYYY-MM-DD`` as a date. Raises :class:`UsageError` naming ``option``."""
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise UsageError(f"{option} {value!r}: not a date, expected YYYY-MM-DD") from None


def _frame(runs: list[dict[str, Any]], results: list[dict[str, Any]], since: date) -> pd.DataFrame:
    import pandas as pd  # here, not at the top: about 1 s to import, for the one command that needs it

    info = pd.DataFrame([{"run_id": r["run_id"], "started_at": r["started_at"], "git_commit": r.get("git_commit"),
                          "engine": str(r.get("engine") or "?"), "complete": bool(r.get("complete")),
                          "subject": str(r.get("pack") or "?"),
                          "engine_version": str(r.get("engine_version") or "?")} for r in runs])
    rows = []
    for r in results:
        m = r.get("measures") if isinstance(r.get("measures"), dict) else {}
        wait, retries = m.get("approval_wait_s"), m.get("retries")
        row = {"run_id": r["run_id"], "case_id": r["case_id"], "crash_point": r["crash_point"],
               "verdict": r["verdict"], "oracle": r.get("oracle"), "message": r.get("message"),
               "incident": isinstance(r.get("tags"), list) and "incident" in r["tags"], "result_id": r["id"],
               "approval_wait_s": wait if isinstance(wait, (int, float)) and not isinstance(wait, bool) else None,
               "retries": retries if isinstance(retries, int) else 0}
        row.update({f: bool(m.get(f)) for f in _FLAGS})
        rows.append(row)
    columns = ["run_id", "case_id", "crash_point", "verdict", "oracle", "message", "incident", "result_id",
               "approval_wait_s", "retries", *_FLAGS]
    df = pd.DataFrame(rows, columns=columns)
    if df.empty or info.empty:
        return df.assign(started_at=pd.Series(dtype=object), git_commit=None, engine=None, subject=None,
                         engine_version=None, week=pd.Series(dtype=int))
    df = df.merge(info, on="run_id", how="inner")
    df["week"] = df["started_at"].map(lambda t: (t.date() - since).days // 7)
    df["failing"] = df["verdict"] != "passed"
    df["passed"] = ~df["failing"]
    df["retry_storm"] = df["retries"] >= RETRY_STORM
    df["approval_wait_s"] = pd.to_numeric(df["approval_wait_s"], errors="coerce")
    return df


def _ratio(num: float, den: float) -> float | None:
    return None if den == 0 else round(float(num) / float(den), 4)


def week_metrics(df: pd.DataFrame) -> dict[str, float | None]:
    """The metrics of one week's results (columns of the weekly frame)."""
    crashed = df[df["crashed"]]
    waits = df["approval_wait_s"].dropna()
    return {
        "resume_success": _ratio(crashed["passed"].sum(), len(crashed)),
        "duplicate_event_safety": _ratio(df["dup_safe"].sum(), df["dup"].sum()),
        "retry_success": _ratio(df["retry_ok"].sum(), df["retry"].sum()),
        "compensation_success": _ratio(df["comp_ok"].sum(), df["comp"].sum()),
        "cancellation_correctness": _ratio(df["cancel_ok"].sum(), df["cancel"].sum()),
        "approval_wait_s": round(float(waits.mean()), 3) if len(waits) else None,
        "crash_points_covered": int(crashed.assign(point=crashed["crash_point"].map(first_kill)).dropna(
            subset=["point"])[["case_id", "point"]].drop_duplicates().shape[0]) if len(df) else None,
    }


def _direction(name: str, before: float | None, after: float | None) -> str:
    if before is None or after is None:
        return "n/a"
    if after == before:
        return "unchanged"
    better = after < before if name == "approval_wait_s" else after > before
    return "improved" if better else "worsened"


def weekly(store: Any, since: date, until: date) -> dict[str, Any]:
    """The weekly report of the runs ``store`` holds from ``since`` to ``until`` (dates, inclusive).

    Returns ``{"since", "until", "weeks": [{"label", "start", "end", "runs", "incomplete_runs",
    "results", "metrics": {...}}], "trends": {metric: {"label", "values": [...], "previous", "latest",
    "direction"}}, "new_failures", "fixed": [{"engine", "case_id", "crash_point"}],
    "flaky": [{"engine", "case_id", "crash_point", "git_commit"}],
    "disappeared": [case ids], "incidents": [{"case_id", "failing_runs", "weeks"}],
    "alerts": [{"kind", "label", "week", "engine", "case_id", "crash_point", "run_id", "detail"}],
    "engines": [names], "subjects": [{"subject" (a pack's or a target's name), "engine", "engine_version",
    "weeks": [{"results", "passed"} per week]}]}``.

    Raises:
        UsageError: ``since`` is after ``until``.
    """
    if since > until:
        raise UsageError(f"--since {since} is after --until {until}")
    start = datetime.combine(since, time(), timezone.utc)
    end = datetime.combine(until + timedelta(days=1), time(), timezone.utc)
    runs = store.runs(start, end)
    df = _frame(runs, store.results([r["run_id"] for r in runs]), since)
    n_weeks = (until - since).days // 7 + 1
    weeks = []
    for i in range(n_weeks):
        w_start = since + timedelta(days=7 * i)
        w_end = min(w_start + timedelta(days=6), until)
        part = df[df["week"] == i] if len(df) else df
        week_runs = [r for r in runs if (r["started_at"].date() - since).days // 7 == i]
        weeks.append({"label": f"{w_start}..{w_end}", "start": str(w_start), "end": str(w_end),
                      "runs": len(week_runs), "incomplete_runs": sum(1 for r in week_runs if not r.get("complete")),
                      "results": int(len(part)), "metrics": week_metrics(part) if len(part) else
                      {k: None for k in METRICS}})
    with_data = [i for i, w in enumerate(weeks) if w["results"]]
    trends = {}
    for name, (label, unit) in METRICS.items():
        values = [w["metrics"][name] for w in weeks]
        last = values[with_data[-1]] if with_data else None
        earlier = [values[i] for i in with_data[:-1] if values[i] is not None]
        prev = earlier[-1] if earlier else None
        trends[name] = {"label": label, "unit": unit, "values": values, "previous": prev, "latest": last,
                        "direction": _direction(name, prev, last)}
    engines = sorted({str(r.get("engine") or "?") for r in runs})
    report: dict[str, Any] = {"since": str(since), "until": str(until), "engines": engines, "weeks": weeks,
                              "trends": trends,
                              "new_failures": [], "fixed": [], "flaky": [], "disappeared": [], "incidents": [],
                              "alerts": [], "subjects": []}
    if df.empty:
        return report | {"subjects": []}
    report["subjects"] = [
        {"subject": subject, "engine": engine, "engine_version": version,
         "weeks": [{"results": int((g["week"] == i).sum()), "passed": int(g[g["week"] == i]["passed"].sum())}
                   for i in range(n_weeks)]}
        for (subject, engine, version), g in df.groupby(["subject", "engine", "engine_version"], sort=True)]
    flaky = []
    for (engine, case_id, point, commit), g in df[df["git_commit"].notna()].groupby(KEY + ["git_commit"]):
        if g["failing"].nunique() > 1:
            flaky.append({"engine": engine, "case_id": case_id, "crash_point": point, "git_commit": commit})
    report["flaky"] = sorted(flaky, key=lambda x: (x["case_id"], x["crash_point"], x["engine"], x["git_commit"]))
    flaky_keys = {(x["engine"], x["case_id"], x["crash_point"]) for x in flaky}
    latest = with_data[-1]
    now, before = df[df["week"] == latest], df[df["week"] < latest]
    failing_now = now.groupby(KEY)["failing"].any()
    last_before = before.sort_values(["started_at", "result_id"]).groupby(KEY)["failing"].last()
    new, fixed = [], []
    for key, failing in failing_now.items():
        if key in flaky_keys:
            continue
        prior = last_before.get(key)
        if failing and (prior is None or not prior):
            new.append(key)
        elif not failing and prior is not None and prior:
            fixed.append(key)
    order = lambda k: (k[1], k[2], k[0])  # noqa: E731 - by case, crash point, then engine
    report["new_failures"] = [{"engine": e, "case_id": c, "crash_point": p} for e, c, p in sorted(new, key=order)]
    report["fixed"] = [{"engine": e, "case_id": c, "crash_point": p} for e, c, p in sorted(fixed, key=order)]
    report["disappeared"] = sorted(set(before["case_id"]) - set(now["case_id"]))
    incidents = df[df["incident"] & df["failing"]]
    report["incidents"] = [{"case_id": cid, "failing_runs": int(len(g)),
                            "weeks": [weeks[i]["label"] for i in sorted(set(g["week"]))]}
                           for cid, g in incidents.groupby("case_id")]
    alerts = []
    for kind, label in ALERTS.items():
        for _, row in df[df[kind]].sort_values(["started_at", "result_id"]).iterrows():
            message = row["message"] if isinstance(row["message"], str) and row["message"] else None
            if kind == "retry_storm":
                detail = f"{row['retries']} retries scheduled"
            elif kind == "approval_overdue":
                detail = message or "an approval was decided after its deadline, or left waiting past it"
            else:
                detail = message or f"verdict {row['verdict']}"
            alerts.append({"kind": kind, "label": label, "week": weeks[int(row["week"])]["label"],
                           "engine": row["engine"], "case_id": row["case_id"], "crash_point": row["crash_point"],
                           "run_id": row["run_id"], "detail": str(detail)})
    report["alerts"] = alerts
    return report


def _key(x: dict[str, str], engines: int = 1) -> str:
    """``case at POINT``, with `` on ENGINE`` when the report covers more than one engine."""
    where = x["case_id"] if x["crash_point"] == "none" else f"{x['case_id']} at {x['crash_point']}"
    return f"{where} on {x['engine']}" if engines > 1 and x.get("engine") else where


def sentences(report: dict[str, Any]) -> list[str]:
    """The report's findings as plain sentences, one per trend and list (what people read first)."""
    out = []
    for name, t in report["trends"].items():
        if t["direction"] == "n/a":
            latest = fmt_metric(name, t["latest"])
            out.append(f"{t['label']}: n/a (latest week {latest}, earlier {fmt_metric(name, t['previous'])})")
        else:
            out.append(f"{t['label']}: {t['direction']} from {fmt_metric(name, t['previous'])} to "
                       f"{fmt_metric(name, t['latest'])}")
    n = len(report.get("engines") or ())
    for field, label in (("new_failures", "new failures"), ("fixed", "fixed")):
        out.append(f"{label}: " + (", ".join(_key(x, n) for x in report[field]) or "none"))
    out.append("flaky: " + (", ".join(f"{_key(x, n)} (commit {str(x['git_commit'])[:10]})" for x in report["flaky"])
                            or "none"))
    out.append("disappeared (coverage gap, not a regression): " + (", ".join(report["disappeared"]) or "none"))
    out.append("incident recurrences: " + (", ".join(f"{x['case_id']} ({x['failing_runs']} failing runs)"
                                                     for x in report["incidents"]) or "none"))
    return out


def render_json(report: dict[str, Any]) -> str:
    """The report as indented JSON (format ``crashpoint.weekly/1``)."""
    return json.dumps({"format": "crashpoint.weekly/1", **report}, indent=2, ensure_ascii=False, default=str) + "\n"


def render_markdown(report: dict[str, Any]) -> str:
    """The report as Markdown: the sentences, the metric-by-week table, the lists and the alerts."""
    from crashpoint.reports.markdown import escape

    weeks, engines = report["weeks"], len(report.get("engines") or ())
    lines = [f"### crashpoint weekly reliability report: {report['since']} to {report['until']}", ""]
    lines += [f"- {escape(s)}" for s in sentences(report)]
    lines += ["", "| metric | " + " | ".join(w["label"] for w in weeks) + " | trend |",
              "|---|" + "---:|" * len(weeks) + "---|"]
    for name, t in report["trends"].items():
        lines.append(f"| {t['label']} | " + " | ".join(fmt_metric(name, v) for v in t["values"])
                     + f" | {t['direction']} |")
    lines.append("| runs (incomplete) | " + " | ".join(f"{w['runs']} ({w['incomplete_runs']})" for w in weeks) + " | |")
    lines += ["", "#### Per pack or target and engine version (passed / results)", ""]
    lines += ["| pack or target | engine | " + " | ".join(w["label"] for w in weeks) + " |",
              "|---|---|" + "---:|" * len(weeks)]
    for s in report.get("subjects") or []:
        lines.append(f"| {escape(s['subject'])} | {escape(s['engine_version'])} | "
                     + " | ".join(f"{w['passed']}/{w['results']}" if w["results"] else "-" for w in s["weeks"]) + " |")
    lines += ["", f"#### Alerts ({len(report['alerts'])})", ""]
    if not report["alerts"]:
        lines.append("none")
    for a in report["alerts"][:100]:
        lines.append(f"- **{escape(a['label'])}** ({escape(a['week'])}) {escape(_key(a, engines))}, run "
                     f"{escape(a['run_id'][:8])}: {escape(a['detail'])}")
    if len(report["alerts"]) > 100:
        lines.append(f"- ... and {len(report['alerts']) - 100} more (see --format json)")
    return "\n".join(lines) + "\n"


def render_html(report: dict[str, Any]) -> str:
    """The report as one self-contained HTML file with a trend chart of the ratio metrics (the
    template ``templates/weekly.html.j2``, escaped like every report: :mod:`crashpoint.reports.html`)."""
    from markupsafe import Markup

    from crashpoint.reports import charts
    from crashpoint.reports.html import page

    weeks = report["weeks"]
    ratios = {t["label"]: [None if v is None else 100 * v for v in t["values"]]
              for n, t in report["trends"].items() if t["unit"] == "ratio"}
    return page(
        "weekly.html.j2", f"crashpoint weekly reliability report: {report['since']} to {report['until']}",
        sentences=sentences(report), weeks=[w["label"] for w in weeks],
        trends=[[t["label"], *(fmt_metric(n, v) for v in t["values"]), t["direction"]]
                for n, t in report["trends"].items()],
        chart=Markup(charts.trends([w["start"] for w in weeks], ratios) if weeks else ""),
        alerts=[[a["label"], a["week"], a["case_id"], a["crash_point"], a["run_id"][:8], a["detail"]]
                for a in report["alerts"]],
        subjects=[[s["subject"], s["engine_version"],
                   *(f"{w['passed']}/{w['results']}" if w["results"] else "-" for w in s["weeks"])]
                  for s in report.get("subjects") or []])
