"""Untrusted strings (engine error messages, oracle findings, crash point names, reproduce commands)
in every report format: HTML, JUnit XML, Markdown, terminal.

The renderers belong to ``reports/``; findings there are recorded here as strict xfails (they pass
once fixed, and then the mark must go). Control characters in text, markdown and HTML: fixed
(``crashpoint.reports.summary.visible``)."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from crashpoint.harness.cli.report import render_stored
from crashpoint.reports import terminal as text
from crashpoint.reports.results_store import ResultStore

#: What an engine may print: markup, XML CDATA end, ANSI colour and OSC title sequences, NUL, a bidi override.
EVIL = ("<script>alert(1)</script> <img src=x onerror=alert(1)> & ]]> \x1b[31mred\x1b[0m \x1b]0;pwned\x07 "
        "| *bold* `tick` \x00 \u202e")
#: Terminal control characters that must never reach a terminal or a report raw (C0 but tab/newline, DEL, C1).
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _result() -> dict[str, Any]:
    return {"case_id": "case_x", "crash_point": "before_effect:" + EVIL, "verdict": "error", "error": EVIL,
            "failures": [{"oracle": "side_effects", "message": EVIL, "evidence": [EVIL]}],
            "reproduce": "crashpoint run x " + EVIL,
            "timeline": {"events": [{"seq": 1, "at": 0, "kind": "tool_call", "text": EVIL}], "deliveries": [],
                         "truncated": 0}}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    store = ResultStore(tmp_path_factory.mktemp("esc") / "r.db")
    run = store.begin_run({"engine": "eng<b>", "pack": "p|k", "crash": "every"})
    store.add_result(run, _result())
    store.finish_run(run, {"summary": {}})
    data = store.load_run("latest")
    store.close()
    return data


def test_html_has_no_live_markup(stored: dict[str, Any]) -> None:
    out = render_stored(stored, "html")
    assert "<script>" not in out and "<img src=x" not in out and "&lt;script&gt;" in out


def test_junit_is_well_formed_xml_with_the_text_escaped(stored: dict[str, Any]) -> None:
    out = render_stored(stored, "junit")
    root = ET.fromstring(out)
    assert "<script>" not in out
    assert any("alert(1)" in (el.text or "") + " ".join(el.attrib.values()) for el in root.iter())


def test_markdown_escapes_markup_outside_the_code_block(stored: dict[str, Any]) -> None:
    out = render_stored(stored, "markdown")
    outside = re.sub(r"```.*?```", "", out, flags=re.S)
    assert "<script>" not in outside and "<img" not in outside


def test_markdown_code_block_cannot_be_closed_by_a_reproduce_command(tmp_path: Path) -> None:
    store = ResultStore(tmp_path / "r.db")
    run = store.begin_run({"engine": "e", "pack": "p", "crash": "every"})
    store.add_result(run, {"case_id": "c", "crash_point": "x", "verdict": "failed", "error": None,
                           "failures": [{"oracle": "trace", "message": "m", "evidence": []}],
                           "reproduce": "crashpoint run x\n```\n<img src=x onerror=alert(1)>\n```"})
    store.finish_run(run, {})
    out = render_stored(store.load_run("latest"), "markdown")
    store.close()
    outside = re.sub(r"```.*?```", "", out, flags=re.S)
    assert "<img" not in outside


def test_terminal_failures_carry_no_control_characters() -> None:
    out = text.failures({"results": [_result()]})
    assert not CONTROL.search(out), repr(out)


def test_markdown_carries_no_control_characters(stored: dict[str, Any]) -> None:
    out = render_stored(stored, "markdown")
    assert not CONTROL.search(out), repr(CONTROL.findall(out))


def test_html_carries_no_control_characters(stored: dict[str, Any]) -> None:
    out = render_stored(stored, "html")
    assert not CONTROL.search(out), repr(CONTROL.findall(out))
