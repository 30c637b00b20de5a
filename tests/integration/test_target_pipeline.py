"""A team's own code goes through the pipeline a pack goes through (issue 23): a target run is recorded in the
results store, rendered by ``crashpoint report`` in every format and by the weekly report, kept as trace files that
``crashpoint replay`` runs again, and an interrupted target sweep resumes exactly."""

from __future__ import annotations

import json
import sqlite3
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.cli.main import main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
POINT = "after_effect:issue_refund"


def _target(folder: Path, entry: str = "langgraph_refund.graph:builder") -> Path:
    """The LangGraph example's target file, its entry ``entry`` (``variants:no_key`` issues the refund twice after a
    kill at POINT), its pythonpath absolute."""
    text = (ROOT / "examples/langgraph_refund/target.yaml").read_text()
    text = text.replace("entry: langgraph_refund.graph:builder", f"entry: {entry}")
    text = text.replace('pythonpath: [".."]', f"pythonpath: [{json.dumps(str(ROOT / 'examples'))}]")
    path = folder / "target.yaml"
    path.write_text(text)
    return path


def _rows(db: Path) -> list[tuple]:
    con = sqlite3.connect(db)
    try:
        return sorted(con.execute("select case_id, crash_point, verdict, oracle from crashpoint_results").fetchall())
    finally:
        con.close()


def test_a_target_run_is_recorded_rendered_traced_and_replayed(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    target = _target(tmp_path, "langgraph_refund.variants:no_key")
    db, traces = tmp_path / "r.db", tmp_path / "traces"
    code = main(["run", str(target), "--case", "approved", "--crash-point", POINT, "--crash", "every",
                 "--results-db", str(db), "--save-traces", str(traces), "--json", str(tmp_path / "out.json")])
    assert code == 1, capsys.readouterr().out
    assert _rows(db) == [("approved[sync]", POINT, "failed", "side_effects.at_most_once"),
                         ("approved[sync]", "none", "passed", None)]
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["subject"]["kind"] == "target" and doc["per_case"]["approved[sync]"]["failed"] == 1

    for fmt in ("junit", "markdown", "html", "json"):
        assert main(["report", "latest", "--db", str(db), "--format", fmt, "--out", str(tmp_path / f"r.{fmt}")]) == 1
    suite = ET.parse(tmp_path / "r.junit").getroot()
    cases = {c.get("name"): c for c in suite.iter("testcase")}
    failed = [n for n, c in cases.items() if c.find("failure") is not None]
    assert len(cases) == 2 and len(failed) == 1 and POINT in failed[0], list(cases)
    assert "side_effects.at_most_once" in ET.tostring(cases[failed[0]], encoding="unicode")
    for fmt in ("markdown", "html"):
        assert "approved[sync]" in (tmp_path / f"r.{fmt}").read_text().replace("\\[", "[").replace("\\]", "]")
    capsys.readouterr()
    assert main(["report", "--weekly", "--db", str(db), "--since", "2020-01-06", "--until", "2099-12-27",
                 "--format", "json", "--out", str(tmp_path / "w.json")]) in (0, 1)
    weekly = json.loads((tmp_path / "w.json").read_text())
    (row,) = weekly["subjects"]
    assert row["subject"] == "langgraph-refund" and row["engine"] == "langgraph"
    assert sum(w["results"] for w in row["weeks"]) == 2 and sum(w["passed"] for w in row["weeks"]) == 1

    failing = next(traces.glob("*after_effect_issue_refund*"))
    assert main(["replay", str(failing)]) == 0, capsys.readouterr().out  # the same schedule, the same double refund
    assert "replay matches the recorded run: verdict failed" in capsys.readouterr().out
    doctored = json.loads(failing.read_text())
    doctored["outcome"]["calls"] = [c for c in doctored["outcome"]["calls"] if c["effect"] != "issue_refund"]
    (tmp_path / "doctored.trace.json").write_text(json.dumps(doctored))
    assert main(["replay", str(tmp_path / "doctored.trace.json")]) == 1
    assert "effects applied differ" in capsys.readouterr().out


def _cut(db: Path, keep: int) -> None:
    """Keep the first ``keep`` results of the store's one run and take its end stamp away (what a kill leaves)."""
    con = sqlite3.connect(db)
    with con:
        con.execute("delete from crashpoint_results where id not in (select id from crashpoint_results "
                    "order by id limit ?)", (keep,))
        con.execute("update crashpoint_runs set complete = 0, ended_at = null")
    con.close()


def test_an_interrupted_target_sweep_resumes_exactly(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    target = _target(tmp_path)
    full, cut = tmp_path / "full.db", tmp_path / "cut.db"
    args = ["run", str(target), "--case", "never-answered", "--crash", "every"]
    assert main([*args, "--results-db", str(full)]) == 0, capsys.readouterr().out
    assert main([*args, "--results-db", str(cut)]) == 0
    whole = _rows(cut)
    _cut(cut, 7)
    capsys.readouterr()
    assert main([*args, "--results-db", str(cut), "--resume"]) == 0
    out = capsys.readouterr().out
    assert "resuming run" in out and "7 result(s) already recorded" in out, out
    con = sqlite3.connect(cut)
    assert con.execute("select count(*), min(complete) from crashpoint_runs").fetchone() == (1, 1)
    con.close()
    assert _rows(cut) == whole == _rows(full), "the resumed run holds exactly the runs of an uninterrupted sweep"
