"""Durable state: an append-only journal plus the current state, in one SQLite file (WAL).

A checkpoint is one transaction that updates the workflow row, appends its journal
events and records its side effects. Nothing else is kept between processes: a new
worker reads this file and nothing more.

Tables:
    definitions(name, version, body)             versioned workflow definitions (JSON)
    workflows(workflow_id, definition, version, status, state, stop_reason, ...)
    journal(seq, workflow_id, at, kind, data)     the trace, append-only
    inbox(seq, workflow_id, kind, payload, idempotency_key UNIQUE, consumed)
    effects(idempotency_key, workflow_id, task_id, tool, status, result)
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from crashpoint.errors import CrashpointError
from crashpoint.protocols import Probe, no_probe

SCHEMA_VERSION = 1
#: Accepted values of the ``synchronous`` argument (SQLite ``PRAGMA synchronous``).
SYNCHRONOUS = ("NORMAL", "FULL")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS definitions (
    name TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, deployed_at REAL NOT NULL,
    PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS workflows (
    workflow_id TEXT PRIMARY KEY, definition TEXT NOT NULL, version INTEGER NOT NULL,
    status TEXT NOT NULL, state TEXT NOT NULL, stop_reason TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, workflow_id TEXT NOT NULL, at REAL NOT NULL,
    kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS journal_wf ON journal (workflow_id, seq);
CREATE TABLE IF NOT EXISTS inbox (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, workflow_id TEXT NOT NULL, kind TEXT NOT NULL,
    payload TEXT NOT NULL, idempotency_key TEXT NOT NULL UNIQUE, received_at REAL NOT NULL,
    consumed INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS effects (
    idempotency_key TEXT PRIMARY KEY, workflow_id TEXT NOT NULL, task_id TEXT NOT NULL,
    tool TEXT NOT NULL, status TEXT NOT NULL, result TEXT, updated_at REAL NOT NULL);
"""


class StoreError(CrashpointError, RuntimeError):
    """The engine database is missing, corrupt or of another schema version."""


class Store:
    """The engine's SQLite store.

    Args:
        path: database file; created with the schema when absent.
        probe: called with ``before_checkpoint:NAME`` and ``after_checkpoint:NAME`` around
            every checkpoint transaction (the harness's crash points).
        synchronous: SQLite's ``synchronous`` setting: ``NORMAL`` (default) makes each checkpoint
            durable across a process crash, ``FULL`` across a power loss too (an fsync per commit).

    Raises:
        StoreError: the file is not a SQLite database of this schema.
    """

    def __init__(self, path: str | Path, probe: Probe = no_probe, synchronous: str = "NORMAL") -> None:
        if synchronous not in SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}")
        self.path = Path(path)
        self.probe = probe
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
            self.db.row_factory = sqlite3.Row
            self.db.execute("PRAGMA journal_mode=WAL")
            # WAL + NORMAL: a committed checkpoint survives the death of the process (SIGKILL included: the
            # kernel keeps the written pages), not a power loss or kernel crash (that needs FULL, which
            # fsyncs every commit: 0.48 ms instead of 0.07 ms a commit on this machine).
            self.db.execute(f"PRAGMA synchronous={synchronous}")
            self.db.executescript(_SCHEMA)
            row = self.db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
            if row is None:
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(f"{self.path}: schema version {row[0]}, this engine reads {SCHEMA_VERSION}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable engine database: {exc}") from exc

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error)."""
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
        except BaseException:
            self.db.execute("ROLLBACK")
            raise
        self.db.execute("COMMIT")

    # -- writes -------------------------------------------------------------
    def append(self, conn: sqlite3.Connection, workflow_id: str, at: float, kind: str, **data: Any) -> None:
        """Append one journal (trace) event inside an open transaction."""
        conn.execute("INSERT INTO journal (workflow_id, at, kind, data) VALUES (?, ?, ?, ?)",
                     (workflow_id, at, kind, json.dumps(data, sort_keys=True)))

    def save_state(self, conn: sqlite3.Connection, workflow_id: str, status: str, state: dict[str, Any],
                   at: float, stop_reason: str | None = None) -> None:
        """Overwrite the workflow's current status and state inside an open transaction."""
        conn.execute("UPDATE workflows SET status=?, state=?, stop_reason=?, updated_at=? WHERE workflow_id=?",
                     (status, json.dumps(state, sort_keys=True), stop_reason, at, workflow_id))

    def record_effect(self, conn: sqlite3.Connection, key: str, workflow_id: str, task_id: str, tool: str,
                      status: str, at: float, result: Any = None) -> None:
        """Upsert the audit record of one side effect (planned | executed | compensated | failed)."""
        conn.execute(
            "INSERT INTO effects VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(idempotency_key) DO UPDATE SET "
            "status=excluded.status, result=COALESCE(excluded.result, effects.result), updated_at=excluded.updated_at",
            (key, workflow_id, task_id, tool, status, None if result is None else json.dumps(result), at))

    def checkpoint(self, name: str, workflow_id: str, at: float, write: Callable[[sqlite3.Connection], None],
                   then: Callable[[sqlite3.Connection], None] | None = None) -> None:
        """One checkpoint: a single transaction running ``write(conn)``, a ``checkpoint`` journal
        event, then ``then(conn)`` (events that follow the checkpoint, such as ``workflow_finished``).

        Calls the probe with ``before_checkpoint:NAME`` before ``BEGIN`` and
        ``after_checkpoint:NAME`` after ``COMMIT``.
        """
        self.probe(f"before_checkpoint:{name}")
        with self.transaction() as conn:
            write(conn)
            self.append(conn, workflow_id, at, "checkpoint", name=name)
            if then is not None:
                then(conn)
        self.probe(f"after_checkpoint:{name}")

    # -- reads --------------------------------------------------------------
    def workflow(self, workflow_id: str) -> sqlite3.Row | None:
        """The workflow row, or ``None``."""
        return self.db.execute("SELECT * FROM workflows WHERE workflow_id=?", (workflow_id,)).fetchone()

    def workflow_ids(self, statuses: Iterable[str] | None = None) -> list[str]:
        """Workflow ids in creation order, optionally only those in ``statuses``."""
        rows = self.db.execute("SELECT workflow_id, status FROM workflows ORDER BY created_at, rowid").fetchall()
        wanted = None if statuses is None else set(statuses)
        return [r["workflow_id"] for r in rows if wanted is None or r["status"] in wanted]

    def journal(self, workflow_id: str) -> list[dict[str, Any]]:
        """The trace of one workflow: ``[{"seq", "at", "kind", **data}]`` in order."""
        rows = self.db.execute("SELECT seq, at, kind, data FROM journal WHERE workflow_id=? ORDER BY seq",
                               (workflow_id,)).fetchall()
        return [{"seq": r["seq"], "at": r["at"], "kind": r["kind"], **json.loads(r["data"])} for r in rows]

    def pending_inbox(self, workflow_id: str, kind: str) -> list[sqlite3.Row]:
        """Unconsumed inbox messages of ``kind`` for the workflow, oldest first."""
        return self.db.execute("SELECT * FROM inbox WHERE workflow_id=? AND kind=? AND consumed=0 ORDER BY seq",
                               (workflow_id, kind)).fetchall()

    def effects(self, workflow_id: str) -> list[dict[str, Any]]:
        """Side-effect audit records of a workflow."""
        rows = self.db.execute("SELECT * FROM effects WHERE workflow_id=? ORDER BY rowid", (workflow_id,)).fetchall()
        return [dict(r) for r in rows]

    def definition(self, name: str, version: int | None = None) -> tuple[int, dict[str, Any]] | None:
        """``(version, body)`` of a deployed definition; the latest when ``version`` is ``None``."""
        if version is None:
            row = self.db.execute("SELECT version, body FROM definitions WHERE name=? ORDER BY version DESC LIMIT 1",
                                  (name,)).fetchone()
        else:
            row = self.db.execute("SELECT version, body FROM definitions WHERE name=? AND version=?",
                                  (name, version)).fetchone()
        return None if row is None else (row["version"], json.loads(row["body"]))
