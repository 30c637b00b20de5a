"""An engine's strings reach every renderer escaped for its format and cut at a stated size (issue 17,
"The certificate Markdown and the certify terminal output carry engine strings raw ...; a 20 MB stop
reason gives 40 MB of terminal output and an 80 MB JUnit file"; and "a lone surrogate ... in an
engine's stop reason" raised UnicodeEncodeError writing --json)."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import main
from crashpoint.harness.run.certification import markdown as certificate_markdown
from crashpoint.scenarios import builtin_pack
from crashpoint.text import MAX_TEXT

TESTS = next(p for p in (Path(__file__).resolve().parents[1], Path(__file__).resolve().parent)
             if (p / "variants").is_dir())
#: Output size a 5 MB stop reason may cause, at most, per file.
BOUND = 200_000
RAW = ("\x00", "\x1b", "\x07", "\u202e", "\u2066", "\ud800")


def _no_raw_controls(text: str, where: str) -> None:
    found = [repr(c) for c in RAW if c in text]
    assert not found, f"{where} carries {found} raw"


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    import sys

    sys.path.insert(0, str(TESTS))
    tmp = tmp_path_factory.mktemp("hostile")
    case = builtin_pack("refunds") / "cases" / "draft_fatal_failure.yaml"
    db, doc = tmp / "r.db", tmp / "r.json"
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["run", str(case), "--crash", "none", "--adapter", "variants.hostile:HostileStopReason",
                     "--executor", "threads", "--json", str(doc), "--results-db", str(db), "--no-progress"])
        assert code == 1  # the stop reason lacks the expected text: a failed run, not a traceback
        texts = {"terminal": out.getvalue(), "json": doc.read_text(encoding="utf-8")}
        for fmt in ("junit", "markdown", "html"):
            target = tmp / f"r.{fmt}"
            main(["report", "--db", str(db), "--format", fmt, "--out", str(target)])
            texts[fmt] = target.read_text(encoding="utf-8")
    return texts


@pytest.mark.parametrize("fmt", ["terminal", "json", "junit", "markdown", "html"])
def test_a_5_mb_stop_reason_is_cut_with_a_marker(hostile_run: dict[str, str], fmt: str) -> None:
    text = hostile_run[fmt]
    assert len(text.encode("utf-8")) < BOUND, f"{fmt}: {len(text)} characters for one run"
    assert "more characters cut" in text


@pytest.mark.parametrize("fmt", ["terminal", "junit", "markdown", "html"])
def test_no_control_bidi_or_surrogate_reaches_a_reader(hostile_run: dict[str, str], fmt: str) -> None:
    _no_raw_controls(hostile_run[fmt], fmt)


def test_json_document_keeps_the_text_escaped_and_parses(hostile_run: dict[str, str]) -> None:
    doc = json.loads(hostile_run["json"])
    reason = doc["results"][0]["stop_reason"]
    assert reason.startswith("<script>") and "\\ud800" in reason and len(reason) < MAX_TEXT + 100


def test_junit_has_one_failure_and_no_markup(hostile_run: dict[str, str]) -> None:
    root = ET.fromstring(hostile_run["junit"])
    case = root.find("./testsuite/testcase")
    assert len(case.findall("failure")) == 1


def test_markdown_has_no_live_markup(hostile_run: dict[str, str]) -> None:
    md = hostile_run["markdown"]
    assert "<script>" not in md and "<b>" not in md
    assert not re.search(r"@(here|everyone)", md), "a live @mention"
    assert not re.search(r"https?://evil", md), "a live bare URL"
    assert "](https" not in md.replace("\\](", ""), "a live link"


def test_html_has_no_markup_from_the_engine(hostile_run: dict[str, str]) -> None:
    assert "<script>" not in hostile_run["html"] and "<b>bold" not in hostile_run["html"]


def test_certificate_markdown_escapes_engine_strings() -> None:
    from variants.hostile import HAZARDS

    evil = HAZARDS + "A" * 100_000
    cert = {"engine": {"name": evil, "version": evil, "adapter": "a:B`x"}, "pack": {"name": "p", "version": "1"},
            "created_at": "now", "level": 0, "level_name": "none",
            "summary": {"cases": 1, "crash_points": 1, "runs": 1, "passed": 0, "failed": 1, "errors": 0,
                        "unknown": 0, "wall_s": 1.0},
            "claims": [{"level": 1, "claim": "resume", "verdict": "failed", "passed": 0, "runs": 1,
                        "known_finding": evil, "failing": [{"case": "c", "crash_point": evil, "verdict": "failed",
                                                            "why": evil, "reproduce": "crashpoint run 'x`y'"}]}]}
    md = certificate_markdown(cert)
    _no_raw_controls(md, "certificate")
    spans = re.compile(r"(?<!`)(`+)(?!`)(.*?)(?<!`)\1(?!`)")  # CommonMark code spans: literal text
    prose = spans.sub("", md)
    assert "`" not in prose.replace("\\`", ""), "a code span left open"
    assert "<script>" not in prose and not re.search(r"@(here|everyone)", prose) and "https://evil" not in prose
    assert len(md) < 10 * MAX_TEXT + 5000
    rows = [line for line in md.splitlines() if line.startswith("| ")]
    cells = {len(re.findall(r"(?<!\\)\|", line)) for line in rows}
    assert cells == {7}, "an engine string split or added a table cell"


def test_trace_replay_and_incident_of_a_hostile_run(tmp_path: Path, monkeypatch, capsys) -> None:
    """--save-traces raised UnicodeEncodeError on the lone surrogate (exit 3 after the sweep); replay
    printed the engine's ESC and bidi characters raw; incident made a 5 MB case the loader refused."""
    import sys

    monkeypatch.syspath_prepend(str(TESTS))
    monkeypatch.chdir(tmp_path)
    case = builtin_pack("refunds") / "cases" / "draft_fatal_failure.yaml"
    assert main(["run", str(case), "--crash", "none", "--adapter", "variants.hostile:HostileStopReason",
                 "--executor", "threads", "--save-traces", "traces", "--no-progress"]) == 1
    trace = next((tmp_path / "traces").iterdir())
    doc = json.loads(trace.read_text(encoding="utf-8"))
    assert doc["run"]["stop_reason"].startswith("<script>") and "\ud800" in doc["run"]["stop_reason"]  # as recorded
    capsys.readouterr()
    assert main(["replay", str(trace)]) == 0
    _no_raw_controls(capsys.readouterr().out, "replay")
    assert main(["incident", str(trace), "--out", "incident.yaml"]) == 0
    assert (tmp_path / "incident.yaml").stat().st_size < 20_000
    _no_raw_controls(capsys.readouterr().out, "incident")
