"""The adapter for crashpoint's reference engine; nothing in the harness depends on it."""

from __future__ import annotations

import sys
from pathlib import Path
from contextlib import contextmanager
from dataclasses import asdict
from typing import Any, Iterator, Mapping

from crashpoint import __version__
from crashpoint.engine.definition import WorkflowDefinition
from crashpoint.engine.engine import Engine
from crashpoint.engine.worker import load_object
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.adapters.protocol import RunContext
from crashpoint.protocols import ToolError

ENGINE_FILE = "engine.db"


class _NoTools:
    """Client-side operations never call tools; a call here is a bug."""

    def call(self, tool: str, args: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        raise ToolError(f"client-side engine tried to call {tool}", retryable=False)


class ReferenceAdapter:
    """Drives :class:`crashpoint.engine.Engine` (or a subclass named by ``engine``).

    Args:
        engine: ``MODULE:CLASS`` of the engine class, used by both the harness side and the
            worker processes (tests pass deliberately broken subclasses here).
        name: name shown in reports.
    """

    #: Workers are ``python -m crashpoint.engine.worker``: the driver may fork them from a warm zygote.
    fork_workers = True
    #: Same files and same inputs, same run (virtual clock, seeded data): a crash run may start from a
    #: golden run's snapshot.
    deterministic_runs = True

    def __init__(self, engine: str = "crashpoint.engine.engine:Engine", name: str = "reference") -> None:
        self.engine = engine
        self.name = name
        # run folder -> the client kept open between open_run and close_run (None: not opened yet)
        self._open: dict[Path, Engine | None] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_open": {}}  # open connections stay in the process that opened them

    def open_run(self, run: RunContext) -> None:
        """Until :meth:`close_run`, keep the client engine the next operation opens on the run's files
        (each operation then reuses it instead of opening and closing the databases). Idempotent."""
        self._open.setdefault(run.run_dir, None)

    def close_run(self, run: RunContext) -> None:
        """Close the client kept since :meth:`open_run` (nothing when none was opened)."""
        engine = self._open.pop(run.run_dir, None)
        if engine is not None:
            engine.close()
            engine.clock.ledger.close()

    def _new_client(self, run: RunContext) -> Engine:
        cls = load_object(self.engine)
        # the harness's client: no fsync (its writes reach the OS, which is all a killed worker needs)
        return cls(run.run_dir / ENGINE_FILE, _NoTools(), VirtualClock(Ledger(run.run_dir / LEDGER_FILE, "OFF")),
                   synchronous="OFF")

    def version(self) -> str:
        """crashpoint's version (the reference engine ships with it)."""
        return __version__

    @contextmanager
    def _client(self, run: RunContext) -> Iterator[Engine]:
        if run.run_dir in self._open:
            kept = self._open[run.run_dir]
            if kept is None:
                kept = self._open[run.run_dir] = self._new_client(run)
            yield kept
            return
        engine = self._new_client(run)
        try:
            yield engine
        finally:
            engine.close()
            engine.clock.ledger.close()

    def prepare(self, run: RunContext, workflows: Mapping[str, Mapping[str, Any]]) -> None:
        """Create ``engine.db`` and deploy each workflow definition."""
        with self._client(run) as engine:
            for data in workflows.values():
                engine.deploy(WorkflowDefinition.from_dict(data))

    def deploy(self, run: RunContext, workflow: Mapping[str, Any]) -> bool:
        """Deploy one more version of a workflow definition (the engine pins running workflows to theirs)."""
        with self._client(run) as engine:
            return engine.deploy(WorkflowDefinition.from_dict(dict(workflow)))

    def start(self, run: RunContext, workflow_id: str, workflow: str, input: Mapping[str, Any], *,
              initial_step: str | None, idempotency_key: str) -> bool:
        """See :class:`~crashpoint.harness.adapters.protocol.EngineAdapter`."""
        with self._client(run) as engine:
            return engine.start(workflow_id, workflow, dict(input), initial_step=initial_step,
                                idempotency_key=idempotency_key)

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        """``python -m crashpoint.engine.worker`` on the run's files."""
        return [sys.executable, "-m", "crashpoint.engine.worker", "--db", str(run.run_dir / ENGINE_FILE),
                "--world", run.world, "--world-arg", str(run.run_dir), "--probe", probe_spec,
                "--probe-arg", probe_arg, "--engine", self.engine, "--worker-id", "worker"]

    def send_approval(self, run: RunContext, workflow_id: str, approval_id: str, *, granted: bool, by: str,
                      idempotency_key: str) -> bool:
        """See :class:`~crashpoint.harness.adapters.protocol.EngineAdapter`."""
        with self._client(run) as engine:
            return engine.approve(workflow_id, approval_id, granted=granted, by=by, idempotency_key=idempotency_key)

    def cancel(self, run: RunContext, workflow_id: str, *, reason: str, idempotency_key: str) -> bool:
        """See :class:`~crashpoint.harness.adapters.protocol.EngineAdapter`."""
        with self._client(run) as engine:
            return engine.cancel(workflow_id, reason, idempotency_key=idempotency_key)

    def status(self, run: RunContext, workflow_id: str) -> dict[str, Any]:
        """See :class:`~crashpoint.harness.adapters.protocol.EngineAdapter`."""
        with self._client(run) as engine:
            return asdict(engine.status(workflow_id))

    def trace(self, run: RunContext, workflow_id: str) -> list[dict[str, Any]]:
        """See :class:`~crashpoint.harness.adapters.protocol.EngineAdapter`."""
        with self._client(run) as engine:
            return engine.trace(workflow_id)


