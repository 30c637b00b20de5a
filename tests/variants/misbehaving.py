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


class HangsWithChildren(Engine):
    """Starts two children in its own process group, then hangs: the timeout must kill the whole
    group (children included) and the verdict must be ``unknown`` with the reason."""

    def run_until_quiescent(self) -> dict[str, str]:
        for _ in range(2):
            subprocess.Popen(["sleep", "300"])
        time.sleep(3600)
        return {}


class ExitsMidRun(Engine):
    """Exits with status 3 in the middle of its first pass, without being killed (an engine crash
    the harness did not cause): an ``error`` verdict naming the exit status, never a pass."""

    def run_until_quiescent(self) -> dict[str, str]:
        import os

        os._exit(3)


class WritesGarbageToStore(Engine):
    """Finishes its work, then overwrites its own SQLite store with garbage: the harness must not
    read a verdict out of it (an ``error``), nor crash."""

    def run_until_quiescent(self) -> dict[str, str]:
        import os

        result = super().run_until_quiescent()
        self.store.db.close()
        for suffix in ("", "-wal"):
            candidate = f"{self.store.path}{suffix}"
            if os.path.exists(candidate):
                with open(candidate, "r+b") as fh:
                    fh.write(b"garbage " * 512)
        return result


class LeavesChildInGroup(Engine):
    """Leaves a child in its own process group (no new session) running after it exits: it must be
    killed with the group and reported."""

    def run_until_quiescent(self) -> dict[str, str]:
        subprocess.Popen(["sleep", "300"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return super().run_until_quiescent()


class GrantInProcessMemory(Engine):
    """Bug: a human's grant is kept in a class attribute, which lives as long as the process.

    The grant never reaches the durable state, and a resumed worker process finds none: a real
    kill between the decision and the irreversible step makes the refund be refused. A simulated
    crash (``--crash-mode inprocess``) runs the next worker in the same process, where the class
    attribute survives, so it misses the bug: ``tests/integration/test_crash_modes.py`` shows both.
    """

    granted: dict[tuple[str, str], bool] = {}

    def _commit(self, name: str, wid: str, st: dict, moves, **kwargs) -> None:  # type: ignore[no-untyped-def]
        if name == "approval_decision":
            for approval_id, decision in st["approvals"].items():
                GrantInProcessMemory.granted[(wid, approval_id)] = bool(decision["granted"])
            st["approvals"] = {}
        super()._commit(name, wid, st, moves, **kwargs)

    def _gate_granted(self, st: dict, definition) -> bool:  # type: ignore[no-untyped-def]
        wid = st["trace_id"].removeprefix("trace-")
        gates = [p.human_gate.approval_id for p in definition.phases[:st["phase"]] if p.human_gate]
        return bool(gates) and all(GrantInProcessMemory.granted.get((wid, g)) for g in gates)


def _daemon(seconds: str, env: dict | None = None) -> None:
    """A ``sleep SECONDS`` in a new session (its own process group), outliving whoever started it."""
    subprocess.Popen(["sleep", seconds], start_new_session=True, env=env, stdin=subprocess.DEVNULL,
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


class LeavesDaemonWithEmptyEnv(Engine):
    """Starts a daemon in a new session with an empty environment (no run marker), then finishes its work:
    neither the worker's group nor the marker finds it; only a subreaper above the worker does."""

    def run_until_quiescent(self) -> dict[str, str]:
        _daemon("317.5", env={})
        return super().run_until_quiescent()


class KillsItsZygote(Engine):
    """Starts a daemon, then SIGKILLs its parent (the harness's zygote, under ``--crash-mode kill``): an
    ``error`` verdict, and nothing of the run may survive."""

    def run_until_quiescent(self) -> dict[str, str]:
        import os
        import signal

        _daemon("318.5")
        os.kill(os.getppid(), signal.SIGKILL)
        time.sleep(30)
        return super().run_until_quiescent()


class DaemonFromHarnessSide(Engine):
    """Starts a daemon from ``deploy``, which the reference adapter calls in the harness process (not in a
    worker): it carries no run marker and is no worker's child, yet it must die with the run."""

    def deploy(self, definition: Any) -> bool:
        _daemon("319.5")
        return super().deploy(definition)


class FailsWhenTold(Engine):
    """A correct engine, until the environment carries ``VARIANT_FAIL_NOW``: then every worker pass raises
    (the same engine and version, broken between a sweep and its ``--resume``)."""

    def run_until_quiescent(self) -> dict[str, str]:
        import os

        if os.environ.get("VARIANT_FAIL_NOW"):
            raise RuntimeError("told to fail")
        return super().run_until_quiescent()
