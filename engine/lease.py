"""Per-workflow leases, so that two workers on one store never run the same workflow at once.

A lease is an exclusive ``fcntl.flock`` on ``<db>.leases/<workflow id hash>.lock``. The kernel
drops it when its process dies, including by SIGKILL, so a crashed worker never blocks a
recovering one, and nothing needs a clock or a timeout (unlike time-based leases, which a
paused process can outlive). Works for workers on one host, which is the embedded store's
scope (SQLite is not shared across hosts either).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
from pathlib import Path


class Leases:
    """Non-blocking exclusive leases on workflow ids.

    Args:
        db_path: the engine database; lock files live in ``<db_path>.leases/``.
    """

    def __init__(self, db_path: str | Path) -> None:
        self.folder = Path(f"{db_path}.leases")
        self.folder.mkdir(exist_ok=True)
        self._held: dict[str, int] = {}

    def try_acquire(self, workflow_id: str) -> bool:
        """Take the lease; ``False`` when another live process holds it."""
        if workflow_id in self._held:
            return True
        name = hashlib.sha256(workflow_id.encode()).hexdigest()[:32] + ".lock"
        fd = os.open(self.folder / name, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        self._held[workflow_id] = fd
        return True

    def release(self, workflow_id: str) -> None:
        """Give the lease back (closing the descriptor drops the lock)."""
        fd = self._held.pop(workflow_id, None)
        if fd is not None:
            os.close(fd)

    def release_all(self) -> None:
        """Give back every lease this object holds."""
        for workflow_id in list(self._held):
            self.release(workflow_id)
