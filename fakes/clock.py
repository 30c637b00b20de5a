"""Durable virtual time: a clock whose ``now`` lives in the ledger file.

The engine reads it through :class:`crashpoint.protocols.Clock`; ``sleep`` advances it
instead of waiting (like Temporal's time-skipping test server), so a retry backoff of an
hour takes no wall time. The harness moves it forward to make an approval time out.
Harness timings never read this clock.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from crashpoint.fakes.ledger import Ledger


class VirtualClock:
    """Virtual seconds stored in a ledger file's ``clock`` table.

    Args:
        ledger: an open :class:`~crashpoint.fakes.ledger.Ledger`, or a path to one.
    """

    def __init__(self, ledger: Ledger | str | Path) -> None:
        self.ledger = ledger if isinstance(ledger, Ledger) else Ledger(ledger)

    @property
    def _db(self) -> sqlite3.Connection:
        return self.ledger.db

    def now(self) -> float:
        """Current virtual time, seconds."""
        return float(self._db.execute("SELECT now FROM clock WHERE id=1").fetchone()[0])

    def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` (>= 0) at once."""
        self.advance(max(0.0, seconds))

    def advance(self, seconds: float) -> float:
        """Move forward by ``seconds``; returns the new time. Raises ``ValueError`` if negative."""
        if seconds < 0:
            raise ValueError(f"a clock cannot go back ({seconds} s)")
        with self.ledger.transaction() as conn:
            conn.execute("UPDATE clock SET now = now + ? WHERE id=1", (seconds,))
        return self.now()

    def set(self, at: float) -> None:
        """Jump to ``at`` seconds if that is later than now (time never goes back)."""
        self.advance(max(0.0, at - self.now()))
