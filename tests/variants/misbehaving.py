"""Engines that misbehave as processes rather than as workflows (test code only)."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from crashpoint.engine.engine import Engine


class LeavesDaemon(Engine):
    """Starts a child in a new session (its own process group) that outlives the worker and holds
    the worker's stdout/stderr open. The harness must neither hang on it nor let it survive."""

    def run_until_quiescent(self) -> dict[str, str]:
        subprocess.Popen(["sleep", "300"], start_new_session=True)
        return super().run_until_quiescent()


class HangsInWorker(Engine):
    """Never finishes a worker pass: the verdict must be ``unknown``, never ``passed``."""

    def run_until_quiescent(self) -> dict[str, str]:
        time.sleep(3600)
        return {}


class ExitsEarly(Engine):
    """Exits 0 without doing any work."""

    def run_until_quiescent(self) -> dict[str, Any]:
        return {}


class ExitsHarness(Engine):
    """Calls ``sys.exit(0)`` from code the adapter runs inside the harness process."""

    def deploy(self, definition: Any) -> bool:
        raise SystemExit(0)
