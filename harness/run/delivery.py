"""External deliveries and worker segments: the one mechanism the driver and the replay share.

A run alternates **deliveries** (the start request, human decisions, cancellations, clock moves,
deploys; each one a record of ``RunOutcome.deliveries_log``, the shape a trace file keeps) with
**worker segments** (worker processes started until one exits cleanly, a new one after each harness
kill). The driver (:mod:`crashpoint.harness.run.pack_driver`) turns a case's events into delivery records
and sends them with :func:`send`; the replay (:mod:`crashpoint.harness.traces.replay`) sends the
records a trace file kept. Both run their workers with :func:`run_segment`, started by the launcher
of their crash mode (:mod:`crashpoint.harness.process.launch`).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping, Protocol, Sequence

from crashpoint.errors import EngineCrashed
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.harness.adapters.protocol import EngineAdapter, RunContext
from crashpoint.harness.process import kills as kills_judge
from crashpoint.harness.process import crashpoints
from crashpoint.harness.process import forkserver
from crashpoint.harness.process.launch import RUN_MARKER, Launcher

PROBE_SPEC = "crashpoint.harness.process.crashpoints:probe"
#: Worker processes started for one segment before the harness gives up on a crash loop, count.
MAX_WORKERS_PER_RUN = 40


class Log(Protocol):
    """What a segment writes to (a :class:`~crashpoint.harness.run.pack_driver.RunOutcome` is one)."""

    workers: int
    kills: int
    deliveries_log: list[dict[str, Any]]
    notes: list[str]
    kill_log: list[dict[str, Any]]
    kill_problems: list[str]


def send(adapter: EngineAdapter, ctx: RunContext, ledger: Ledger, clock: VirtualClock, workflow_id: str,
         record: Mapping[str, Any], *, first: bool = True) -> Any:
    """Make one delivery of a ``deliveries_log`` record (its ``kind`` and that kind's fields).

    ``start``: the start request; ``approval``: the human's decision, recorded in the ledger first
    (unless not ``first``: a repeated delivery of one decision), then sent; ``cancel``; ``approval_timeout``: the clock moves just past the deadline of the
    approval pending *now* (``None`` when none is; the record's ``clock_to`` is not trusted, the engine
    under test may have another deadline); ``advance_clock``: the clock moves ``seconds``; ``deploy``:
    the record's ``definition``; ``restart``: nothing (the next worker is a new process).

    Returns the engine's ``accepted`` (bool) for a start, an approval or a cancel; for an approval
    timeout, the pending approval it timed out (the adapter's ``pending_approval``; ``None``: nothing
    was pending); else ``None``.

    Raises:
        ValueError: an unknown kind. Whatever the adapter raises.
    """
    kind = record["kind"]
    if kind == "start":
        return adapter.start(ctx, record["workflow_id"], record["workflow"], record["input"],
                             initial_step=record.get("initial_step"), idempotency_key=record["idempotency_key"])
    if kind == "approval":
        if first:
            ledger.record_decision(record["approval_id"], record["granted"], record["by"], clock.now())
        return adapter.send_approval(ctx, workflow_id, record["approval_id"], granted=record["granted"],
                                     by=record["by"], idempotency_key=record["idempotency_key"])
    if kind == "cancel":
        return adapter.cancel(ctx, workflow_id, reason=record["reason"], idempotency_key=record["idempotency_key"])
    if kind == "approval_timeout":
        pending = adapter.status(ctx, workflow_id).get("pending_approval")
        if not pending:
            return None
        clock.set(float(pending["deadline"]) + 1.0)
        return pending
    if kind == "advance_clock":
        clock.advance(float(record["seconds"]))
        return None
    if kind == "deploy":
        adapter.deploy(ctx, record["definition"])
        return None
    if kind == "restart":
        return None
    raise ValueError(f"unknown delivery kind {kind!r}")


def worker_argv(adapter: EngineAdapter, ctx: RunContext, log: Log, crash_point: str | None, held: Sequence[str] = (),
                simulate: bool = False, witness: bool = True) -> tuple[list[str], dict[str, str], Path]:
    """The command, environment and log file (``RUN_DIR/worker-NNN.log``) of the run's next worker,
    counted in ``log.workers``; its environment carries :data:`~crashpoint.harness.process.launch.RUN_MARKER`
    and :data:`~crashpoint.harness.process.forkserver.ISOLATED_ENV`. ``witness``: its probe keeps the harness's
    record beside the run folder (:func:`~crashpoint.harness.process.crashpoints.witness_dir`)."""
    argv = adapter.worker_command(ctx, PROBE_SPEC, crashpoints.probe_arg(ctx.run_dir, crash_point, list(held),
                                                                         simulate=simulate, witness=witness))
    log.workers += 1
    env = {**ctx.env, **forkserver.ISOLATED_ENV, RUN_MARKER: str(Path(ctx.run_dir).resolve())}
    return argv, env, ctx.run_dir / f"worker-{log.workers:03d}.log"


def run_segment(adapter: EngineAdapter, ctx: RunContext, launch: Launcher, log: Log, crash_point: str | None, *,
                held: Sequence[str] = (), poll: Callable[[], None] | None = None, ledger: Ledger | None = None,
                together: int = 1, alongside: Callable[[int], Callable[[], None]] | None = None,
                witness: bool = True) -> None:
    """Run worker processes until one exits cleanly; start a new one after each verified harness kill.

    Each worker gets the probe argument for ``crash_point`` (an id or ``A >> B``; ``None``: nothing is
    killed) and the points it is ``held`` at (``poll`` serves them while it runs). Each finished worker is
    judged by :func:`crashpoint.harness.process.kills.check_worker` from its pid, exit status and the probe's
    witness events (``witness``; without it no kill can be verified, so any SIGKILL is a crash): a verified
    kill goes to ``log.kill_log`` and is logged as a ``kill`` delivery record (``crash_point``, ``worker``,
    and the ledger's last ``gseq`` when ``ledger`` is given); what cannot be verified goes to
    ``log.kill_problems``. After a kill, ``together`` workers recover at once: ``alongside(n)`` starts
    ``n`` more and returns the function that waits for them.

    Raises:
        EngineCrashed: a worker exited non-zero without a harness kill (the message quotes its log's
            tail), or :data:`MAX_WORKERS_PER_RUN` workers in a row were killed.
        WorkerTimeout: a worker ran out of time.
    """
    at_once = 1
    for _ in range(MAX_WORKERS_PER_RUN):
        seen = len(crashpoints.witness_events(ctx.run_dir)) if witness else 0
        wait_others = alongside(at_once - 1) if at_once > 1 and alongside is not None else None
        simulate = launch.simulates and not held and wait_others is None
        argv, env, out = worker_argv(adapter, ctx, log, crash_point, held, simulate=simulate, witness=witness)
        started: list[int] = []
        rc, leftovers = launch.launch(argv, env, out, poll if held or wait_others else None, started.append)
        if wait_others is not None:
            wait_others()
        if leftovers:
            log.notes.append(f"worker {log.workers} left {len(leftovers)} process(es) running, killed: "
                             + "; ".join(leftovers))
        killed = kills_judge.check_worker(log.kill_log, log.kill_problems, log.workers,
                                          started[0] if started else None, rc,
                                          crashpoints.witness_events(ctx.run_dir)[seen:] if witness else [],
                                          simulated=simulate and bool(started) and started[0] == os.getpid())
        if rc == 0:
            return
        if killed:
            if log.kill_log and log.kill_log[-1]["worker"] == log.workers:
                log.kills += 1
                entry = {"step": log.deliveries_log[-1]["step"] if log.deliveries_log else 0, "kind": "kill",
                         "worker": log.workers, "crash_point": log.kill_log[-1]["crash_point"]}
                if ledger is not None:
                    entry["ledger_gseq"] = ledger.last_gseq()
                log.deliveries_log.append(entry)
            at_once = together
            continue
        tail = out.read_text(errors="replace").strip().splitlines()[-6:] if out.exists() else []
        raise EngineCrashed(f"worker exited with {rc} (not a harness kill): " + " | ".join(tail))
    raise EngineCrashed(f"{MAX_WORKERS_PER_RUN} worker processes in a row were killed or restarted "
                        "without the workflow reaching a quiescent state")
