"""The results store: append-only runs and results, on SQLite and PostgreSQL, killed writers,
concurrent writers, and databases that are not a crashpoint store."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from crashpoint.errors import StoreError, UsageError
from crashpoint.reports.results_store import ResultStore, normalize_url
from needs import fresh_pg_database

INFO = {"engine": "reference", "engine_version": "0.1.0", "adapter": "ReferenceAdapter", "pack": "refunds",
        "pack_version": "1.0.0", "crash": "every", "git_commit": "a" * 40, "host": "ci-1", "source": "cli"}


def result(case_id: str, point: str = "none", verdict: str = "passed", **measures) -> dict:
    """A stored result dict as the harness makes it."""
    failures = [] if verdict == "passed" else [{"oracle": "side_effects", "message": f"{case_id} broke",
                                                "evidence": ["ledger#1 x"]}]
    return {"case_id": case_id, "crash_point": point, "verdict": verdict, "failures": failures, "error": None,
            "final_status": "succeeded", "stop_reason": "done", "wall_s": 0.25, "tags": [],
            "measures": measures, "reproduce": None if verdict == "passed" else f"crashpoint run x --crash-point '{point}'"}


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path: Path):
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'store' / 'results.db'}"
    else:
        yield from fresh_pg_database()


def test_a_run_round_trips(url: str) -> None:
    store = ResultStore(url)
    run_id = store.begin_run(INFO)
    store.add_result(run_id, result("a"))
    store.add_result(run_id, result("a", "after_effect:t", "failed", crashed=True))
    store.finish_run(run_id, {"coverage": {"draft": {"tool_failure": {"runs": 1, "passed": 1, "failed": 0}}}})
    stored = ResultStore(url, create=False).load_run("latest")
    assert stored["run"]["run_id"] == run_id and stored["run"]["complete"] is True
    assert stored["run"]["git_commit"] == "a" * 40 and stored["run"]["host"] == "ci-1"
    assert [(r["case_id"], r["crash_point"], r["verdict"]) for r in stored["results"]] == \
        [("a", "none", "passed"), ("a", "after_effect:t", "failed")]
    assert stored["results"][1]["measures"] == {"crashed": True}
    assert stored["run"]["summary"]["coverage"]["draft"]["tool_failure"]["runs"] == 1
    rows = store.results([run_id])
    assert rows[1]["oracle"] == "side_effects" and rows[1]["message"] == "a broke"
    assert store.resolve(run_id[:6]) == run_id
    with pytest.raises(UsageError, match="no matching run"):
        store.resolve("ffff0000")


WRITER = textwrap.dedent("""
    import os, signal, sys
    from crashpoint.reports.results_store import ResultStore
    url, name, n, kill = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4] == "kill"
    store = ResultStore(url)
    run_id = store.begin_run({"engine": name, "pack": "refunds"})
    for i in range(n):
        store.add_result(run_id, {"case_id": f"{name}_{i}", "crash_point": "none", "verdict": "passed"})
    if kill:
        os.kill(os.getpid(), signal.SIGKILL)
    store.finish_run(run_id)
""")


def _writer(url: str, name: str, n: int, kill: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(n), "kill" if kill else "finish"],
                            stderr=subprocess.PIPE, text=True)


def test_a_run_killed_half_way_keeps_its_rows_and_is_incomplete(url: str) -> None:
    proc = _writer(url, "killed", 5, kill=True)
    assert proc.wait(60) == -signal.SIGKILL, proc.stderr.read()
    stored = ResultStore(url, create=False).load_run("latest")
    assert stored["run"]["complete"] is False and stored["run"]["ended_at"] is None
    assert [r["case_id"] for r in stored["results"]] == [f"killed_{i}" for i in range(5)]


def test_two_processes_writing_at_once_lose_nothing(url: str) -> None:
    ResultStore(url).close()  # the tables exist; the writers race on rows, not on the schema
    procs = [_writer(url, name, 100) for name in ("one", "two")]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read()
    store = ResultStore(url, create=False)
    runs = store.runs()
    assert len(runs) == 2 and all(r["complete"] for r in runs)
    rows = store.results([r["run_id"] for r in runs])
    assert len(rows) == 200
    for run in runs:
        names = [r["case_id"] for r in rows if r["run_id"] == run["run_id"]]
        assert names == [f"{run['engine']}_{i}" for i in range(100)]  # each writer's order kept
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")
        assert sqlite3.connect(path).execute("pragma integrity_check").fetchone() == ("ok",)
        assert sqlite3.connect(path).execute("pragma journal_mode").fetchone() == ("wal",)


def test_two_processes_creating_a_new_store_at_once(url: str) -> None:
    procs = [_writer(url, name, 20) for name in ("one", "two")]
    for p in procs:
        assert p.wait(120) == 0, p.stderr.read()
    store = ResultStore(url, create=False)
    assert len(store.results([r["run_id"] for r in store.runs()])) == 40


def test_a_file_that_is_not_sqlite_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("my notes\n")
    with pytest.raises(StoreError, match=f"{path}: not a SQLite database"):
        ResultStore(f"sqlite:///{path}")
    assert path.read_text() == "my notes\n"


def test_a_foreign_sqlite_database_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    with sqlite3.connect(path) as conn:
        conn.execute("create table users (id integer primary key, name text)")
        conn.execute("insert into users (name) values ('ada')")
    before = path.read_bytes()
    with pytest.raises(StoreError, match=f"{path}: holds other tables .*users.*not a crashpoint results store"):
        ResultStore(str(path))
    assert path.read_bytes() == before


def test_a_store_with_a_damaged_table_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    ResultStore(str(path)).close()
    with sqlite3.connect(path) as conn:
        conn.execute("alter table crashpoint_results drop column measures")
    with pytest.raises(StoreError, match="crashpoint_results lacks column.*measures"):
        ResultStore(str(path))


def test_reading_a_missing_store_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match=f"{tmp_path / 'none.db'}: no such file"):
        ResultStore(str(tmp_path / "none.db"), create=False)
    assert not (tmp_path / "none.db").exists()


def test_urls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CRASHPOINT_RESULTS_DB", raising=False)
    assert normalize_url(None) == "sqlite:///.crashpoint/results.db"
    assert normalize_url("x/r.db") == "sqlite:///x/r.db"
    monkeypatch.setenv("CRASHPOINT_RESULTS_DB", "postgresql+psycopg://u@h/db")
    assert normalize_url(None) == "postgresql+psycopg://u@h/db"
    with pytest.raises(UsageError, match="not a database URL"):
        normalize_url("::nonsense://")
    with pytest.raises(UsageError, match="give a file"):
        ResultStore("sqlite://")


def test_a_sweep_killed_half_way_leaves_its_finished_results(tmp_path: Path) -> None:
    """End to end: ``crashpoint run --results-db`` SIGKILLed (with its workers) mid-sweep."""
    import os
    import time

    db = tmp_path / "results.db"
    proc = subprocess.Popen([sys.executable, "-m", "crashpoint.harness.cli.main", "run", "refunds", "--crash", "none",
                             "-q", "--jobs", "1", "--results-db", str(db)], cwd=tmp_path, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    count = 0
    while time.monotonic() < deadline and proc.poll() is None:
        if db.exists():
            with sqlite3.connect(db, timeout=5) as conn:
                try:
                    count = conn.execute("select count(*) from crashpoint_results").fetchone()[0]
                except sqlite3.OperationalError:  # tables not made yet
                    count = 0
            if count >= 3:
                break
        time.sleep(0.05)
    assert proc.poll() is None and count >= 3, proc.stderr.read() if proc.poll() is not None else count
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(30)
    stored = ResultStore(str(db), create=False).load_run("latest")
    assert stored["run"]["complete"] is False and stored["run"]["source"] == "cli"
    assert 3 <= len(stored["results"]) < 20
    assert all(r["verdict"] == "passed" and r["measures"] for r in stored["results"])
    from crashpoint.harness.cli.main import main

    assert main(["report", "--db", str(db), "--format", "markdown", "--out", str(tmp_path / "r.md")]) == 1
    assert (tmp_path / "r.md").read_text().startswith("### crashpoint: INCOMPLETE")


def test_a_damaged_store_is_refused_by_the_report_naming_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from crashpoint.harness.cli.main import main

    path = tmp_path / "r.db"
    store = ResultStore(str(path))
    store.add_result(store.begin_run(INFO), result("a"))
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("pragma wal_checkpoint(truncate)")
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) // 2])  # a copy cut short
    before = path.read_bytes()
    assert main(["report", "--db", str(path), "--out", str(tmp_path / "r.md")]) == 3  # ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert f"results database {path}: " in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert path.read_bytes() == before and not (tmp_path / "r.md").exists()


def test_rows_of_any_shape_render(tmp_path: Path) -> None:
    """A foreign writer (or a damaged row) may store any JSON: the renderers still work."""
    from crashpoint.reports import html, journal, junit, markdown

    store = ResultStore(str(tmp_path / "r.db"))
    run_id = store.begin_run(INFO)
    store.add_result(run_id, {"case_id": "x", "verdict": "failed", "failures": "not a list", "timeline": 5,
                              "measures": [1], "tags": "incident", "wall_s": "slow", "error": {"a": 1}})
    store.add_result(run_id, {"case_id": "y", "verdict": "failed", "failures": [{"oracle": 3}, "junk"],
                              "timeline": {"events": ["junk", {"seq": "?"}], "deliveries": 7}})
    store.finish_run(run_id, {"coverage": {"s": {"k": "junk"}, "t": 5}, "vacuity": ["junk"]})
    stored = store.load_run("latest")
    assert stored["results"][0]["failures"] == [] and stored["results"][0]["measures"] == {}
    assert stored["results"][1]["failures"] == [{"oracle": "3", "message": "", "evidence": []}]
    for render in (html.render, junit.render, markdown.render, journal.render):
        assert render(stored)


def test_a_write_that_fails_is_a_store_error_naming_the_store(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    store = ResultStore(str(path))
    run_id = store.begin_run(INFO)
    with sqlite3.connect(path) as conn:  # the table goes away behind the writer's back
        conn.execute("drop table crashpoint_results")
    with pytest.raises(StoreError, match=f"results database {path}: cannot be written .*OperationalError") as info:
        store.add_result(run_id, result("a"))
    assert info.value.file == str(path)
    with pytest.raises(StoreError, match="cannot be read"):
        store.results([run_id])


def _old_store(url: str) -> None:
    """A store as the version before ``unsupported`` made it: ``crashpoint_results.verdict`` VARCHAR(10)."""
    from sqlalchemy import MetaData, String, create_engine

    from crashpoint.reports import results_store as store_module

    old = MetaData()
    for table in store_module.metadata.sorted_tables:
        table.to_metadata(old)
    old.tables["crashpoint_results"].c.verdict.type = String(10)
    if url.startswith("sqlite"):
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url)
    old.create_all(engine)
    with engine.begin() as conn:
        conn.execute(old.tables["crashpoint_meta"].insert().values(key="format", value=store_module.FORMAT))
    engine.dispose()


def test_an_old_store_with_a_narrow_verdict_column_takes_unsupported(url: str) -> None:
    # issue 17: a PostgreSQL store made before `unsupported` has verdict VARCHAR(10); storing an
    # unsupported run (11 characters) failed there. Its next writer widens the column.
    from sqlalchemy import create_engine, inspect

    from crashpoint.reports.results_store import narrow_columns

    _old_store(url)
    engine = create_engine(url)
    assert narrow_columns(inspect(engine)) == [("crashpoint_results", "verdict", 10, 16)]  # seen by introspection
    ResultStore(url, create=False)  # opened by a reader
    assert narrow_columns(inspect(engine)) == [("crashpoint_results", "verdict", 10, 16)]  # a reader changes nothing
    store = ResultStore(url)
    run_id = store.begin_run(INFO)
    store.add_result(run_id, result("a", "after_effect:t", "unsupported"))
    store.finish_run(run_id)
    stored = ResultStore(url, create=False).load_run(run_id)
    assert [r["verdict"] for r in stored["results"]] == ["unsupported"]
    if not url.startswith("sqlite"):  # SQLite enforces no length and keeps the declared type
        assert narrow_columns(inspect(engine)) == []
    engine.dispose()
