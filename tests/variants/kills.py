"""Adapters, engines and probes whose kills do not land as claimed (test code only).

Each one passed every crash run before kills were verified (issue 17, "Every verdict is earned");
each must now give ``error`` ("the kill did not land") or a golden run that is not ``passed``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from crashpoint.engine.engine import Engine
from crashpoint.harness.adapters.protocol import RunContext
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.process.crashpoints import LOG_FILE, CrashProbe


class NeverProbes(ReferenceAdapter):
    """A worker that never calls the probe: its golden runs pass no crash point, so a crash sweep has
    nothing to kill (certify printed Level 3 from "0 crash points, 10 runs")."""

    def __init__(self) -> None:
        super().__init__(name="never-probes")

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        argv = super().worker_command(run, probe_spec, probe_arg)
        at = argv.index("--probe")
        return argv[:at] + argv[at + 4:]


class TruncatesCrashLog(Engine):
    """Empties the run folder's ``crashpoints.log`` at the start of every worker pass (an engine that
    "cleans" its data folder): occurrence counts restart, recovery points vanish."""

    def run_until_quiescent(self):  # type: ignore[no-untyped-def]
        log = Path(self.store.path).parent / LOG_FILE
        if log.exists():
            os.truncate(log, 0)
        return super().run_until_quiescent()


def truncates_crash_log() -> ReferenceAdapter:
    """The reference adapter on :class:`TruncatesCrashLog`."""
    return ReferenceAdapter(engine="variants.kills:TruncatesCrashLog", name="truncates-crash-log")


class _Survive(Exception):
    pass


class SurvivingProbe(CrashProbe):
    """Records its kill (``crash.fired`` and the witness) and then does not die."""

    def __call__(self, name: str) -> None:
        try:
            super().__call__(name)
        except _Survive:
            pass

    def _record(self, ident: str) -> None:
        super()._record(ident)
        raise _Survive(ident)


def surviving_probe(arg: str) -> SurvivingProbe:
    """Probe factory (``variants.kills:surviving_probe``) taking :func:`crashpoint.harness.process.crashpoints.probe_arg`'s JSON."""
    spec = json.loads(arg)
    extra = {"witness": True} if spec.get("witness") else {}
    return SurvivingProbe(spec["run_dir"], spec.get("targets") or (), spec.get("holds") or (), **extra)


class SurvivingProbeAdapter(ReferenceAdapter):
    """Hands its workers :class:`SurvivingProbe` instead of the harness's probe
    (``crash_fired: true, kills: 0`` before)."""

    def __init__(self) -> None:
        super().__init__(name="surviving-probe")

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        return super().worker_command(run, "variants.kills:surviving_probe", probe_arg)


class Supervisor(ReferenceAdapter):
    """A worker that is a supervisor: it runs the real worker as a child and restarts the child when it
    dies, so the probe's SIGKILL lands on the child while the process the harness started lives on."""

    fork_workers = False

    def __init__(self, engine: str = "crashpoint.engine.engine:Engine") -> None:
        super().__init__(engine=engine, name="supervisor")

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        return [sys.executable, "-m", "variants.kills", *super().worker_command(run, probe_spec, probe_arg)]


def supervise(argv: list[str]) -> int:
    """Run ``argv`` until it exits other than by SIGKILL; its status."""
    while True:
        rc = subprocess.call(argv)
        if rc != -9:
            return rc


if __name__ == "__main__":
    sys.exit(supervise(sys.argv[1:]))
