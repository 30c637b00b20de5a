"""One way to open and write the SQLite files a run keeps: the engine's store, the side-effect
ledger and an adapter's own file.

Every such file is opened the same way: autocommit (``isolation_level=None``, so a transaction is
an explicit ``BEGIN IMMEDIATE`` ... ``COMMIT``), rows as :class:`sqlite3.Row`, a 30 s busy timeout
(a worker and the harness queue instead of failing), the WAL journal (set once, when the file is
made: it is a property of the file) and ``PRAGMA synchronous`` as asked. WAL + ``NORMAL``: a
committed transaction survives the death of the process (SIGKILL included: the kernel keeps the
written pages), not a power loss (that needs ``FULL``, an fsync per commit).

Shared by :mod:`crashpoint.engine` and :mod:`crashpoint.fakes` (which may not import each other)
and the harness's adapters; it imports nothing of crashpoint but :mod:`crashpoint.errors`.
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from crashpoint.errors import StoreError

#: Accepted values of ``synchronous`` (SQLite ``PRAGMA synchronous``).
SYNCHRONOUS = ("NORMAL", "FULL", "OFF")
#: Seconds a connection waits for another process's write lock before it fails.
BUSY_TIMEOUT_S = 30.0


def connect(path: str | Path, *, synchronous: str = "NORMAL", threads: bool = False,
            what: str = "database") -> sqlite3.Connection:
    """Open (or create) the SQLite file ``path`` as described in the module docstring.

    Args:
        path: the file.
        synchronous: one of :data:`SYNCHRONOUS`.
        threads: the connection may be used from other threads than this one (the caller locks).
        what: what the file is, for the error message (``"engine database"``, ``"ledger"``).

    Raises:
        ValueError: ``synchronous`` is not one of :data:`SYNCHRONOUS`.
        StoreError: the file cannot be opened as a SQLite database (the message names it).
    """
    if synchronous not in SYNCHRONOUS:
        raise ValueError(f"synchronous must be one of {SYNCHRONOUS}, got {synchronous!r}")
    try:
        db = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_S, check_same_thread=not threads)
        db.row_factory = sqlite3.Row
        db.execute(f"PRAGMA synchronous={synchronous}")
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable {what}: {exc}", file=str(path)) from exc
    return db


def has_table(db: sqlite3.Connection, name: str) -> bool:
    """Whether the database has a table ``name``."""
    return db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (name,)).fetchone() is not None


def create(db: sqlite3.Connection, schema: str) -> None:
    """Make a new file ours: switch it to the WAL journal and run ``schema`` (``CREATE ... IF NOT
    EXISTS`` statements, so two processes making one file at once both succeed)."""
    db.execute("PRAGMA journal_mode=WAL")
    db.executescript(schema)


@contextmanager
def transaction(db: sqlite3.Connection, on_rollback: Callable[[], None] | None = None) -> Iterator[sqlite3.Connection]:
    """``BEGIN IMMEDIATE`` ... ``COMMIT``; ``ROLLBACK`` (then ``on_rollback()``) when the block raises,
    whatever it raises (a SIGKILL needs no handling: SQLite rolls the journal back on the next open)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
    except BaseException:
        db.execute("ROLLBACK")
        if on_rollback is not None:
            on_rollback()
        raise
    db.execute("COMMIT")
