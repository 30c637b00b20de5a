"""Crash points: named places where the harness may SIGKILL an engine worker process.

A crash point is identified by its name and, when the same name is passed more than
once in a run, its occurrence: ``after_checkpoint:refund_draft``,
``before_effect:refunds.issueRefund#2``. Names come from the engine's store
(``before_checkpoint:NAME`` / ``after_checkpoint:NAME``), the engine
(``approval_request:ID``) and the fake tools (``before_effect:TOOL`` / ``after_effect:TOOL``).

The probe runs inside the worker. It appends every crash point it passes to
``RUN_DIR/crashpoints.log`` with an unbuffered ``write`` (the kernel keeps it across a
SIGKILL), so occurrences are counted across the worker processes of one run, and the
golden run's log is the list of crash points to sweep. When the target is reached the
probe creates ``RUN_DIR/crash.fired`` and sends SIGKILL to its own process: no
``finally`` block, no atexit handler, no flush runs (the real thing, as in the probe
of ``shared/notes/real-engines-offline.md``).
"""

from __future__ import annotations

import json
import os
import signal
from collections import Counter
from pathlib import Path
from typing import Callable

LOG_FILE = "crashpoints.log"
FIRED_FILE = "crash.fired"


def point_id(name: str, occurrence: int) -> str:
    """``name`` for the first occurrence, ``name#N`` for the N-th (N >= 2)."""
    return name if occurrence == 1 else f"{name}#{occurrence}"


class CrashProbe:
    """The worker-side probe.

    Args:
        run_dir: the run folder (log and marker live there).
        target: crash point id to kill at, or ``None`` to only record.
    """

    def __init__(self, run_dir: str | Path, target: str | None = None) -> None:
        self.run_dir = Path(run_dir)
        self.target = target or None
        log = self.run_dir / LOG_FILE
        self.counts: Counter[str] = Counter()
        if log.exists():
            for line in log.read_text().splitlines():
                self.counts[line.split("#", 1)[0]] += 1
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, name: str) -> None:
        self.counts[name] += 1
        ident = point_id(name, self.counts[name])
        os.write(self.fd, (ident + "\n").encode())
        if ident == self.target and self._claim():
            os.kill(os.getpid(), signal.SIGKILL)

    def _claim(self) -> bool:
        try:
            fd = os.open(self.run_dir / FIRED_FILE, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        os.write(fd, self.target.encode())
        os.close(fd)
        return True


def probe(arg: str) -> Callable[[str], None]:
    """Worker factory: ``arg`` is the JSON ``{"run_dir": ..., "target": ... | null}`` of :func:`probe_arg`."""
    spec = json.loads(arg)
    return CrashProbe(spec["run_dir"], spec.get("target"))


def probe_arg(run_dir: str | Path, target: str | None) -> str:
    """The ``--probe-arg`` value for :func:`probe` (JSON, so any folder name or point id survives)."""
    return json.dumps({"run_dir": str(run_dir), "target": target})


def passed(run_dir: str | Path) -> list[str]:
    """Crash point ids recorded in a run folder, in order (empty when none)."""
    log = Path(run_dir) / LOG_FILE
    return log.read_text().splitlines() if log.exists() else []


def fired(run_dir: str | Path) -> bool:
    """``True`` once the target crash point has killed a worker in this run folder."""
    return (Path(run_dir) / FIRED_FILE).exists()
