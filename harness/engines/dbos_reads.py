"""What a DBOS worker of a target reads from DBOS's system database itself (beside DBOS's own API), on SQLite or
PostgreSQL: whether a workflow has a status row, a message waiting for it, or ``recv``'s durable timeout recorded.

DBOS keeps its tables in the system database (SQLite: no schema; PostgreSQL: schema ``dbos``, DBOS's default
``dbos_system_schema``): ``workflow_status``, ``notifications``, ``operation_outputs``. A read that fails (no
table yet, a lock held past the timeout) answers ``None``: callers say what that means.

On SQLite every thread reads through a connection of its own. One ``sqlite3`` connection shared by DBOS's executor
threads (each effect call asks whether its workflow has a status row) and the worker's main thread gave wrong
answers, although SQLite is built serialized: a read that failed (``database is locked`` after the 5 s busy
timeout, held up by a commit of DBOS's in the same process) is reported by CPython from the connection's *last*
result code, which another thread's call had meanwhile set: ``DatabaseError: another row available``
(``SQLITE_ROW``) or ``no more rows available`` (``SQLITE_DONE``) raised inside the team's step (DBOS then ended the
workflow ``ERROR``), or no error at all: reads that came back after 5 or 10 s with
no row for a workflow whose row was written 0.5 to 7.5 s before they began, and ``target.durable_before_effect``
failed on correct code (20 queued workflows recovered by two workers, dbos 3.4.0: 20 of 403 runs; issue 27 item 8).
"""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

#: DBOS's schema of its system tables on PostgreSQL.
PG_SCHEMA = "dbos"
#: The reads of :meth:`SystemReads.snapshot` (SQLite).
SNAPSHOT_SQL = ("SELECT * FROM workflow_status ORDER BY workflow_uuid",
                "SELECT * FROM notifications ORDER BY message_uuid",
                "SELECT workflow_uuid, function_id FROM operation_outputs ORDER BY workflow_uuid, function_id")


class SystemReads:
    """Reads of one system database: ``SystemReads(sqlite_file=PATH)`` or ``SystemReads(url=URL)`` (PostgreSQL,
    through SQLAlchemy). Safe to call from any thread (the worker's main thread and every effect call): SQLite, a
    connection per thread, opened at the thread's first read and used by no other thread (``sqlite3``'s own check
    is on); PostgreSQL, a small connection pool."""

    def __init__(self, sqlite_file: Path | None = None, url: str | None = None) -> None:
        if (sqlite_file is None) == (url is None):
            raise ValueError("give exactly one of sqlite_file and url")
        self._file = sqlite_file
        self._local = threading.local()
        self._engine = None
        if url is not None:
            import sqlalchemy as sa

            self._engine = sa.create_engine(url, pool_size=2, max_overflow=2, pool_pre_ping=False)
        self.prefix = "" if sqlite_file is not None else f"{PG_SCHEMA}."

    def _sqlite(self) -> sqlite3.Connection:
        """The calling thread's connection to the SQLite file (opened on first use; closed when the thread ends)."""
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = sqlite3.connect(self._file)  # type: ignore[arg-type]
        return conn

    def one(self, sql: str, params: dict[str, Any]) -> tuple[tuple[Any, ...] | bool | None, bool]:
        """``(the first row of sql, a table was missing)`` (``:name`` parameters; ``{p}`` is the table prefix); the
        row is ``False`` when there is none, ``None`` when the read failed."""
        sql = sql.format(p=self.prefix)
        if self._file is not None:
            try:
                row = self._sqlite().execute(sql, params).fetchone()
            except sqlite3.OperationalError as exc:
                return None, "no such table" in str(exc)
            return (False if row is None else tuple(row)), False
        import sqlalchemy as sa

        try:
            with self._engine.connect() as conn:  # type: ignore[union-attr]
                row = conn.execute(sa.text(sql), params).fetchone()
        except sa.exc.DBAPIError as exc:
            return None, "does not exist" in str(exc.orig)
        return (False if row is None else tuple(row)), False

    def has_status(self, wf: str) -> bool | None:
        """Whether ``wf`` has a ``workflow_status`` row (``False`` before DBOS made its tables; ``None``: unknown)."""
        row, missing = self.one("SELECT 1 FROM {p}workflow_status WHERE workflow_uuid = :wf", {"wf": wf})
        if row is None:
            return False if missing else None
        return row is not False

    def message_waiting(self, wf: str, topic: Any) -> bool | None:
        """Whether a message for ``wf``/``topic`` sits unconsumed in ``notifications`` (``None``: the read failed).
        dbos (2.20.0 to 3.4.0) keeps a message ``recv`` took, marked ``consumed``; without that column, a row is a message
        not taken."""
        sql = ("SELECT COUNT(*) FROM {p}notifications WHERE destination_uuid = :wf AND "
               + ("topic IS NULL" if topic is None else "topic = :topic"))
        row, _ = self.one(sql + " AND consumed = FALSE", {"wf": wf, "topic": topic})
        if row is None:  # no consumed column (or a failed read): every row left is a message not taken
            row, _ = self.one(sql, {"wf": wf, "topic": topic})
        return None if row is None else bool(row and row[0])

    def step_recorded(self, wf: str, function_id: int) -> bool | None:
        """Whether ``wf``'s step ``function_id`` has its result in ``operation_outputs`` (``None``: the read failed)."""
        row, _ = self.one("SELECT 1 FROM {p}operation_outputs WHERE workflow_uuid = :wf AND function_id = :fid",
                          {"wf": wf, "fid": function_id})
        return None if row is None else bool(row)

    def snapshot(self) -> tuple[Any, ...] | None:
        """Everything of the system database that :func:`~crashpoint.harness.engines.dbos_worker.report` and
        ``queued_work`` judge rest from, as one comparable value (the rows of ``workflow_status`` and
        ``notifications``, the keys of ``operation_outputs``), read with one plain SQLite connection (a few
        hundred microseconds; DBOS's API takes milliseconds of SQLAlchemy per call). Two equal snapshots mean
        those answers did not change. ``None`` (always different) on PostgreSQL or when a read fails."""
        if self._file is None:
            return None
        try:
            db = self._sqlite()
            return tuple(tuple(db.execute(sql).fetchall()) for sql in SNAPSHOT_SQL)
        except sqlite3.OperationalError:
            return None

