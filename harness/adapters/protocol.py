"""The adapter protocol: the one class a team writes to put its engine under crashpoint.

The harness owns the processes, the fake world and the oracles; the adapter only
translates. Every method gets the :class:`RunContext` of one run (its own folder), so
one adapter instance serves many runs in parallel.

The trace an adapter returns is a list of dicts with at least ``kind``; the oracles read
these kinds and fields (others are kept and shown, not judged):

=====================  =====================================================
kind                   fields
=====================  =====================================================
``transition``         ``from``, ``to`` (status names of the state table)
``checkpoint``         ``name``
``step_started``       ``task``
``tool_call``          ``tool``, ``idempotency_key``, ``side_effect``
``tool_result``        ``tool``, ``ok``
``approval_requested`` ``approval_id``
``approval_granted`` / ``approval_denied`` / ``approval_timeout``  ``approval_id``
``retry_scheduled``    ``task``, ``attempt``
``compensation_result`` ``task``, ``ok``
``workflow_finished``  ``status``, ``stop_reason``
=====================  =====================================================

Optional attributes ``crashpoint certify`` reads: ``unsupported_claims`` (claim names the engine
does not offer: graded ``unsupported``, never ``passed``) and ``known_findings`` (claim -> text
pinned to an engine version, shown next to the verdict, never changing it).

Optional speed-ups the driver uses when present (all off unless the adapter declares them):
``fork_workers = True`` (its worker command is ``[sys.executable, "-m", MODULE, ...]`` with a
``MODULE.main(argv)``: workers are forked from a warm zygote; required for ``--crash-mode
inprocess`` too), ``deterministic_runs = True`` (same files and inputs give the same run: crash
runs may start from the golden run's snapshot), and ``open_run(run)`` / ``close_run(run)``
(both idempotent): between them the adapter may keep its client connections open; the driver
closes them while workers run and before it reads the final status and trace. Engine-specific crash
points are the adapter's: its worker calls the probe where the engine makes state durable
(``before_checkpoint:NAME`` / ``after_checkpoint:NAME``), for example in a wrapper around the
engine's checkpointer or step recorder.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Protocol, runtime_checkable


@dataclass(frozen=True)
class RunContext:
    """One run's folder and the fake world's factory.

    Attributes:
        run_dir: the run's private folder (engine files, ledger, crash log).
        world: ``MODULE:FACTORY`` that a worker calls as ``factory(run_dir, probe) -> (tools, clock)``.
        env: extra environment variables for worker processes.
    """

    run_dir: Path
    world: str = "crashpoint.fakes.world:build"
    env: Mapping[str, str] = field(default_factory=dict)


@runtime_checkable
class EngineAdapter(Protocol):
    """What the harness needs from an engine. All methods may raise; the harness turns an
    exception into an ``error`` verdict naming the adapter and the method."""

    #: Short engine name for reports (``"reference"``, ``"dbos"``...).
    name: str

    def version(self) -> str:
        """The engine's version string, recorded with every result."""
        ...

    def prepare(self, run: RunContext, workflows: Mapping[str, Mapping[str, Any]]) -> None:
        """Create the engine's durable files in ``run.run_dir`` and deploy ``workflows``
        (name -> workflow definition data, the pack's workflow YAML parsed)."""
        ...

    def deploy(self, run: RunContext, workflow: Mapping[str, Any]) -> bool:
        """Deploy one more version of a workflow while runs are in flight (a case's ``deploy`` event):
        ``workflow`` is definition data like ``prepare``'s values, with a new ``version``. Runs that
        started on an earlier version must finish on it. ``False`` if that version was already deployed."""
        ...

    def start(self, run: RunContext, workflow_id: str, workflow: str, input: Mapping[str, Any], *,
              initial_step: str | None, idempotency_key: str) -> bool:
        """Submit a start request; ``False`` if the engine recognised it as a duplicate."""
        ...

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        """argv of one worker process that resumes every unfinished workflow of the run and
        exits 0 once each is terminal or waiting for a human. The worker must call the probe
        (``probe_spec`` = ``MODULE:FACTORY``, built with ``probe_arg``) at its crash points and
        hand it to the world factory ``run.world`` so that tool crash points fire too."""
        ...

    def send_approval(self, run: RunContext, workflow_id: str, approval_id: str, *, granted: bool, by: str,
                      idempotency_key: str) -> bool:
        """Deliver a human decision; ``False`` if recognised as a duplicate."""
        ...

    def cancel(self, run: RunContext, workflow_id: str, *, reason: str, idempotency_key: str) -> bool:
        """Request cancellation; ``False`` if recognised as a duplicate."""
        ...

    def status(self, run: RunContext, workflow_id: str) -> dict[str, Any]:
        """``{"status", "stop_reason", "pending_approval": {"approval_id", "deadline"} | None,
        "progress": {...}}``; ``status`` uses the names of the state table."""
        ...

    def trace(self, run: RunContext, workflow_id: str) -> list[dict[str, Any]]:
        """The workflow's trace, oldest first, in the shape described in the module docstring."""
        ...


def adapter_class(adapter: Any) -> str:
    """The class name of ``adapter`` under any wrapper that keeps it as ``wrapped`` (the
    ``GuardedAdapter`` of ``--adapter``): what the results store's ``adapter`` column holds."""
    while "wrapped" in getattr(adapter, "__dict__", {}):
        adapter = adapter.__dict__["wrapped"]
    return type(adapter).__name__
