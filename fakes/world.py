"""Factory that a worker process calls to build the fake world from a run folder.

``build(run_dir, probe) -> (Toolbox, VirtualClock)`` opens ``RUN_DIR/ledger.db``; it is
the ``--world crashpoint.fakes.world:build`` argument of the engine worker.
"""

from __future__ import annotations

from pathlib import Path

from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.tools import Toolbox
from crashpoint.protocols import Probe, no_probe

LEDGER_FILE = "ledger.db"


def build(run_dir: str, probe: Probe = no_probe) -> tuple[Toolbox, VirtualClock]:
    """Open the world of ``run_dir``: its ledger-backed tools and virtual clock."""
    ledger = Ledger(Path(run_dir) / LEDGER_FILE)
    clock = VirtualClock(ledger)
    return Toolbox(ledger, clock, probe), clock
