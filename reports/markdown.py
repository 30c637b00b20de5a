"""Markdown of a stored run, for a pull-request comment.

Shape: a title line with the verdict, a summary table (runs by verdict, ``unsupported`` included),
the metrics table, a table of the cases that did not pass every run, then the runs that did not pass
grouped as the HTML report groups them (by verdict and rule, crash-point families counted:
:func:`~crashpoint.reports.summary.failure_groups`): each group's title, its first run with its oracle
findings, the others one line each (at most :data:`MAX_FAILURES` runs in all), and the ``reproduce``
commands in one fenced block. Every string that came
from a case, an engine or a trace goes through :func:`escape`.
"""

from __future__ import annotations

import functools
import re
from typing import Any

from crashpoint.text import clip
from crashpoint.reports.summary import (METRICS, counts, failure_groups, fmt_metric, golden_points, group_title,
                                       metrics, per_case, result_id, rule_of, run_title, visible)

#: Failing runs shown in detail; the rest are counted.
MAX_FAILURES = 25

#: Backslash-escaped; ``_`` only where it could open or close emphasis (not inside a word, where GFM
#: reads it literally: ``cancel_while_waiting`` stays as written).
_SPECIAL = re.compile(r"([\\`*\[\]|#~]|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9]))")


#: Text that GitHub-flavoured Markdown would turn live: ``@mentions`` (a ping), bare URLs and ``www.``
#: autolinks; each is broken with an entity, so it reads the same and links nothing.
_LIVE = ((re.compile(r"(?<![A-Za-z0-9])@"), "&#64;"), (re.compile(r"(?i)(?<=[a-z0-9])://"), "&#58;//"),
         (re.compile(r"(?i)\bwww\."), "www&#46;"))


def escape(value: Any) -> str:
    """``value`` as inline Markdown text: ``\\ ` * _ [ ] | # ~`` backslash-escaped, ``<``, ``>`` and
    ``&`` as entities, ``@`` (mentions), ``://`` and ``www.`` (autolinks) broken by an entity, newlines
    as spaces (a table row stays one row), control and bidirectional characters as ``\\xNN`` /
    ``\\uNNNN`` (:func:`~crashpoint.reports.summary.visible`)."""
    text = visible(clip("" if value is None else str(value)))
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    text = _SPECIAL.sub(r"\\\1", text)
    for pattern, entity in _LIVE:
        text = pattern.sub(entity, text)
    return " ".join(text.splitlines())


def code(value: Any) -> str:
    """``value`` as an inline code span that nothing inside can close: fenced with one backtick more
    than its longest run of backticks; newlines as ``\\n``, control and bidirectional characters as
    escapes. Not for a table cell (GFM splits cells at ``|`` even inside code): use :func:`escape`."""
    text = visible(clip("" if value is None else str(value))).replace("\r", "\\r").replace("\n", "\\n")
    fence = "`" * (max((len(run) for run in re.findall("`+", text)), default=0) + 1)
    pad = " " if text[:1] == "`" or text[-1:] == "`" or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _shown(value: Any) -> Any:
    """The ``finalize`` of :func:`environment`: a value a filter already formatted (``| code``) as it
    is, anything else through :func:`escape`."""
    from markupsafe import Markup

    return value if isinstance(value, Markup) else escape(value)


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    """The Jinja2 environment of the Markdown templates (``templates/*.md.j2``): every printed value
    escaped for Markdown (:func:`escape`; escaping is the default, as HTML's autoescape), the filter
    ``code`` for a code span (:func:`code`), undefined names an error."""
    import jinja2
    from markupsafe import Markup

    env = jinja2.Environment(loader=jinja2.PackageLoader("crashpoint.reports", "templates"), autoescape=False,
                             finalize=_shown, undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["code"] = lambda value: Markup(code(value))
    return env


def page(template: str, **context: Any) -> str:
    """Render the Markdown template ``template`` (a name in ``templates/``) with ``context``."""
    return environment().get_template(template).render(**context)


def _fence(line: str) -> str:
    return visible(line.replace("`", "'"))


def render(stored: dict[str, Any]) -> str:
    """The Markdown text of a stored run."""
    run, results = stored["run"], stored["results"]
    c = counts(results)
    ok = c["passed"] == c["runs"] and run.get("complete")
    mark = "PASSED" if ok else ("INCOMPLETE" if not run.get("complete") else "FAILED")
    lines = [f"### crashpoint: {mark}: {c['passed']}/{c['runs']} runs passed", "", escape(run_title(run)), "",
             "| cases | runs | passed | failed | errors | unknown | unsupported |",
             "|---:|---:|---:|---:|---:|---:|---:|",
             f"| {c['cases']} | {c['runs']} | {c['passed']} | {c['failed']} | {c['error']} | {c['unknown']} "
             f"| {c['unsupported']} |", "",
             "| metric | value |", "|---|---:|"]
    values = metrics(results)
    points = golden_points(results)
    lines += [f"| {label} | {fmt_metric(name, values[name], points)} |" for name, (label, _) in METRICS.items()]
    bad_cases = {cid: x for cid, x in per_case(results).items() if x["passed"] != x["runs"]}
    if bad_cases:
        lines += ["", "| case | runs | passed | failed | errors | unknown | unsupported |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        lines += [f"| {escape(cid)} | {x['runs']} | {x['passed']} | {x['failed']} | {x['error']} | {x['unknown']} "
                  f"| {x['unsupported']} |" for cid, x in bad_cases.items()]
    bad = [r for r in results if r["verdict"] != "passed"]
    if bad:
        lines += ["", f"#### Runs that did not pass ({len(bad)})"]
        shown: list[dict[str, Any]] = []
        for g in failure_groups(results):
            if len(shown) >= MAX_FAILURES:
                break
            first, *rest = g["runs"][:MAX_FAILURES - len(shown)]
            shown += [first, *rest]
            lines += ["", f"**{escape(group_title(g))}**", "",
                      f"- {escape(result_id(first))}: final status {escape(first.get('final_status') or '-')}"]
            for f in first.get("failures") or []:
                lines.append(f"  - \\[{escape(rule_of(f))}\\] {escape(f['message'])}")
            if first.get("error"):
                lines.append(f"  - {escape(first['error'])}")
            for r in rest:  # the same rule: one line each, its first finding
                why = (r.get("failures") or [{}])[0].get("message") or r.get("error") or ""
                lines.append(f"- {escape(result_id(r))}: final status {escape(r.get('final_status') or '-')}"
                             + (f": {escape(why)}" if why else ""))
        if len(bad) > len(shown):
            lines += ["", f"... and {len(bad) - len(shown)} more (see the HTML or JUnit report)"]
        repro = [r["reproduce"] for r in shown if r.get("reproduce")]
        if repro:
            lines += ["", "Reproduce:", "", "```", *(_fence(x) for x in repro), "```"]
    return "\n".join(lines) + "\n"
