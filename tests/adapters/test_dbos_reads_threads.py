"""crashpoint's own reads of a DBOS SQLite system database from several threads at once (issue 27 item 8).

A DBOS worker reads the system database from its main thread (is everything at rest?) and from every effect call,
which runs in one of DBOS's executor threads (does the workflow have a status row yet?). With one ``sqlite3``
connection shared by all of them, 20 queued workflows recovered by two workers failed
``target.durable_before_effect`` in 20 of 403 runs (dbos 3.4.0) on correct code: a read that failed after the 5 s
busy timeout was reported by CPython with another thread's result code on that connection (``another row
available``, ``no more rows available``, or no error at all, an empty answer: "no status row"). Each thread now
reads through a connection of its own; the broken DBOS below shows the rule still catches a step that really runs
before its workflow is durable.
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from installed import needs

from crashpoint.harness.engines import dbos_reads
from crashpoint.harness.engines.dbos_reads import SystemReads

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = [f"wf-{i}" for i in range(6)]


def _system_db(path: Path) -> Path:
    """A SQLite file with the three DBOS tables the reads look at, a status row and a step result per workflow."""
    conn = sqlite3.connect(path)
    conn.executescript("CREATE TABLE workflow_status (workflow_uuid TEXT PRIMARY KEY, status TEXT);"
                       "CREATE TABLE notifications (message_uuid TEXT PRIMARY KEY, destination_uuid TEXT, "
                       "topic TEXT, consumed BOOLEAN);"
                       "CREATE TABLE operation_outputs (workflow_uuid TEXT, function_id INTEGER);")
    conn.executemany("INSERT INTO workflow_status VALUES (?, 'PENDING')", [(wf,) for wf in WORKFLOWS])
    conn.executemany("INSERT INTO operation_outputs VALUES (?, 1)", [(wf,) for wf in WORKFLOWS])
    conn.commit()
    conn.close()
    return path


def test_each_thread_reads_through_a_connection_no_other_thread_uses(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Every connection the reads open is used by the one thread that made it (the main thread's rest checks and six
    effect threads reading at once, met at a barrier). Before: one connection, used by all seven threads."""
    db = _system_db(tmp_path / "dbos.sqlite")
    users: dict[int, set[int]] = {}  # connection -> the threads that executed SQL on it
    made: list[sqlite3.Connection] = []  # kept alive, so no two connections share an id()

    class Recorded(sqlite3.Connection):
        def execute(self, *args, **kwargs):  # type: ignore[no-untyped-def, override]
            users.setdefault(id(self), set()).add(threading.get_ident())
            return super().execute(*args, **kwargs)

    real = sqlite3.connect

    def connect(*args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(real(*args, **{**kwargs, "factory": Recorded}))
        return made[-1]

    monkeypatch.setattr(dbos_reads.sqlite3, "connect", connect)
    reads = SystemReads(sqlite_file=db)
    assert reads.snapshot() is not None and reads.has_status("wf-0") is True  # the main thread first
    meet = threading.Barrier(len(WORKFLOWS))
    answers: dict[str, tuple[object, ...]] = {}

    def effect_call(wf: str) -> None:
        meet.wait(timeout=10)
        answers[wf] = (reads.has_status(wf), reads.step_recorded(wf, 1), reads.message_waiting(wf, "approval"),
                       reads.has_status(wf + "-never-started"))

    threads = [threading.Thread(target=effect_call, args=(wf,)) for wf in WORKFLOWS]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert reads.snapshot() is not None  # the main thread again, after them
    assert answers == {wf: (True, True, False, False) for wf in WORKFLOWS}
    shared = {conn: sorted(tids) for conn, tids in users.items() if len(tids) > 1}
    assert not shared, f"connection(s) used by several threads: {shared}"
    assert len(users) == 1 + len(WORKFLOWS)  # one per thread that read


@pytest.mark.slow
@needs("dbos")
def test_a_dbos_that_runs_a_step_before_writing_the_workflows_status_fails_durable_before_effect(
        tmp_path: Path) -> None:
    """tests/data/dbos_engines/late_status.py writes a directly started workflow's status row only when its first step
    is recorded: that step's effect runs while DBOS holds no record of the workflow, and the golden run says so."""
    from crashpoint.harness.load.target import Target
    from crashpoint.harness.run.target_sweep import run_one

    data = Target.from_file(ROOT / "examples/dbos_refund/target.yaml").to_data()
    data["entry"] = "late_status:refund_workflow"
    data["pythonpath"] = [*data["pythonpath"], str(ROOT / "tests/data/dbos_engines")]
    target = Target.from_data(data)
    result = run_one(target, target.case("approved"), "sync", tmp_path, None, None)
    flagged = [f for f in result.failures if f.rule == "target.durable_before_effect"]
    assert result.verdict == "failed" and flagged, (result.error, [f.message for f in result.failures])
    late = [c for c in result.outcome.calls if c.durable is False]
    assert [(c.effect, c.thread) for c in late] == [("draft_refund", "refund-1001")]  # the queued refund-1002 is fine
    assert all(c.durable for c in result.outcome.calls if c not in late)
