"""What makes a DBOS worker start fast (:mod:`crashpoint.harness.engines.dbos_warm`) changes nothing DBOS sees: a
seeded system database has the schema DBOS's own migrations make, the unsynced one is only the run's file, and
the queue manager's check interval is the worker's."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.engines import dbos_worker  # noqa: E402
from crashpoint.harness.engines import dbos_warm

#: Launches DBOS on ARGV[1] after the given dbos_warm calls, prints what DBOS's engine and queue manager use.
LAUNCH = """
import json, os, sys
from pathlib import Path
import sqlalchemy as sa
from crashpoint.harness.engines import dbos_warm
db, other, patch = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "yes"
if patch:
    dbos_warm.seed_schema(db)
    dbos_warm.unsynced(db)
    patched = dbos_warm.fast_queue_manager(0.05)
from dbos import DBOS
from dbos import _dbos, _queue
DBOS(config={"name": "warm-test", "system_database_url": f"sqlite:///{db}", "application_version": "v",
             "executor_id": "e", "log_level": "WARNING"})
DBOS.launch()
with _dbos._dbos_global_instance._sys_db.engine.connect() as c:
    sync = c.execute(sa.text("PRAGMA synchronous")).scalar()
with sa.create_engine(f"sqlite:///{other}").connect() as c:
    other_sync = c.execute(sa.text("PRAGMA synchronous")).scalar()
print(json.dumps({"sync": sync, "other": other_sync,
                  "consts": [c for c in _queue.queue_thread.__code__.co_consts if type(c) is float]}), flush=True)
os._exit(0)
"""


def _launch(tmp_path: Path, name: str, patch: bool) -> dict:
    out = subprocess.run([sys.executable, "-c", LAUNCH, str(tmp_path / name), str(tmp_path / f"{name}-other.sqlite"),
                          "yes" if patch else "no"], capture_output=True, text=True, timeout=120, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _schema(path: Path) -> tuple[list, list]:
    with sqlite3.connect(path) as db:
        return (sorted(db.execute("SELECT type, name, sql FROM sqlite_master")),
                list(db.execute("SELECT * FROM dbos_migrations")))


@pytest.mark.slow  # launches DBOS in two new interpreters
def test_a_seeded_database_is_what_dbos_migrates_and_only_it_is_unsynced(tmp_path: Path) -> None:
    own = _launch(tmp_path, "own.sqlite", patch=False)
    warm = _launch(tmp_path, "warm.sqlite", patch=True)
    assert _schema(tmp_path / "warm.sqlite") == _schema(tmp_path / "own.sqlite")
    assert own["sync"] != 0 and warm["sync"] == 0  # OFF on the run's system database only
    assert warm["other"] == own["other"] != 0
    assert dbos_warm.QUEUE_CHECK_S in own["consts"] and dbos_warm.QUEUE_CHECK_S not in warm["consts"]
    assert 0.05 in warm["consts"]


def test_seeding_never_replaces_a_database_that_exists(tmp_path: Path) -> None:
    db = tmp_path / "dbos.sqlite"
    db.write_bytes(b"")
    assert dbos_warm.seed_schema(db) is False and db.read_bytes() == b""
    fresh = tmp_path / "fresh.sqlite"
    assert dbos_warm.seed_schema(fresh) is True
    assert _schema(fresh)[1] and not list(tmp_path.glob("*.seed"))


def test_a_snapshot_of_the_system_database_changes_with_every_row_rest_is_judged_from(tmp_path: Path) -> None:
    """The worker's settle loop asks DBOS's API again only when :meth:`SystemReads.snapshot` (and the ``recv``
    marks) changed: every write DBOS makes that rest depends on must change it, and nothing else may."""
    from crashpoint.harness.engines import dbos_worker
    from crashpoint.harness.engines.dbos_reads import SystemReads

    db = tmp_path / "dbos.sqlite"
    assert SystemReads(sqlite_file=tmp_path / "empty.sqlite").snapshot() is None  # no tables yet: unknown
    assert dbos_warm.seed_schema(db)
    reads = SystemReads(sqlite_file=db)
    conn = sqlite3.connect(db, isolation_level=None)
    seen = [dbos_worker._state(reads, tmp_path)]
    assert dbos_worker._state(reads, tmp_path) == seen[-1]
    for write in ("INSERT INTO workflow_status (workflow_uuid, status) VALUES ('wf', 'PENDING')",
                  "INSERT INTO operation_outputs (workflow_uuid, function_id) VALUES ('wf', 1)",
                  "INSERT INTO notifications (destination_uuid, topic, message) VALUES ('wf', 'approval', 'yes')",
                  "UPDATE notifications SET consumed = TRUE",
                  "UPDATE workflow_status SET executor_id = 'other'",
                  "UPDATE workflow_status SET status = 'SUCCESS'",
                  "DELETE FROM notifications"):
        conn.execute(write)
        now = dbos_worker._state(reads, tmp_path)
        assert now not in seen, write
        seen.append(now)
    (tmp_path / dbos_worker.WAITING_DIR).mkdir()
    (tmp_path / dbos_worker.WAITING_DIR / "wf.json").write_text("{}")
    assert dbos_worker._state(reads, tmp_path) not in seen
    assert SystemReads(url="postgresql://nobody@127.0.0.1:1/none").snapshot() is None  # PostgreSQL: every look


def test_a_consumed_message_is_not_waiting(tmp_path: Path) -> None:
    """dbos (2.20.0 to 3.4.0) marks a message ``consumed`` when ``recv`` takes it, keeping the row: a workflow that waits
    again on the same topic (a re-ask) is blocked with no message waiting, not kept from rest by the old one."""
    from crashpoint.harness.engines.dbos_reads import SystemReads

    db = tmp_path / "dbos.sqlite"
    assert dbos_warm.seed_schema(db)
    reads, conn = SystemReads(sqlite_file=db), sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO workflow_status (workflow_uuid, status) VALUES ('wf', 'PENDING')")
    conn.execute("INSERT INTO notifications (destination_uuid, topic, message) VALUES ('wf', 'approval', 'yes')")
    assert reads.message_waiting("wf", "approval") and not reads.message_waiting("wf", "other")
    conn.execute("UPDATE notifications SET consumed = TRUE")
    assert not reads.message_waiting("wf", "approval")
    old = tmp_path / "old.sqlite"  # a release whose notifications have no consumed column: a taken message is gone
    sqlite3.connect(old, isolation_level=None).execute(
        "CREATE TABLE notifications (destination_uuid TEXT, topic TEXT, message TEXT)").connection.execute(
        "INSERT INTO notifications VALUES ('wf', 'approval', 'yes')")
    assert SystemReads(sqlite_file=old).message_waiting("wf", "approval")


def test_a_recv_that_took_its_message_is_not_blocked_while_its_wrapper_returns(tmp_path: Path) -> None:
    """DBOS marks the message consumed and records the ``recv``'s result in one transaction; the workflow then runs
    on (the next step, an effect) while the worker's ``waiting/`` mark is still there. Read as blocked, the answer
    worker took the workflow for at rest and exited inside the next step, and a new worker ran its effect again
    (``target.repeats_explained``, 2 of 212 runs of the example at 19:24 and 19:29 on 2026-12-01)."""
    from crashpoint.harness.engines.dbos_reads import SystemReads

    db = tmp_path / "dbos.sqlite"
    assert dbos_warm.seed_schema(db)
    reads, conn = SystemReads(sqlite_file=db), sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO workflow_status (workflow_uuid, status) VALUES ('wf', 'PENDING')")
    conn.execute("INSERT INTO operation_outputs (workflow_uuid, function_id, function_name) VALUES ('wf', 3, 'DBOS.sleep')")
    (tmp_path / dbos_worker.WAITING_DIR).mkdir()
    (tmp_path / dbos_worker.WAITING_DIR / "wf.json").write_text(json.dumps(
        {"node": "approval", "interrupt": "wf:2", "topic": "approval", "pid": 1, "timeout_step": 3, "function_id": 2}))
    assert dbos_worker._blocked(tmp_path, reads, "wf", "PENDING") is not None  # waiting for a human
    conn.execute("INSERT INTO notifications (destination_uuid, topic, message, consumed) VALUES ('wf', 'approval', 'y', TRUE)")
    conn.execute("INSERT INTO operation_outputs (workflow_uuid, function_id, function_name) VALUES ('wf', 2, 'DBOS.recv')")
    assert dbos_worker._blocked(tmp_path, reads, "wf", "PENDING") is None  # the recv returned in the database


def test_a_recv_that_takes_its_message_between_two_reads_is_not_blocked(tmp_path: Path) -> None:
    """The ``recv`` commits (message consumed, its result recorded) while ``_blocked`` reads: own result read
    first, then the message, it was seen neither recorded nor with a message waiting, hence blocked, and the answer worker
    exited inside ``issue_refund`` (CI at b489126: ``test_a_broken_issue_step_is_caught_3_of_3[refund_without_key]``,
    an empty ``crash.fired``, the step run again by the next worker). A failed read of the message is never
    blocked either (it was: no message seen)."""
    from crashpoint.harness.engines.dbos_reads import SystemReads

    db = tmp_path / "dbos.sqlite"
    assert dbos_warm.seed_schema(db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("INSERT INTO workflow_status (workflow_uuid, status) VALUES ('wf', 'PENDING')")
    conn.execute("INSERT INTO operation_outputs (workflow_uuid, function_id, function_name) VALUES ('wf', 3, 'DBOS.sleep')")
    conn.execute("INSERT INTO notifications (destination_uuid, topic, message, consumed) VALUES ('wf', 'approval', 'y', FALSE)")
    (tmp_path / dbos_worker.WAITING_DIR).mkdir()
    (tmp_path / dbos_worker.WAITING_DIR / "wf.json").write_text(json.dumps(
        {"node": "approval", "interrupt": "wf:2", "topic": "approval", "pid": 1, "timeout_step": 3, "function_id": 2}))

    class Racing(SystemReads):
        def one(self, sql: str, params: dict) -> tuple:  # the recv's transaction lands as the message is read
            if "notifications" in sql and not getattr(self, "landed", False):
                self.landed = True
                conn.execute("BEGIN")
                conn.execute("UPDATE notifications SET consumed = TRUE")
                conn.execute("INSERT INTO operation_outputs (workflow_uuid, function_id, function_name) "
                             "VALUES ('wf', 2, 'DBOS.recv')")
                conn.execute("COMMIT")
            return super().one(sql, params)

    assert dbos_worker._blocked(tmp_path, Racing(sqlite_file=db), "wf", "PENDING") is None

    class Failing(SystemReads):  # the message's read fails (a lock held past the timeout)
        def one(self, sql: str, params: dict) -> tuple:
            return (None, False) if "notifications" in sql else super().one(sql, params)

    conn.execute("DELETE FROM operation_outputs WHERE function_id = 2")
    conn.execute("UPDATE notifications SET consumed = TRUE")
    assert dbos_worker._blocked(tmp_path, SystemReads(sqlite_file=db), "wf", "PENDING") is not None
    assert dbos_worker._blocked(tmp_path, Failing(sqlite_file=db), "wf", "PENDING") is None
