"""What one run left behind, as data: a pack run's :class:`RunOutcome` (read back from the engine through its
adapter, and from the fake world's ledger) and a target run's :class:`TargetOutcome` (the team's own code: its
workers' reports, the effect ledger, the crash logs). Drivers fill them; the judge and the reports read them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.run.pack_driver import Snapshot

#: ``by`` of a late answer's decision in the ledger (the approval rule counts it as no answer: it grants nothing).
LATE_BY = "crashpoint-late"


@dataclass
class RunOutcome:
    """What one run left behind, read back from the engine (through the adapter) and the ledger.

    Attributes:
        case_id: the case; ``crash_point`` the targeted crash point id or ``None`` (golden).
        workflow_id: the run's workflow id.
        status / stop_reason / pending_approval: the engine's final view of the workflow.
        version: the definition version the engine's durable state pins the run to (``None`` when the
            adapter's status does not say), read from the engine, never from its trace.
        trace: the workflow's trace (adapter shape).
        calls: ledger calls as dicts; ``decisions`` the human decisions; ``sequence`` both, in order.
        crash_points: crash point ids passed, in order (all worker processes of the run).
        crash_fired: the target crash point killed a worker (after the case's own ``kill`` faults), verified:
            every kill of the schedule is in ``kill_log`` with the process that resumed after it.
        kill_log: the verified kills, in order: ``{"worker" (number), "pid" (the process the harness started
            and saw die), "signal" ("SIGKILL", or "simulated" in-process), "crash_point", "resumed_by" (the
            pid of the new worker process that took over)}`` (see :mod:`crashpoint.harness.process.kills`).
        kill_problems: why a kill or a resume could not be verified (a probe that did not kill, a kill in
            another process, a changed crash point log): the run is then ``error``, never ``passed``.
        faults_missed: the case's ``faults`` that never fired (a kill or hold point never passed).
        workers: worker processes started (count); ``kills`` SIGKILLs the harness caused.
        deliveries: ``{"duplicates_sent": int, "duplicates_recognised": int}`` for events sent more than once.
        deliveries_log: every external delivery the driver made, in order (what a trace file replays):
            dicts with ``step`` (0: the start request, N: the N-th event after it) and ``kind``
            (``start``, ``approval``, ``cancel``, ``approval_timeout``, ``advance_clock``, ``kill``, or the
            event's type for an event that delivered nothing, such as ``restart``) and the kind's fields;
            a ``kill`` names its ``crash_point``, the ``worker`` it killed and ``ledger_gseq``, the last
            position in the ledger's order (calls and decisions) before the kill (0: none).
        notes: facts worth showing (events that had nothing to act on, unused tool scripts).
        clock_now: the virtual clock when the run ended, seconds.
        wall_s: wall time of the run, seconds.
        snapshots: (golden runs of a ``snapshots`` driver) the durable state before each worker segment.
        started_from: the golden snapshot (segment number) this run started from, ``None`` when it ran
            from the start request.
    """

    case_id: str
    crash_point: str | None
    workflow_id: str
    run_dir: Path
    status: str | None = None
    stop_reason: str | None = None
    pending_approval: dict[str, Any] | None = None
    version: int | None = None
    trace: list[dict[str, Any]] = field(default_factory=list)
    calls: list[dict[str, Any]] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    sequence: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    crash_points: list[str] = field(default_factory=list)
    crash_fired: bool = False
    kill_log: list[dict[str, Any]] = field(default_factory=list)
    kill_problems: list[str] = field(default_factory=list)
    faults_missed: list[str] = field(default_factory=list)
    clock_now: float | None = None
    workers: int = 0
    kills: int = 0
    deliveries: dict[str, int] = field(default_factory=lambda: {"duplicates_sent": 0, "duplicates_recognised": 0})
    deliveries_log: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    snapshots: list["Snapshot"] = field(default_factory=list, repr=False)
    started_from: int | None = None


@dataclass
class TargetOutcome:
    """What one run of a target left behind.

    Attributes:
        case / durability / crash_point: what ran (``crash_point`` ``None``: the golden run).
        threads: thread -> the worker's final status (``status``, ``values``, ``waiting``, ``error``?).
        calls: the effect calls (:class:`crashpoint.effect.EffectCall`) in ledger order.
        decisions: the human answers recorded, in order. ``crash_points``: ids passed, in order.
        fired: crash point ids that killed a worker. ``kills``: verified kills. ``workers``: processes.
        pids: ``[{"pid", "phase", "rc"}]`` per worker. ``deliveries``: what the outside world did, in order.
        lost_responses: scripted ``lost_response`` faults that fired. ``notes``: facts worth showing.
        steps: ``(pid, thread, step, node)`` for every node start, in order (how far each process got).
        over_budget: the run did not end within the target's budget (``budget_s``). ``wall_s``: seconds.
        engine_facts: what the engine's workers recorded beyond effects (:meth:`~crashpoint.harness.engines.base.Engine.facts`).
        not_tested: what the run was meant to test and did not (a duplicate whose processes never overlapped):
            its verdict is then ``error``.
        faults_missed: the case's ``faults`` (``"EFFECT OUTCOME"``) none of whose scripted outcomes a call used (an
            effect never called, or a misspelt name): on the golden run its verdict is then ``error``.
        kill_log / kill_problems: the verified kills (``{"worker", "pid", "signal", "crash_point", "resumed_by"}``)
            and why a kill or a resume could not be verified, as a pack run's
            (:func:`crashpoint.harness.process.kills.check_worker`): any problem makes the verdict ``error``.
        outside: effect calls made in a process that is not a worker (a node's subprocess), one text per process
            and effect (:func:`~crashpoint.harness.engines.effects.outside_calls`), and globals of the team's code
            that hold an ``effects:`` entry unwrapped (:func:`~crashpoint.harness.engines.workerlib.
            unwrapped_effects`): the ledger does not hold them, so the verdict is then ``error``.
        unobserved: processes a worker started without the run's marker whose commands the target's
            ``outside_ledger:`` does not name, one text each
            (:func:`~crashpoint.harness.engines.effects.unobserved`): a side effect made there is not seen, so the
            verdict is then ``error``.
        races: the races the run's crash spec held (``"A with P held until Q"``:
            :func:`crashpoint.harness.process.crashpoints.races`): ``[{"held", "until", "pid", "end": "met" |
            "timeout" | "killed", "seconds"}]``.
        parents: each child workflow's parent, as the engine's workers recorded it when the engine was asked to start
            the child: ``{thread: {"parent": PARENT_THREAD, "after_gseq": N, "pid": PID}}`` (``after_gseq``: the
            ledger's last position, calls and decisions, at that moment; :meth:`~crashpoint.harness.engines.effects.
            EffectSession.record_parent`). ``target.approval_gate`` follows it: a parent's approval answered before
            the child started gates the child's effects.
        unstable: on a golden run, what differed between it and a second fault-free run of the case
            (:func:`crashpoint.harness.judge.stable.unstable`): ``{"status": [THREAD], "values": {THREAD: [PATH]},
            "effects": [[THREAD, EFFECT]]}``, left out when a crashed run is compared with it; ``{}`` on other runs.
    """

    case: str
    durability: str
    crash_point: str | None
    run_dir: Path
    threads: dict[str, dict[str, Any]] = field(default_factory=dict)
    calls: list[Any] = field(default_factory=list)
    decisions: list[dict[str, Any]] = field(default_factory=list)
    crash_points: list[str] = field(default_factory=list)
    fired: list[str] = field(default_factory=list)
    kills: int = 0
    workers: int = 0
    pids: list[dict[str, Any]] = field(default_factory=list)
    deliveries: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    over_budget: str | None = None
    wall_s: float = 0.0
    steps: list[tuple[int, str, int | None, str]] = field(default_factory=list)
    engine_facts: dict[str, Any] = field(default_factory=dict)
    not_tested: list[str] = field(default_factory=list)
    kill_log: list[dict[str, Any]] = field(default_factory=list)
    kill_problems: list[str] = field(default_factory=list)
    faults_missed: list[str] = field(default_factory=list)
    outside: list[str] = field(default_factory=list)
    unobserved: list[str] = field(default_factory=list)
    races: list[dict[str, Any]] = field(default_factory=list)
    parents: dict[str, dict[str, Any]] = field(default_factory=dict)
    unstable: dict[str, Any] = field(default_factory=dict)


__all__ = ["RunOutcome", "TargetOutcome", "LATE_BY"]
