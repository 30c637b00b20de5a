"""Durable state: an append-only journal plus the current state, in one SQLite file (WAL).

A checkpoint is one transaction that updates the workflow row, appends its journal
events and records its side effects. Nothing else is kept between processes: a new
worker reads this file and nothing more.

A checkpoint writes what changed, not the whole state: the workflow row keeps the
state's scalars (the cursor, the attempt, ...), and each dict or list in the state
(``results``, ``keys``, ``side_effects``, ...) is kept item by item in ``state_items``,
where only the items that changed since the last checkpoint are written. The bytes a
checkpoint writes then stay flat as a workflow accumulates results (``benchmarks/``
measures it at 10 and 5,000 tasks).

Tables:
    definitions(name, version, body)             versioned workflow definitions (JSON)
    workflows(workflow_id, definition, version, status, state, stop_reason, ..., rev)
    state_items(workflow_id, section, item, value) the state's dicts and lists, item by item
    journal(seq, workflow_id, at, kind, data)     the trace, append-only
    inbox(seq, workflow_id, kind, payload, idempotency_key UNIQUE, consumed)
    effects(idempotency_key, workflow_id, task_id, tool, status, result)
"""

from __future__ import annotations

import json
import pickle
import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from crashpoint import sqlite
from crashpoint.errors import StoreError
from crashpoint.protocols import Probe, no_probe
from crashpoint.sqlite import SYNCHRONOUS

SCHEMA_VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS definitions (
    name TEXT NOT NULL, version INTEGER NOT NULL, body TEXT NOT NULL, deployed_at REAL NOT NULL,
    PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS workflows (
    workflow_id TEXT PRIMARY KEY, definition TEXT NOT NULL, version INTEGER NOT NULL,
    status TEXT NOT NULL, state TEXT NOT NULL, stop_reason TEXT,
    created_at REAL NOT NULL, updated_at REAL NOT NULL, rev INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS state_items (
    workflow_id TEXT NOT NULL, section TEXT NOT NULL, item TEXT NOT NULL, value TEXT NOT NULL,
    PRIMARY KEY (workflow_id, section, item)) WITHOUT ROWID;
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


class _Section:
    """One dict or list of a workflow's durable state, as this connection knows it.

    ``value``: the container with every item as parsed from its stored JSON (never handed out);
    a load hands out a pickled copy (one C-speed copy, made on the first load after a change).
    """

    __slots__ = ("kind", "value", "_frozen")

    def __init__(self, kind: str, value: Any) -> None:
        self.kind, self.value, self._frozen = kind, value, None

    def copy(self) -> Any:
        """A fresh copy of the container."""
        if self._frozen is None:
            self._frozen = pickle.dumps(self.value, pickle.HIGHEST_PROTOCOL)
        return pickle.loads(self._frozen)

    def diff(self, new: Any) -> tuple[dict[str, Any], set[str]]:
        """``(changed, gone)``: stored item key -> new value for items new or changed in ``new`` (a
        container of the same kind), and the item keys ``new`` no longer has. Items are compared by
        equality; a container that only grew (the usual case) is checked with C-speed comparisons."""
        old = self.value
        if old == new:
            return {}, set()
        if self.kind == "list":
            m = min(len(old), len(new))
            index = range(m, len(new)) if new[:m] == old[:m] else \
                [i for i in range(len(new)) if i >= len(old) or old[i] != new[i]]
            return {_item(i): new[i] for i in index}, {_item(i) for i in range(len(new), len(old))}
        m = len(old)
        keys = list(new)
        if keys[:m] == list(old) and list(new.values())[:m] == list(old.values()):
            return {str(k): new[k] for k in keys[m:]}, set()
        return ({str(k): v for k, v in new.items() if k not in old or old[k] != v},
                {str(k) for k in old.keys() - new.keys()})

    def updated(self, changed: dict[str, Any], gone: set[str]) -> "_Section":
        """This section with ``changed`` (stored key -> parsed value) applied and ``gone`` removed."""
        if self.kind == "list":
            value = self.value[:len(self.value) - len(gone)]  # a list only loses its tail
            for key, v in sorted(changed.items()):
                i = int(key)
                value.extend([None] * (i + 1 - len(value)))
                value[i] = v
            return _Section("list", value)
        value = {k: v for k, v in self.value.items() if k not in gone} if gone else dict(self.value)
        value.update(changed)
        return _Section("dict", value)


def _schema_version(db: sqlite3.Connection) -> sqlite3.Row | None:
    """The ``meta`` row of the schema version, or ``None`` when the file has no engine schema yet."""
    try:
        return db.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone()
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise


def _item(index: int) -> str:
    """The stored item key of a list's ``index``-th item (zero-padded, so keys sort as indexes)."""
    return f"{index:09d}"


class Store:
    """The engine's SQLite store.

    Args:
        path: database file; created with the schema when absent.
        probe: called with ``before_checkpoint:NAME`` and ``after_checkpoint:NAME`` around
            every checkpoint transaction (the harness's crash points).
        synchronous: SQLite's ``synchronous`` setting: ``NORMAL`` (default) makes each checkpoint
            durable across a process crash, ``FULL`` across a power loss too (an fsync per commit).
            ``OFF`` never fsyncs: a commit still reaches the OS, so it survives the process, and closing
            the last connection (which checkpoints the WAL) costs no fsync; for a test harness's client.

    Raises:
        StoreError: the file is not a SQLite database of this schema.
    """

    def __init__(self, path: str | Path, probe: Probe = no_probe, synchronous: str = "NORMAL") -> None:
        self.path = Path(path)
        self.probe = probe
        #: bytes of state (row plus items) written by this connection's checkpoints, count
        self.state_bytes_written = 0
        # workflow_id -> (rev, row JSON, {section name: _Section}): what is durable now
        self._saved: dict[str, tuple[int, str, dict[str, _Section]]] = {}
        self._pending: dict[str, tuple[int, str, dict[str, _Section]]] = {}
        # WAL + NORMAL (crashpoint.sqlite): a committed checkpoint survives the death of the process, not a
        # power loss or kernel crash (FULL fsyncs every commit: 0.48 ms instead of 0.07 ms a commit here).
        self.db = sqlite.connect(self.path, synchronous=synchronous, what="engine database")
        try:
            row = _schema_version(self.db)
            if row is None:  # a new file
                foreign = [r[0] for r in self.db.execute("SELECT name FROM sqlite_master WHERE type='table' "
                                                         "AND name NOT LIKE 'sqlite_%'")]
                if foreign:
                    raise StoreError(f"{self.path}: not an engine database: it has tables of its own "
                                     f"({', '.join(sorted(foreign)[:5])}) and no engine schema", file=str(self.path))
                sqlite.create(self.db, _SCHEMA)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            elif int(row[0]) != SCHEMA_VERSION:
                raise StoreError(f"{self.path}: schema version {row[0]}, this engine reads {SCHEMA_VERSION}",
                                 file=str(self.path))
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{self.path}: not a usable engine database: {exc}", file=str(self.path)) from exc

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error, forgetting the state it wrote)."""
        with sqlite.transaction(self.db, on_rollback=self._pending.clear):
            yield self.db
        self._saved.update(self._pending)
        self._pending.clear()

    # -- writes -------------------------------------------------------------
    def append(self, conn: sqlite3.Connection, workflow_id: str, at: float, kind: str, **data: Any) -> None:
        """Append one journal (trace) event inside an open transaction."""
        conn.execute("INSERT INTO journal (workflow_id, at, kind, data) VALUES (?, ?, ?, ?)",
                     (workflow_id, at, kind, json.dumps(data, sort_keys=True)))

    def insert_workflow(self, conn: sqlite3.Connection, workflow_id: str, definition: str, version: int,
                        status: str, state: dict[str, Any], at: float) -> None:
        """Create the workflow row and its state inside an open transaction."""
        conn.execute("INSERT INTO workflows (workflow_id, definition, version, status, state, stop_reason, "
                     "created_at, updated_at, rev) VALUES (?, ?, ?, ?, '{}', NULL, ?, ?, 0)",
                     (workflow_id, definition, version, status, at, at))
        self._saved[workflow_id] = (0, "{}", {})
        self.save_state(conn, workflow_id, status, state, at)

    def save_state(self, conn: sqlite3.Connection, workflow_id: str, status: str, state: dict[str, Any],
                   at: float, stop_reason: str | None = None) -> None:
        """Make ``state`` the workflow's current state inside an open transaction, writing only what changed.

        ``state`` is a JSON-serialisable dict. Its dict and list values are sections, written item by
        item (an item is written when it differs from the durable one, deleted when gone); everything
        else goes into the workflow row with the status. The comparison is with this connection's
        parsed copy of the durable state, so a checkpoint costs JSON work only for what changed.
        """
        rev, _, saved = self._pending.get(workflow_id) or self._durable(workflow_id)
        scalars: dict[str, Any] = {}
        sections: dict[str, _Section] = {}
        written = 0
        for name in saved.keys() - {k for k, v in state.items() if isinstance(v, (dict, list))}:
            conn.execute("DELETE FROM state_items WHERE workflow_id=? AND section=?", (workflow_id, name))
        for name, value in state.items():
            kind = "dict" if isinstance(value, dict) else "list" if isinstance(value, list) else None
            if kind is None:
                scalars[name] = value
                continue
            before = saved.get(name)
            if before is None or before.kind != kind:
                if before is not None:
                    conn.execute("DELETE FROM state_items WHERE workflow_id=? AND section=?", (workflow_id, name))
                before = _Section(kind, {} if kind == "dict" else [])
            changed, gone = before.diff(value)
            for item in gone:
                conn.execute("DELETE FROM state_items WHERE workflow_id=? AND section=? AND item=?",
                             (workflow_id, name, item))
            dumped = {k: json.dumps(v, sort_keys=True) for k, v in changed.items()}
            if dumped:
                conn.executemany("INSERT OR REPLACE INTO state_items VALUES (?, ?, ?, ?)",
                                 [(workflow_id, name, k, v) for k, v in dumped.items()])
                written += sum(len(k) + len(v) for k, v in dumped.items())
            # the cache keeps items as a new process will read them back: parsed from their JSON
            sections[name] = before.updated({k: json.loads(v) for k, v in dumped.items()}, gone) \
                if (dumped or gone or name not in saved) else before
        row = json.dumps({**scalars, "__sections__": {n: [sec.kind, len(sec.value)] for n, sec in sections.items()}},
                         sort_keys=True)
        conn.execute("UPDATE workflows SET status=?, state=?, stop_reason=?, updated_at=?, rev=? WHERE workflow_id=?",
                     (status, row, stop_reason, at, rev + 1, workflow_id))
        self.state_bytes_written += written + len(row)
        self._pending[workflow_id] = (rev + 1, row, sections)

    def _durable(self, workflow_id: str, row: sqlite3.Row | None = None) -> tuple[int, str, dict[str, "_Section"]]:
        """The durable state of a workflow in its stored form, from this connection's cache when current.
        ``row``: the workflow's row if the caller has just read it (:meth:`workflow`), else it is read here.

        Raises:
            StoreError: the row or its items do not add up (a section of an unknown kind, an item count
                other than the row records, a list with a gap, an item that is not JSON).
        """
        found = row if row is not None else \
            self.db.execute("SELECT state, rev FROM workflows WHERE workflow_id=?", (workflow_id,)).fetchone()
        if found is None:
            raise StoreError(f"{self.path}: no workflow {workflow_id!r}")
        cached = self._saved.get(workflow_id)
        if cached is not None and cached[0] == found["rev"]:
            return cached
        where = f"{self.path}: workflow {workflow_id!r}"
        try:
            kinds = json.loads(found["state"])["__sections__"]
            items: dict[str, dict[str, Any]] = {name: {} for name in kinds}
            for r in self.db.execute("SELECT section, item, value FROM state_items WHERE workflow_id=? "
                                     "ORDER BY section, item", (workflow_id,)):
                if r["section"] not in items:
                    raise StoreError(f"{where} has state items of an unknown section {r['section']!r}")
                items[r["section"]][r["item"]] = json.loads(r["value"])
        except (ValueError, AttributeError, KeyError, TypeError, sqlite3.DatabaseError) as exc:
            raise StoreError(f"{where} has a corrupt state: {exc!r}") from exc
        sections = {}
        for name, spec in kinds.items():
            kind, count = spec if isinstance(spec, list) and len(spec) == 2 else (spec, None)
            if kind not in ("dict", "list") or count != len(items[name]):
                raise StoreError(f"{where}: state section {name!r} should be a {kind} of {count} item(s), "
                                 f"the store holds {len(items[name])}")
            if kind == "list" and sorted(items[name]) != [_item(i) for i in range(count)]:
                raise StoreError(f"{where}: state section {name!r} is a list with missing or foreign positions")
            sections[name] = _Section(kind, dict(items[name]) if kind == "dict" else
                                      [items[name][k] for k in sorted(items[name])])
        self._saved[workflow_id] = (found["rev"], found["state"], sections)
        return self._saved[workflow_id]

    def load_state(self, workflow_id: str, row: sqlite3.Row | None = None) -> dict[str, Any]:
        """The workflow's durable state as the dict :meth:`save_state` was given (a fresh copy the caller
        may change: changes are durable only once saved). ``row``: the workflow's row from
        :meth:`workflow` when the caller has it (saves reading it again).

        Raises:
            StoreError: no such workflow, or its stored state is corrupt.
        """
        _, stored, sections = self._durable(workflow_id, row)
        try:
            state = json.loads(stored)
        except ValueError as exc:
            raise StoreError(f"{self.path}: workflow {workflow_id!r} has a corrupt state row: {exc}") from exc
        state.pop("__sections__", None)
        for name, section in sections.items():
            state[name] = section.copy()
        return state

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
