"""Crash points: named places where the harness may SIGKILL an engine worker process.

A crash point is identified by its name and, when the same name is passed more than
once in a run, its occurrence: ``after_checkpoint:refund_draft``,
``before_effect:refunds.issueRefund#2``. Names come from the engine's store
(``before_checkpoint:NAME`` / ``after_checkpoint:NAME``), the engine
(``approval_request:ID``) and the fake tools (``before_effect:TOOL`` / ``after_effect:TOOL``).

The probe runs inside the worker. It appends every crash point it passes to
``RUN_DIR/crashpoints.log`` with an unbuffered ``write`` (the kernel keeps it across a
SIGKILL), so occurrences are counted across the worker processes of one run, and the
golden run's log is the list of crash points to sweep. When a target is reached the
probe appends it to ``RUN_DIR/crash.fired`` and sends SIGKILL to its own process: no
``finally`` block, no atexit handler, no flush runs (the real thing, as in the project's
offline probe of real engines). A schedule ``"A >> B"`` kills at ``A`` and then at ``B``,
a point of the recovery from the first kill (crash during recovery).
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


#: Separator of a crash schedule's points in its string form: ``"A >> B"`` kills at ``A``, then
#: again at ``B`` while the new worker recovers from the first kill.
THEN = " >> "


def schedule(crash_point: str | None) -> list[str]:
    """The points of a crash point string: ``None`` -> ``[]``, ``"A >> B"`` -> ``["A", "B"]``."""
    return [p.strip() for p in crash_point.split(THEN.strip())] if crash_point else []


class CrashProbe:
    """The worker-side probe.

    Args:
        run_dir: the run folder (log and marker live there).
        targets: crash point ids to kill at, in order: the second fires only after the first has
            killed a worker (a crash during recovery). Empty: only record.
    """

    def __init__(self, run_dir: str | Path, targets: list[str] | tuple[str, ...] = ()) -> None:
        self.run_dir = Path(run_dir)
        self.targets = list(targets)
        log = self.run_dir / LOG_FILE
        self.counts: Counter[str] = Counter()
        if log.exists():
            for line in log.read_text().splitlines():
                self.counts[line.split("#", 1)[0]] += 1
        self.fired = fired_points(self.run_dir)
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def __call__(self, name: str) -> None:
        self.counts[name] += 1
        ident = point_id(name, self.counts[name])
        os.write(self.fd, (ident + "\n").encode())
        pending = self.targets[len(self.fired):]
        if pending and ident == pending[0]:
            self._record(ident)
            os.kill(os.getpid(), signal.SIGKILL)

    def _record(self, ident: str) -> None:
        fd = os.open(self.run_dir / FIRED_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (ident + "\n").encode())
        os.close(fd)
        self.fired.append(ident)


def probe(arg: str) -> Callable[[str], None]:
    """Worker factory: ``arg`` is the JSON ``{"run_dir": ..., "targets": [...]}`` of :func:`probe_arg`."""
    spec = json.loads(arg)
    return CrashProbe(spec["run_dir"], spec.get("targets") or ())


def probe_arg(run_dir: str | Path, crash_point: str | None) -> str:
    """The ``--probe-arg`` value for :func:`probe` (JSON, so any folder name or point id survives).

    ``crash_point`` is a crash point id or a schedule ``"A >> B"`` (see :func:`schedule`).
    """
    return json.dumps({"run_dir": str(run_dir), "targets": schedule(crash_point)})


def fired_points(run_dir: str | Path) -> list[str]:
    """Crash point ids that killed a worker of this run, in order."""
    path = Path(run_dir) / FIRED_FILE
    return path.read_text().splitlines() if path.exists() else []


def recovery_points(log: list[str], first: str) -> list[str]:
    """The crash points passed after ``first`` in a run's log: those of the recovery from a kill at ``first``."""
    return log[log.index(first) + 1:] if first in log else []


def passed(run_dir: str | Path) -> list[str]:
    """Crash point ids recorded in a run folder, in order (empty when none)."""
    log = Path(run_dir) / LOG_FILE
    return log.read_text().splitlines() if log.exists() else []


def fired(run_dir: str | Path, crash_point: str | None) -> bool:
    """``True`` once every point of ``crash_point`` (an id or a schedule) has killed a worker here."""
    return fired_points(run_dir) == schedule(crash_point) and bool(crash_point)
