"""JUnit XML of a stored run, for CI test views.

One ``<testsuite>`` per case (``name`` = case id, ``package`` = pack), one ``<testcase>`` per
(case, crash point) (``classname`` = ``crashpoint.<pack>.<case_id>``, ``name`` = ``golden`` or
``kill@POINT``, ``time`` = wall seconds). A ``failed`` run has one ``<failure>`` (``type`` = the
rule id of its first finding, such as ``side_effects.at_most_once``; ``message`` = that finding, with how many more;
the text holds every finding with its evidence, the ``reproduce:`` command and the ``group:`` line of
its rule and crash-point family, :func:`~crashpoint.reports.summary.failure_groups`); ``error`` and
``unknown`` runs have an ``<error>``. Every string is cut at :data:`MAX_ATTRIBUTE` characters.
Valid against the JUnit schema (``tests/data/junit-10.xsd``). Escaping is ElementTree's, after
control and bidirectional characters are shown as ``\\xNN`` / ``\\uNNNN``
(:func:`~crashpoint.reports.summary.visible`); any other character XML 1.0 cannot carry is ``?``.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from crashpoint.reports.summary import counts, failure_groups, group_title, per_case, rule_of, visible
from crashpoint.text import MAX_TEXT, clip

#: Characters kept of one string in an attribute or text line (an engine's 20 MB stop reason is cut
#: here even in a store written before results were bounded; see :mod:`crashpoint.text`).
MAX_ATTRIBUTE = MAX_TEXT

_BAD_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _clean(value: Any) -> str:
    return _BAD_XML.sub("?", visible(clip("" if value is None else str(value), MAX_ATTRIBUTE)))


def _time(seconds: Any) -> str:
    return f"{float(seconds or 0.0):.3f}"


def _problem(parent: ET.Element, r: dict[str, Any], group: str = "") -> None:
    repro = "\n".join(x for x in (f"reproduce: {r['reproduce']}" if r.get("reproduce") else "", group) if x)
    if r["verdict"] == "failed":
        found = r.get("failures") or []
        if not found:
            ET.SubElement(parent, "failure", type="verdict", message="failed").text = _clean(repro)
            return
        first = found[0]
        more = f" (+{len(found) - 1} more finding(s))" if len(found) > 1 else ""
        el = ET.SubElement(parent, "failure", type=_clean(rule_of(first)), message=_clean(f"{first['message']}{more}"))
        body = [line for f in found for line in (f"[{_clean(rule_of(f))}] {_clean(f['message'])}",
                                                 *(f"    {_clean(e)}" for e in f.get("evidence", [])))]
        el.text = "\n".join([*body, _clean(repro)]).strip()
    elif r["verdict"] in ("error", "unknown"):
        el = ET.SubElement(parent, "error", type=r["verdict"], message=_clean(r.get("error") or r["verdict"]))
        el.text = "\n".join(_clean(x) for x in (r.get("error") or "", repro) if x)
    elif r["verdict"] == "unsupported":  # the engine lacks a feature the case needs: not run, not passed
        ET.SubElement(parent, "skipped", message=_clean(r.get("error") or "unsupported"))


def render(stored: dict[str, Any]) -> str:
    """The JUnit XML document (a ``str`` with the XML declaration) of a stored run."""
    run, results = stored["run"], stored["results"]
    total = counts(results)
    group_of = {id(r): f"group: {group_title(g)}" for g in failure_groups(results) for r in g["runs"]}
    root = ET.Element("testsuites", name=_clean(f"crashpoint {run.get('pack')}"),
                      tests=str(total["runs"]), failures=str(total["failed"]),
                      errors=str(total["error"] + total["unknown"]),
                      time=_time(sum(float(r.get("wall_s") or 0) for r in results)))
    for case_id, c in per_case(results).items():
        rows = [r for r in results if r["case_id"] == case_id]
        suite = ET.SubElement(root, "testsuite", name=_clean(case_id), tests=str(c["runs"]),
                              failures=str(c["failed"]), errors=str(c["error"] + c["unknown"]),
                              skipped=str(c.get("unsupported", 0)),
                              time=_time(sum(float(r.get("wall_s") or 0) for r in rows)),
                              timestamp=_clean(run.get("started_at")), hostname=_clean(run.get("host") or "unknown"),
                              package=_clean(run.get("pack")))
        props = ET.SubElement(suite, "properties")
        for key in ("run_id", "engine", "engine_version", "adapter", "pack_version", "crash", "git_commit"):
            ET.SubElement(props, "property", name=key, value=_clean(run.get(key)))
        for r in rows:
            name = "golden" if r["crash_point"] == "none" else f"kill@{r['crash_point']}"
            case = ET.SubElement(suite, "testcase", name=_clean(name), classname=_clean(f"crashpoint.{run.get('pack')}.{case_id}"),
                                 time=_time(r.get("wall_s")))
            _problem(case, r, group_of.get(id(r), ""))
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"
