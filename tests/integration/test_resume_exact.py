"""``--resume`` appends only to a run that matches exactly (issue 17 item 2, "Every verdict is earned").

Each test is one way a resumed run was stamped complete before although it was not the sweep asked
for: a subset selection, an edited case, a live second writer, a golden run that failed on resume,
an interrupted pytest session.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import main
from crashpoint.reports.results_store import ResultStore, _started, host_name

ROOT = Path(__file__).resolve().parents[2]
CASE = ROOT / "scenarios" / "refunds" / "cases" / "draft_fatal_failure.yaml"  # 6 crash points: 7 runs


def _runs(db: Path) -> list[tuple]:
    """``(run_id, complete, sorted (case, crash point, verdict) rows, row count)`` per stored run, oldest first."""
    con = sqlite3.connect(db)
    try:
        out = []
        for run_id, complete in con.execute("select run_id, complete from crashpoint_runs order by started_at"):
            rows = con.execute("select case_id, crash_point, verdict from crashpoint_results where run_id = ?",
                               (run_id,)).fetchall()
            out.append((run_id, bool(complete), sorted(rows), len(rows)))
        return out
    finally:
        con.close()


def _pack_copy(tmp_path: Path) -> Path:
    """A copy of the refunds pack holding only CASE; returns the case file's path."""
    dst = Path(shutil.copytree(CASE.parents[1], tmp_path / "refunds", ignore=shutil.ignore_patterns("cases")))
    (dst / "cases").mkdir()
    return Path(shutil.copy(CASE, dst / "cases"))


def _cut(db: Path, keep: int) -> str:
    """Keep only the first ``keep`` results of the store's one run and take its end stamp away (what a kill
    of the sweep leaves); its id."""
    con = sqlite3.connect(db)
    with con:
        (run_id,) = con.execute("select run_id from crashpoint_runs").fetchone()
        con.execute("delete from crashpoint_results where id not in (select id from crashpoint_results "
                    "order by id limit ?)", (keep,))
        con.execute("update crashpoint_runs set complete = 0, ended_at = null")
    con.close()
    return run_id


def test_a_subset_does_not_stamp_the_full_run_complete(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every"]) == 0
    full = _cut(db, keep=3)
    capsys.readouterr()
    point = "before_checkpoint:workflow_started"
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every", "--resume", "--crash-point", point]) == 0
    out = capsys.readouterr().out
    assert "resuming run" not in out and f"run {full} differs: --crash-point list" in out
    (first, complete, _, rows), (_, subset_complete, _, subset_rows) = _runs(db)
    assert first == full and not complete and rows == 3  # the cut full run: still incomplete, nothing added
    assert subset_complete and subset_rows == 2  # the subset is a run of its own: golden + one kill


def test_an_edited_case_starts_a_new_run(tmp_path, capsys):
    db, case = tmp_path / "r.db", _pack_copy(tmp_path)
    assert main(["run", str(case), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every", "--crash", "none"]) == 0
    old = _cut(db, keep=0)
    case.write_text(case.read_text() + "\n# edited\n")
    capsys.readouterr()
    assert main(["run", str(case), "--results-db", str(db), "-q", "--crash", "none", "--resume"]) == 0
    assert f"run {old} differs: case file(s) edited since: draft_fatal_failure" in capsys.readouterr().out
    assert [complete for _, complete, _, _ in _runs(db)] == [False, True]


def test_a_run_with_a_live_writer_is_refused_and_a_dead_writers_run_is_taken_over(tmp_path, capsys):
    db = tmp_path / "r.db"
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every"]) == 0
    run_id = _cut(db, keep=4)
    writer = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        con = sqlite3.connect(db)
        with con:
            con.execute("update crashpoint_run_keys set host = ?, pid = ?, pid_started = ?",
                        (host_name(), writer.pid, _started(writer.pid)))
        con.close()
        capsys.readouterr()
        assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every", "--resume"]) == 2
        assert f"still being written by pid {writer.pid}" in capsys.readouterr().err
        assert _runs(db)[0][3] == 4  # nothing written twice
    finally:
        writer.kill()
        writer.wait()
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every", "--resume"]) == 0
    ((again, complete, _, rows),) = _runs(db)
    assert again == run_id and complete and rows == 7
    assert ResultStore(db).run_key(run_id)["pid"] is None  # let go at the end


def test_a_golden_run_that_fails_on_resume_is_a_stored_failing_result(tmp_path, capsys, monkeypatch):
    db = tmp_path / "r.db"
    engine = "variants.misbehaving:FailsWhenTold"
    assert main(["run", str(CASE), "--engine", engine, "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every"]) == 0
    _cut(db, keep=3)  # the golden run and two kills recorded
    monkeypatch.setenv("VARIANT_FAIL_NOW", "1")  # the same engine, same version: its worker now breaks
    capsys.readouterr()
    assert main(["run", str(CASE), "--engine", engine, "--results-db", str(db), "-q", "--jobs", "2", "--crash", "every", "--resume"]) == 1
    assert "0 errors" not in capsys.readouterr().out
    ((_, complete, rows, _),) = _runs(db)
    assert ("draft_fatal_failure", "none", "error") in rows and complete


def test_an_interrupted_pytest_session_is_stored_incomplete(tmp_path):
    case = _pack_copy(tmp_path)
    shutil.copy(CASE.parent / "refund_approved_happy_path.yaml", case.parent)
    (tmp_path / "conftest.py").write_text(
        "def pytest_runtest_call(item):\n"
        "    if 'happy' in item.name:\n"
        "        raise KeyboardInterrupt\n")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", str(case.parents[1]),
                           f"--crashpoint-results-db={url}"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == pytest.ExitCode.INTERRUPTED, done.stdout[-2000:]
    ((_, complete, _, _),) = _runs(tmp_path / "results.db")
    assert not complete
