"""The side-effect ledger: an SQLite file that outlives every engine process.

It answers "how many times did this logical effect happen", which is what the
side-effect oracle reads. Tables:

    calls(seq, tool, args, idempotency_key, outcome, retryable, result, error, at, gseq, lost)
        outcome: applied | duplicate | failed
        lost: 1 when the caller never got this call's answer (a scripted ``lost_response``, ``empty_answer``,
              ``malformed_answer``)
    script(seq, tool, outcome, message, seconds, consumed, applies, error, lost, answer, stale, status, waits)
                                                     outcomes queued for a tool's next calls (with their Behaviour)
    decisions(seq, approval_id, granted, by, at)     what the human answered, in order
    clock(id, now)                                   virtual time, seconds
    state(key, value)                                 the fake services' own records
    state_before(key, value)                          each record's value before its latest write (NULL: none), what
                                                     a ``stale_read`` call sees
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from crashpoint import sqlite

#: Virtual time at which every world starts: 2026-01-01T00:00:00Z, in seconds.
EPOCH_S = 1_767_225_600.0

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tool TEXT NOT NULL, args TEXT NOT NULL,
    idempotency_key TEXT, outcome TEXT NOT NULL, retryable INTEGER, result TEXT, error TEXT, at REAL NOT NULL,
    gseq INTEGER NOT NULL, lost INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS calls_key ON calls (tool, idempotency_key);
CREATE TABLE IF NOT EXISTS script (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, tool TEXT NOT NULL, outcome TEXT NOT NULL,
    message TEXT, seconds REAL, consumed INTEGER NOT NULL DEFAULT 0,
    applies INTEGER NOT NULL DEFAULT 1, error TEXT, lost INTEGER NOT NULL DEFAULT 0, answer TEXT,
    stale INTEGER NOT NULL DEFAULT 0, status INTEGER, waits INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS decisions (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, approval_id TEXT NOT NULL, granted INTEGER NOT NULL,
    by TEXT NOT NULL, at REAL NOT NULL, gseq INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS clock (id INTEGER PRIMARY KEY CHECK (id = 1), now REAL NOT NULL);
CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS state_before (key TEXT PRIMARY KEY, value TEXT);
"""

@dataclass(frozen=True)
class Behaviour:
    """How one scripted call of a tool behaves: the fake world's whole vocabulary of tool faults.

    A script row carries its behaviour, so a worker process needs no table of outcome names: a fault
    kind of the harness with a behaviour of its own passes it to :meth:`Ledger.script`.

    Attributes:
        applies: the effect happens (the tool's handler runs; the service may still refuse it).
        error: ``None`` (the caller gets the answer), or ``"retryable"`` / ``"fatal"``: the caller gets
            this kind of error instead (before the effect when not ``applies``, after it when ``applies``).
        message: the error's text; ``{tool}`` is replaced by the tool's name.
        lost: the caller never got the effect's answer (recorded ``lost``; the error says the effect may
            have been applied, ``maybe_applied``): a retry with the same key is then a ``duplicate``.
        takes_time: the call takes the script's ``seconds`` of virtual time (the clock moves with the
            effect, in its transaction).
        answer: ``None`` (the caller gets the effect's answer), or what it gets instead of it while the effect
            is applied (:data:`ANSWERS`: ``"empty"``, ``"malformed"``); recorded with the real answer and ``lost``.
        stale: the call reads the service's records as they were before their latest write (a read right after
            a write that does not see it yet); a refusal it makes is retryable.
        status: the HTTP status the error carries (``429``), or ``None``.
        waits: the error carries ``retry_after``: the script's ``seconds``, how long the caller must wait before
            it calls again (a ``Retry-After`` header).
    """

    applies: bool = True
    error: str | None = None
    message: str = ""
    lost: bool = False
    takes_time: bool = False
    answer: str | None = None
    stale: bool = False
    status: int | None = None
    waits: bool = False


#: What a caller gets instead of an applied call's answer (:attr:`Behaviour.answer`): ``empty``, an empty JSON object
#: (a ``200`` with ``{}`` for a body); ``malformed``, a text that is not the tool's answer at all (a proxy's HTML
#: error page handed back as a body). The same values as :data:`crashpoint.api.EMPTY_ANSWER` /
#: :data:`crashpoint.api.MALFORMED_ANSWER` give a target's caller.
ANSWERS: dict[str, Any] = {"empty": {}, "malformed": "<html><body><h1>502 Bad Gateway</h1></body></html>"}


def garbled(answer: str) -> Any:
    """A fresh copy of the value :data:`ANSWERS` gives for ``answer`` (``"empty"`` or ``"malformed"``)."""
    value = ANSWERS[answer]
    return dict(value) if isinstance(value, dict) else value


#: The built-in scripted outcomes of a tool's next calls:
#:
#: * ``success``: the call is applied and answered (the default beyond the script);
#: * ``retryable`` / ``fatal``: the call fails with that kind of error, nothing applied;
#: * ``timeout``: the call times out before the effect: a retryable error, nothing applied;
#: * ``lost_response``: the effect is applied (recorded ``applied``, ``lost``), then the caller gets a
#:   retryable "connection reset" instead of the answer; a retry with the same key is a ``duplicate``;
#: * ``slow``: the virtual clock moves ``seconds`` forward during the call, which then succeeds;
#: * ``rate_limited``: nothing applied; the caller gets a retryable error with ``status`` 429 and ``retry_after``
#:   (the script's ``seconds``): a correct caller waits that long, then calls again with the same key;
#: * ``empty_answer`` / ``malformed_answer``: the effect is applied (recorded ``applied``, ``lost``, with its real
#:   answer), and the caller gets ``{}`` / a text that is not the answer (:data:`ANSWERS`) instead of it, with no
#:   error: a correct caller sees it is not an answer and calls again with the same key, answered ``duplicate``
#:   with the real answer;
#: * ``stale_read``: the call reads the service's records as they were before their latest write (a record
#:   written once reads as missing): a read right after a write that does not see it yet; whatever the tool then
#:   refuses is retryable (the write will show). A tool that reads no record answers as usual.
BEHAVIOURS: dict[str, Behaviour] = {
    "success": Behaviour(),
    "retryable": Behaviour(applies=False, error="retryable", message="{tool}: scripted retryable failure"),
    "fatal": Behaviour(applies=False, error="fatal", message="{tool}: scripted fatal failure"),
    "timeout": Behaviour(applies=False, error="retryable",
                         message="{tool}: timeout (no answer in time; nothing was applied)"),
    "lost_response": Behaviour(error="retryable", lost=True,
                               message="{tool}: connection reset after the effect (the answer was lost)"),
    "slow": Behaviour(takes_time=True),
    "rate_limited": Behaviour(applies=False, error="retryable", status=429, waits=True,
                              message="{tool}: 429 Too Many Requests: rate limited, retry after {retry_after} s "
                                      "(nothing was applied)"),
    "empty_answer": Behaviour(answer="empty", lost=True),
    "malformed_answer": Behaviour(answer="malformed", lost=True),
    "stale_read": Behaviour(stale=True),
}
SCRIPT_OUTCOMES = tuple(BEHAVIOURS)


@dataclass(frozen=True)
class Call:
    """One recorded tool call.

    Attributes:
        seq: global order in the ledger (1-based).
        tool: tool name; ``args`` its arguments; ``idempotency_key`` as given (``None`` if absent).
        outcome: ``applied`` (the effect happened), ``duplicate`` (same key as an earlier call,
            not applied again) or ``failed``.
        retryable: for failures, whether the error was retryable.
        at: virtual time of the call, seconds (when it began; a ``slow`` call ends later).
        gseq: position in the order shared with human decisions.
        lost: the caller never got this call's answer (a scripted ``lost_response``): a retry with
            the same key, recorded ``duplicate``, is then expected.
    """

    seq: int
    tool: str
    args: dict[str, Any]
    idempotency_key: str | None
    outcome: str
    retryable: bool | None
    result: Any
    error: str | None
    at: float
    gseq: int
    lost: bool = False


def next_gseq(conn: sqlite3.Connection) -> int:
    """The next value of the order shared by calls and decisions (call inside a transaction)."""
    return conn.execute("SELECT COALESCE(MAX(g), 0) + 1 FROM (SELECT MAX(gseq) AS g FROM calls "
                        "UNION ALL SELECT MAX(gseq) FROM decisions)").fetchone()[0]


class Ledger:
    """Open (or create) a ledger file.

    Args:
        path: the SQLite file.
        synchronous: ``NORMAL`` (default; WAL + NORMAL: a commit survives SIGKILL, not a power loss) or
            ``OFF`` (no fsync even when closing the last connection checkpoints the WAL: the harness's side).
    """

    def __init__(self, path: str | Path, synchronous: str = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "OFF"):
            raise ValueError(f"synchronous must be NORMAL or OFF, got {synchronous!r}")
        self.path = Path(path)
        self.db = sqlite.connect(self.path, synchronous=synchronous, what="ledger")
        if not (sqlite.has_table(self.db, "clock") and
                self.db.execute("SELECT 1 FROM clock WHERE id=1").fetchone() is not None):  # a new ledger
            sqlite.create(self.db, _SCHEMA)
            self.db.execute("INSERT OR IGNORE INTO clock VALUES (1, ?)", (EPOCH_S,))

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """``BEGIN IMMEDIATE`` ... ``COMMIT`` (``ROLLBACK`` on error)."""
        with sqlite.transaction(self.db) as conn:
            yield conn

    # -- set-up by the harness -----------------------------------------------
    def script(self, tool: str, outcome: str, message: str = "", times: int = 1,
               seconds: float | None = None, behaviour: Behaviour | None = None) -> None:
        """Queue ``times`` outcomes for ``tool``'s next calls: a built-in one (:data:`BEHAVIOURS`), or
        ``behaviour`` under the name ``outcome`` (a fault kind's own).

        ``message`` replaces the behaviour's error text; ``seconds`` is how long a call that takes time
        (``slow``) takes, or the ``retry_after`` of an error that carries one (``rate_limited``) (seconds, > 0);
        other outcomes take none.

        Raises:
            ValueError: unknown outcome (and no ``behaviour``), ``times < 1``, or ``seconds`` missing or
                not > 0 for an outcome that takes time (or given for another one).
        """
        how = behaviour or BEHAVIOURS.get(outcome)
        if how is None or times < 1:
            raise ValueError(f"script outcome must be one of {SCRIPT_OUTCOMES} (or come with its behaviour) "
                             "and times >= 1")
        timed = how.takes_time or how.waits
        if timed != (seconds is not None) or (seconds is not None and not seconds > 0):
            raise ValueError(f"a {outcome} outcome needs seconds > 0" if timed
                             else f"a {outcome} outcome takes no seconds")
        row = (tool, outcome, message or how.message, seconds, int(how.applies), how.error, int(how.lost), how.answer,
               int(how.stale), how.status, int(how.waits))
        with self.transaction() as conn:
            conn.executemany("INSERT INTO script (tool, outcome, message, seconds, applies, error, lost, answer, stale, "
                             "status, waits) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", [row] * times)

    def next_script(self, conn: sqlite3.Connection, tool: str) -> tuple[str, Behaviour, float | None]:
        """Consume the next scripted outcome of ``tool`` (inside the call's transaction ``conn``):
        ``(outcome name, behaviour, seconds)``; ``("success", Behaviour(), None)`` beyond the script."""
        row = conn.execute("SELECT * FROM script WHERE tool=? AND consumed=0 ORDER BY seq LIMIT 1", (tool,)).fetchone()
        if row is None:
            return "success", BEHAVIOURS["success"], None
        conn.execute("UPDATE script SET consumed=1 WHERE seq=?", (row["seq"],))
        waits = bool(row["waits"])
        how = Behaviour(applies=bool(row["applies"]), error=row["error"], message=row["message"] or "",
                        lost=bool(row["lost"]), takes_time=row["seconds"] is not None and not waits,
                        answer=row["answer"], stale=bool(row["stale"]), status=row["status"], waits=waits)
        return row["outcome"], how, row["seconds"]

    def record_call(self, conn: sqlite3.Connection, tool: str, args: dict[str, Any], key: str | None, outcome: str,
                    at: float, *, result: Any = None, error: str | None = None, retryable: bool | None = None,
                    lost: bool = False, result_json: str | None = None) -> int:
        """Record one call (inside the caller's transaction ``conn``); returns its ``seq``.

        ``outcome`` is ``applied``, ``duplicate``, ``failed`` or ``conflict`` (a key used again with other arguments,
        refused); ``result`` is JSON-encoded (when there is
        no ``error``) unless ``result_json`` gives it already encoded (a duplicate's copy of the first answer).
        """
        cur = conn.execute(
            "INSERT INTO calls (tool, args, idempotency_key, outcome, retryable, result, error, at, gseq, lost) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (tool, json.dumps(dict(args), sort_keys=True, default=str), key, outcome,
             None if retryable is None else int(retryable),
             result_json if result_json is not None else (json.dumps(result) if error is None else None),
             error, at, next_gseq(conn), int(lost)))
        return int(cur.lastrowid)

    def record_decision(self, approval_id: str, granted: bool, by: str, at: float) -> None:
        """Record what the (fake) human answered, before it is delivered to the engine."""
        with self.transaction() as conn:
            conn.execute("INSERT INTO decisions (approval_id, granted, by, at, gseq) VALUES (?, ?, ?, ?, ?)",
                         (approval_id, int(granted), by, at, next_gseq(conn)))

    # -- reads by the oracles ------------------------------------------------
    def calls(self, tool: str | None = None) -> list[Call]:
        """Every recorded call (of ``tool`` only, when given), in order."""
        sql, params = "SELECT * FROM calls", ()
        if tool is not None:
            sql, params = sql + " WHERE tool=?", (tool,)
        return [Call(r["seq"], r["tool"], json.loads(r["args"]), r["idempotency_key"], r["outcome"],
                     None if r["retryable"] is None else bool(r["retryable"]),
                     None if r["result"] is None else json.loads(r["result"]), r["error"], r["at"], r["gseq"],
                     bool(r["lost"]))
                for r in self.db.execute(sql + " ORDER BY seq", params)]

    def applied(self, tool: str) -> list[Call]:
        """Calls of ``tool`` whose effect happened (duplicates and failures excluded)."""
        return [c for c in self.calls(tool) if c.outcome == "applied"]

    def decisions(self) -> list[dict[str, Any]]:
        """Human decisions in order: ``[{"seq", "approval_id", "granted", "by", "at", "gseq"}]``."""
        return [dict(r) | {"granted": bool(r["granted"])} for r in
                self.db.execute("SELECT * FROM decisions ORDER BY seq")]

    def last_gseq(self) -> int:
        """The last position of the order shared by calls and decisions so far (0 before any)."""
        return int(self.db.execute("SELECT COALESCE(MAX(g), 0) FROM (SELECT MAX(gseq) AS g FROM calls "
                                   "UNION ALL SELECT MAX(gseq) FROM decisions)").fetchone()[0])

    def sequence(self) -> list[tuple[str, Any]]:
        """Calls and decisions in the order they happened: ``[("call", Call) | ("decision", dict)]``."""
        items = [(c.gseq, "call", c) for c in self.calls()] + [(d["gseq"], "decision", d) for d in self.decisions()]
        return [(kind, item) for _, kind, item in sorted(items, key=lambda x: x[0])]

    def unconsumed_script(self) -> list[dict[str, Any]]:
        """Scripted outcomes that no call used (a vacuity signal)."""
        return [dict(r) for r in self.db.execute("SELECT * FROM script WHERE consumed=0 ORDER BY seq")]
