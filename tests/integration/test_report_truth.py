"""Reports that do not mislead (issue 17, "Reports mislead"): the stored adapter is the real one, a
suggested command reproduces, failures are grouped, the weekly report keys by engine."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.cli.main import main
from crashpoint.reports.results_store import ResultStore
from crashpoint.scenarios import builtin_pack

REFUNDS = builtin_pack("refunds")


def test_stored_adapter_column_names_the_real_adapter_not_the_guard(tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.db"
    case = REFUNDS / "cases" / "refund_approved_happy_path.yaml"
    spec = "crashpoint.harness.adapters.reference:ReferenceAdapter"
    assert main(["run", str(case), "--crash", "none", "--adapter", spec, "--results-db", str(db),
                 "--no-progress"]) == 0
    store = ResultStore(str(db))
    run = store.load_run("latest")["run"]
    assert run["adapter"] == "ReferenceAdapter"


def _stored(verdict_of, engine: str = "reference") -> dict:
    """A stored run: one case, a golden run and 12 crash runs; ``verdict_of(i)`` for run i."""
    results = []
    points = ["none"] + [f"{kind}:{name}" for kind in ("before_checkpoint", "after_checkpoint", "before_effect")
                         for name in ("a", "b", "c", "d")]
    for i, point in enumerate(points):
        bad = verdict_of(i) != "passed"
        results.append({"case_id": "c", "crash_point": point, "verdict": verdict_of(i), "error": None,
                        "final_status": "cancelled", "wall_s": 0.1,
                        "failures": [{"oracle": "side_effects", "message": "compensation never applied",
                                      "evidence": ["ledger#1 x"]},
                                     {"oracle": "trace", "message": "missing compensation_result", "evidence": []}]
                        if bad else [],
                        "measures": {"crashed": point != "none", "golden_points": 12 if point == "none" else 0},
                        "reproduce": f"crashpoint run c.yaml --crash-point {point}" if bad else None,
                        "timeline": {"events": [{"seq": 1, "at": 0, "kind": "tool_call", "text": "t"}],
                                     "deliveries": [], "truncated": 0} if bad else None})
    return {"run": {"run_id": "r1", "engine": engine, "pack": "refunds", "complete": True, "crash": "every"},
            "results": results}


def test_twelve_failures_of_one_bug_are_one_group_everywhere() -> None:
    """Before: 12 expanded timelines in HTML, 12 separate blocks in the terminal, 36 <failure> elements."""
    import xml.etree.ElementTree as ET

    from crashpoint.reports import html, junit
    from crashpoint.reports import terminal as text

    stored = _stored(lambda i: "passed" if i == 0 else "failed")
    term = text.failures({"results": stored["results"]})
    assert term.count("FAILED [side_effects]: 12 runs in 1 case") == 1
    assert "after_checkpoint:* (4), before_checkpoint:* (4), before_effect:* (4)" in term  # ties by name
    assert term.count("reproduce:") == 1 and term.count("ledger#1 x") == 1
    page = html.render(stored)
    assert page.count("<h4>Trace timeline") == 1 and page.count('<section class="group">') == 1
    root = ET.fromstring(junit.render(stored))
    failed = [c for c in root.iter("testcase") if c.find("failure") is not None]
    assert len(failed) == 12 and len(list(root.iter("failure"))) == 12
    assert all("group: FAILED [side_effects]: 12 runs" in c.find("failure").text for c in failed)
    assert all("missing compensation_result" in c.find("failure").text for c in failed)


def test_html_and_markdown_show_crash_points_covered_as_a_percentage() -> None:
    from crashpoint.reports import html, markdown

    stored = _stored(lambda i: "passed")
    assert "100.0% (12 of 12)" in html.render(stored)
    assert "| crash points covered | 100.0% (12 of 12) |" in markdown.render(stored)


def test_weekly_keys_carry_the_engine(tmp_path: Path) -> None:
    """A broken engine's failures and the reference engine's passes on the same commit: before, one
    'flaky' key per crash point and 'new failures: none'."""
    from datetime import date

    from freezegun import freeze_time

    from crashpoint.reports import weekly

    store = ResultStore(str(tmp_path / "w.db"))
    for when, engine, verdict in (("2026-11-04 09:00:00", "reference", "passed"),
                                  ("2026-11-11 09:00:00", "reference", "passed"),
                                  ("2026-11-11 10:00:00", "broken", "failed")):
        with freeze_time(when):
            run_id = store.begin_run({"engine": engine, "pack": "refunds", "git_commit": "c1"})
            for r in _stored(lambda i: verdict, engine)["results"][:3]:
                store.add_result(run_id, r)
            store.finish_run(run_id)
    report = weekly.weekly(store, date(2026, 11, 4), date(2026, 11, 17))
    assert report["flaky"] == []
    assert [(x["engine"], x["crash_point"]) for x in report["new_failures"]] == \
        [("broken", "before_checkpoint:a"), ("broken", "before_checkpoint:b"), ("broken", "none")]
    text = "\n".join(weekly.sentences(report))
    assert "new failures: c at before_checkpoint:a on broken" in text and "flaky: none" in text


def test_incident_suggests_a_command_that_reproduces(tmp_path: Path, monkeypatch, capsys) -> None:
    """Before: 'put it in the cases folder of a pack ..., then: crashpoint run PATH_IN_PACK --crash none'
    (no engine, no crash point: nothing to paste, and it would have run the fixed reference engine)."""
    import os
    import shutil
    import subprocess
    import sys

    tests = next(p for p in Path(__file__).resolve().parents if (p / "variants").is_dir())
    pack = tmp_path / "pack"
    shutil.copytree(REFUNDS, pack, ignore=shutil.ignore_patterns("cases"))
    (pack / "cases").mkdir()
    shutil.copy(REFUNDS / "cases" / "cancel_while_waiting_compensates_draft.yaml", pack / "cases")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tests))
    engine = "variants.engines:NoCompensationOnCancel"
    assert main(["run", str(pack), "--engine", engine, "--crash-point", "after_checkpoint:refund_draft",
                 "--save-traces", "traces", "--no-progress", "-q"]) == 1
    trace = next(p for p in (tmp_path / "traces").iterdir() if "after_checkpoint" in p.name)
    capsys.readouterr()
    assert main(["incident", str(trace), "--out", "incident.yaml"]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("reproduce: "))
    command = line.removeprefix("reproduce: ")
    assert "--engine" in command and "--crash-point after_checkpoint:refund_draft" in command
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
           "PYTHONPATH": os.pathsep.join([str(tests), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(["sh", "-c", command + " --no-progress"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "compensation refunds.cancelRefundDraft was never applied" in done.stdout
