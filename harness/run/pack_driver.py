"""Drive one case on one engine, fault-free (the golden run) or with a SIGKILL at one crash point.

A run happens in its own folder. The driver sets up the fake world from the case's tool
events (scripted outcomes), deploys the pack's workflows through the adapter, submits
the start request, and then alternates worker processes with the case's external events
(approvals, timeouts, cancellations, restarts, clock moves, deploys of a new workflow
version): each event is delivered only once the previous worker has exited, so a run is
deterministic. Approvals marked ``before_wait`` go out with the start request, before the
first worker. When a worker is killed at the target crash point, a **new** worker process
is started on the same files and the run goes on; the new process gets no other input
than those files.
"""

from __future__ import annotations

import copy
import functools
import re
import shutil
import subprocess
import time
import zlib
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from crashpoint.harness.model.outcomes import RunOutcome
from crashpoint.errors import EngineCrashed
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.world import LEDGER_FILE, write_world
from crashpoint.harness.faults import kinds as fault_kinds
from crashpoint.harness.faults.kinds.tool import TOOL_EVENTS, placed, script_event
from crashpoint.harness.faults.kinds.zombie import WORKER_EVENT
from crashpoint.harness.process import crashpoints
from crashpoint.harness.process import forkserver
from crashpoint.harness.run.delivery import MAX_WORKERS_PER_RUN, PROBE_SPEC, run_segment, send, worker_argv  # noqa: F401
from crashpoint.harness.process.launch import RUN_MARKER, launcher, reap, reap_under, run_process  # noqa: F401
from crashpoint.harness.process import kills as kills_judge
from crashpoint.harness.adapters.protocol import EngineAdapter, RunContext
from crashpoint.harness.load.loader import Case, Pack, first_gate, redeployed
from crashpoint.harness.run.modes import CRASH_MODES, crash_label  # noqa: F401  (re-exported)




class Driver:
    """Runs cases on one adapter.

    Args:
        adapter: the engine under test.
        pack: the case's pack (workflows, effect vocabulary).
        worker_timeout_s: wall seconds one worker process may take before it is killed and
            the run is judged ``unknown``.
        crash_mode: one of :data:`CRASH_MODES`:

            - ``kill`` (default): a real SIGKILL. Workers are forked from a warm zygote
              (:mod:`crashpoint.harness.process.forkserver`) when the adapter sets ``fork_workers = True``;
              golden runs keep the durable state before each worker segment and a crash run starts
              from the golden state of its crash point's segment instead of replaying the prefix
              (when the adapter sets ``deterministic_runs = True``; see :class:`Snapshot`).
            - ``kill-cold``: a real SIGKILL, a new interpreter per worker, every run from its start
              request (the naive way, kept as the baseline the benchmark compares with).
            - ``inprocess``: simulated crashes, workers run in this process
              (:mod:`crashpoint.harness.process.inprocess`; adapters with ``fork_workers``, runs without holds),
              with snapshots as ``kill``.
    """

    def __init__(self, adapter: EngineAdapter, pack: Pack, worker_timeout_s: float = 60.0, *,
                 crash_mode: str = "kill") -> None:
        if crash_mode not in CRASH_MODES:
            raise ValueError(f"crash mode must be one of {', '.join(CRASH_MODES)}, got {crash_mode!r}")
        self.adapter = adapter
        self.pack = pack
        self.worker_timeout_s = worker_timeout_s
        self.crash_mode = crash_mode
        self.launcher = launcher(crash_mode, adapter, worker_timeout_s)
        self.snapshots = crash_mode in ("kill", "inprocess")

    def run(self, case: Case, run_dir: Path, crash_point: str | None = None,
            golden: RunOutcome | None = None) -> RunOutcome:
        """Run ``case`` in the empty folder ``run_dir``, killing a worker at ``crash_point``: an id, or a
        schedule ``"A >> B"`` that kills again at ``B`` during the recovery from ``A``.

        With the ``golden`` run of the same case (and ``snapshots``), the run starts from the golden
        run's durable state at the start of the worker segment that reaches ``crash_point``; the
        worker that runs to the crash point and is killed there is still a real process.

        The case's own ``faults`` fire too: its kills come first (``crash_point`` fires after them),
        and each ``at`` fault holds the worker at its crash point while its event is delivered.

        Raises:
            EngineCrashed: a worker exited non-zero without being killed by the harness.
            WorkerTimeout: a worker did not exit within ``worker_timeout_s``.
            Exception: whatever the adapter raises (the caller names it in the verdict).
        """
        began = time.perf_counter()
        run_dir.mkdir(parents=True, exist_ok=False)
        ctx = self._context(run_dir)
        workflow_id = f"wf-{case.case_id}"
        out = RunOutcome(case.case_id, crash_point, workflow_id, run_dir)
        injected = fault_kinds.injection(case.faults)
        kills, holds = injected.kills, {point: list(evs) for point, evs in injected.holds.items()}
        spec = crashpoints.parse(crash_point)
        for point in spec.alongside:  # "P || worker": a second worker while this one is held at P
            holds.setdefault(point, []).append(dict(WORKER_EVENT))
        targets = crashpoints.THEN.join(kills + list(spec.kills)) or None
        start = self._start_from(case, crash_point, golden)
        if start is not None:
            start.restore(run_dir, out)
            out.started_from = start.work
        ledger = Ledger(run_dir / LEDGER_FILE, synchronous="OFF")  # the harness's side: no fsync needed
        try:
            self._open_client(ctx)
            clock = VirtualClock(ledger)
            external = [ev for ev in case.events if ev["type"] not in TOOL_EVENTS]
            starts = external.pop(0)["deliveries"] if external and external[0]["type"] == "start" else 1
            if start is None:
                self._set_up(case, ctx, out, ledger, clock, external, starts)
            held = _Holds(self, ctx, out, ledger, clock, holds, len(case.events), case.workflow,
                          max(injected.together, spec.together))
            # worker segments: the first after the start request, then one after each event
            segments = [None] + [(index, ev) for index, ev in enumerate(external) if not ev.get("before_wait")]
            record = self.snapshots and crash_point is None and not case.faults and \
                getattr(self.adapter, "deterministic_runs", False)
            for work, step in enumerate(segments):
                if start is not None and work < start.work:
                    continue
                if step is not None and (start is None or work > start.work):
                    index, ev = step
                    logged = len(out.deliveries_log)
                    self._deliver(ctx, out, ledger, clock, ev, index, workflow=case.workflow)
                    if len(out.deliveries_log) == logged:  # it delivered nothing (restart, say): still a step
                        out.deliveries_log.append({"step": index + 1, "kind": ev["type"], "event": dict(ev)})
                if record:
                    out.snapshots.append(Snapshot.take(run_dir, out, work))
                self._work(ctx, out, targets, held)
            self._close_client(ctx)  # the verdict is read as a new client reads it: from the files
            status = self.adapter.status(ctx, workflow_id)
            out.status, out.stop_reason = status["status"], status.get("stop_reason")
            out.pending_approval = status.get("pending_approval")
            out.version = status.get("version") if isinstance(status.get("version"), int) else None
            out.trace = self.adapter.trace(ctx, workflow_id)
            out.calls = [asdict(c) for c in ledger.calls()]
            out.decisions = ledger.decisions()
            out.sequence = [(kind, asdict(item) if kind == "call" else item) for kind, item in ledger.sequence()]
            out.notes += [f"tool script never used: {s['tool']} {s['outcome']}" for s in ledger.unconsumed_script()]
            out.clock_now = clock.now()
        finally:
            self._close_client(ctx)
            ledger.close()
            strays = forkserver.reap_strays()
            if strays:
                out.notes.append(f"harness-side adapter or engine code left {len(strays)} process(es) running, "
                                 "killed: " + "; ".join(strays))
            out.crash_points = crashpoints.witness_passed(run_dir) or []
            if Counter(crashpoints.passed(run_dir)) != Counter(out.crash_points):  # workers at once interleave
                out.kill_problems.append(
                    f"the run folder's {crashpoints.LOG_FILE} ({len(crashpoints.passed(run_dir))} lines) differs from "
                    f"the harness's record ({len(out.crash_points)} lines): the engine changed it")
            fired = [k["crash_point"] for k in out.kill_log]
            paused = crashpoints.paused_points(run_dir)
            out.crash_fired = bool(crash_point) and kills_judge.landed(out.kill_log, targets) and \
                not out.kill_problems and all(point in paused for point in spec.alongside)
            out.faults_missed = injected.missed(fired, paused)
            out.wall_s = time.perf_counter() - began
        if out.snapshots:
            self._check_repeatable(case, run_dir, out)
        return out

    def _check_repeatable(self, case: Case, run_dir: Path, golden: RunOutcome) -> None:
        """Run the golden run a second time (without snapshots); if it differs (an engine that mints
        random keys, reads the wall clock...), drop the snapshots: a crash run could not reach the same
        state again, so its prefix must be replayed rather than taken from the golden run."""
        twin = copy.copy(self)
        twin.snapshots = False
        again = twin.run(case, run_dir.with_name(run_dir.name + "-twin"))
        if _fingerprint(again) != _fingerprint(golden):
            golden.snapshots = []
            golden.notes.append("a second fault-free run differed from this one: crash runs replay from the "
                                "start request instead of starting from a snapshot")

    def cycle(self, case: Case, golden: RunOutcome, crash_point: str, run_dir: Path) -> RunOutcome:
        """One crash/resume cycle and nothing else: from the golden snapshot of the segment that reaches
        ``crash_point``, a worker runs until it is killed there, then new workers resume until the
        workflow is quiescent (finished, or waiting for an event the case would send next).

        No event is delivered and no verdict is made: this is the unit ``benchmarks/scale.py`` counts.
        Returns the outcome's counters (``workers``, ``kills``, ``crash_fired``, ``crash_points``).

        Raises:
            ValueError: no golden snapshot precedes ``crash_point`` (the case has faults of its own, the
                adapter is not ``deterministic_runs``, or the golden run kept no snapshots).
        """
        start = snapshot_for(self.adapter, case, crash_point, golden)
        if start is None:
            raise ValueError(f"no golden snapshot precedes {crash_point!r} in case {case.case_id}")
        run_dir.mkdir(parents=True, exist_ok=False)
        ctx = self._context(run_dir)
        out = RunOutcome(case.case_id, crash_point, golden.workflow_id, run_dir)
        start.restore(run_dir, out)
        ledger = Ledger(run_dir / LEDGER_FILE, synchronous="OFF")
        try:
            held = _Holds(self, ctx, out, ledger, VirtualClock(ledger), {}, len(case.events), case.workflow)
            self._work(ctx, out, crash_point, held)
        finally:
            ledger.close()
            out.crash_points = crashpoints.passed(run_dir)
            out.crash_fired = crashpoints.fired(run_dir, crash_point)
        return out

    def _set_up(self, case: Case, ctx: RunContext, out: RunOutcome, ledger: Ledger, clock: VirtualClock,
                external: list[dict[str, Any]], starts: int) -> None:
        """Script the tools, deploy the workflow, deliver the start request (``starts`` times) and the
        decisions that arrive before the workflow waits for them."""
        for entry in tool_script(case.events, fault_kinds.injection(case.faults).tool_faults):
            if entry["type"] in TOOL_EVENTS:
                script_event(ledger, entry)
            else:  # a call scripted by another fault kind: the kind queues it
                fault_kinds.get(entry["type"]).script(ledger, entry)
        self.adapter.prepare(ctx, {case.workflow: self.pack.workflows[case.workflow]})
        workflow_id = out.workflow_id
        workflow_input = case.input or self.pack.workflow_input(case.workflow, zlib.crc32(case.case_id.encode()))
        record = {"step": 0, "kind": "start", "workflow_id": workflow_id, "workflow": case.workflow,
                  "input": workflow_input, "initial_step": case.initial_step, "idempotency_key": f"start:{workflow_id}"}
        for n in range(starts):
            accepted = send(self.adapter, ctx, ledger, clock, workflow_id, record)
            self._count_delivery(out, n, accepted)
            out.deliveries_log.append({**record, "accepted": accepted})
        for index, ev in enumerate(external):  # decisions that arrive before the workflow waits for them
            if ev.get("before_wait"):
                self._deliver(ctx, out, ledger, clock, ev, index, workflow=case.workflow)

    def _context(self, run_dir: Path) -> RunContext:
        """The run's context; when the pack brings its own tools, ``RUN_DIR/world.json`` names them
        for every worker (:func:`crashpoint.fakes.world.build` reads it)."""
        if self.pack.tools_file is not None:
            write_world(run_dir, self.pack.tools_file)
        return RunContext(run_dir=run_dir)

    def _start_from(self, case: Case, crash_point: str | None, golden: RunOutcome | None) -> "Snapshot | None":
        """The snapshot a crash run at ``crash_point`` starts from in this driver's mode, or ``None``."""
        return snapshot_for(self.adapter, case, crash_point, golden) if self.snapshots else None

    @staticmethod
    def _count_delivery(out: RunOutcome, n: int, accepted: bool) -> None:
        if n > 0:
            out.deliveries["duplicates_sent"] += 1
            out.deliveries["duplicates_recognised"] += int(not accepted)

    def gate_approval_id(self, workflow: str) -> str:
        """The approval id the workflow ``workflow`` of the pack first waits for (its first ``human_gate``).

        Raises:
            ValueError: the workflow has no human gate (the loader refuses ``before_wait`` then).
        """
        gate = first_gate(self.pack.workflows[workflow])
        if gate is None:
            raise ValueError(f"workflow {workflow!r} has no human_gate")
        return gate["approval_id"]

    def _decision_target(self, ctx: RunContext, out: RunOutcome, ev: dict[str, Any], index: int,
                         workflow: str | None) -> str:
        """The approval id a human decision goes to: the pending approval's; for ``before_wait``, the
        workflow's first gate (nothing waits yet); else the case's own label, with a note."""
        if ev.get("before_wait"):
            return self.gate_approval_id(workflow or self.pack.default_workflow or "")
        pending = self.adapter.status(ctx, out.workflow_id).get("pending_approval")
        if not pending:
            out.notes.append(f"event {index} {ev['type']}: no approval was pending when it arrived")
        return pending["approval_id"] if pending else ev["approval_id"]

    def _deliver(self, ctx: RunContext, out: RunOutcome, ledger: Ledger, clock: VirtualClock,
                 ev: dict[str, Any], index: int, *, workflow: str | None = None) -> None:
        """Turn the case's external event ``ev`` (its ``index``-th) into delivery records, send each with
        :func:`~crashpoint.harness.run.delivery.send` (``deliveries`` times where the event repeats) and log
        them in ``out.deliveries_log`` (the records a trace keeps and a replay sends again).

        Raises:
            ValueError: an unknown event type (the loader refuses them; this guards programmatic callers).
        """
        kind, wid = ev["type"], out.workflow_id
        step = index + 1
        if kind in ("approval_granted", "approval_denied"):
            # an early decision goes out with the start request, before the first worker: step 0
            record = {"step": 0 if ev.get("before_wait") else step, "kind": "approval",
                      "approval_id": self._decision_target(ctx, out, ev, index, workflow),
                      "granted": kind == "approval_granted", "by": ev.get("by", "case-human"),
                      "idempotency_key": f"{kind}:{ev['approval_id']}:{index}"}
            self._send_times(ctx, out, ledger, clock, record, ev.get("deliveries", 1))
        elif kind == "approval_timeout":
            pending = send(self.adapter, ctx, ledger, clock, wid, {"kind": "approval_timeout"})
            if pending:
                out.deliveries_log.append({"step": step, "kind": "approval_timeout",
                                           "approval_id": pending["approval_id"], "clock_to": clock.now()})
            else:
                out.notes.append(f"event {index} approval_timeout: no approval was pending")
        elif kind == "cancel":
            record = {"step": step, "kind": "cancel", "reason": ev.get("reason", "cancelled by the case"),
                      "idempotency_key": f"cancel:{index}"}
            self._send_times(ctx, out, ledger, clock, record, ev.get("deliveries", 1))
        elif kind == "advance_clock":
            record = {"step": step, "kind": "advance_clock", "seconds": float(ev["seconds"])}
            send(self.adapter, ctx, ledger, clock, wid, record)
            out.deliveries_log.append({**record, "clock_to": clock.now()})
        elif kind == "deploy":
            data = redeployed(self.pack.workflows[workflow or self.pack.default_workflow or ""], ev["version"],
                              ev.get("rename_tasks"))
            record = {"step": step, "kind": "deploy", "version": data["version"], "definition": data}
            send(self.adapter, ctx, ledger, clock, wid, record)
            out.deliveries_log.append(record)
        elif kind == "restart":
            pass  # the next worker is a new process on the same files, like every worker
        elif kind == "redeliver":
            self._redeliver(ctx, out, ledger, clock, ev, index)
        elif kind == "worker":  # a second live worker while this one is held (the ``zombie`` fault kind)
            self._alongside(ctx, out, 1)
            out.deliveries_log.append({"step": out.deliveries_log[-1]["step"] if out.deliveries_log else 0,
                                       "kind": "worker", "workers": 1})
        else:  # the loader rejects unknown types; this guards programmatic callers
            raise ValueError(f"event {index}: unknown event type {kind!r}")

    def _send_times(self, ctx: RunContext, out: RunOutcome, ledger: Ledger, clock: VirtualClock,
                    record: dict[str, Any], times: int) -> None:
        """Send ``record`` ``times`` times (the human's decision is recorded once), each one logged."""
        for n in range(times):
            accepted = send(self.adapter, ctx, ledger, clock, out.workflow_id, record, first=n == 0)
            self._count_delivery(out, n, accepted)
            out.deliveries_log.append({**record, "accepted": accepted})

    def _redeliver(self, ctx: RunContext, out: RunOutcome, ledger: Ledger, clock: VirtualClock,
                   ev: dict[str, Any], index: int) -> None:
        """Deliver again what delivery step ``ev["of"]`` delivered (0: the start request; N: the N-th external
        event's start, approval or cancel), with the same idempotency key and payload, ``deliveries`` times:
        a duplicate that is not back to back. Nothing is recorded as a new human decision."""
        of = int(ev["of"])
        kinds = ("start",) if of == 0 else ("approval", "cancel")
        first: dict[str, dict[str, Any]] = {}
        for d in out.deliveries_log:
            if d.get("step") == of and d.get("kind") in kinds and "redelivery_of" not in d:
                first.setdefault(d["idempotency_key"], d)
        if not first:
            out.notes.append(f"event {index} redeliver: delivery step {of} delivered no start, approval or cancel "
                             "(yet), so nothing was delivered again")
            return
        for d in first.values():
            for _ in range(ev.get("deliveries", 1)):
                accepted = send(self.adapter, ctx, ledger, clock, out.workflow_id, d, first=False)
                self._count_delivery(out, 1, accepted)
                out.deliveries_log.append({**d, "step": index + 1, "accepted": accepted, "redelivery_of": of})

    def _start_alongside(self, ctx: RunContext, out: RunOutcome, n: int,
                         held: Sequence[str] = ()) -> list[tuple[Future, Path]]:
        """Start ``n`` more worker processes (no kills; held at the points ``held``, as the driver's own
        worker: whichever of them gets to a hold first is held there) on other threads, each forked from
        that thread's own zygote (a zygote runs one worker at a time), or as new interpreters."""
        started = []
        for _ in range(n):
            argv, env, log = worker_argv(self.adapter, ctx, out, None, held)
            started.append((_alongside_pool().submit(self._launch_alongside, argv, env, log), log))
        return started

    def _wait_alongside(self, out: RunOutcome, started: list[tuple[Future, Path]],
                        poll: Callable[[], None] | None = None) -> None:
        """Wait for the workers of :meth:`_start_alongside`, calling ``poll`` meanwhile.

        Raises:
            EngineCrashed: one exited non-zero (nothing of the harness kills them).
            WorkerTimeout: one ran past ``worker_timeout_s``.
        """
        while poll is not None and not all(f.done() for f, _ in started):
            poll()
            time.sleep(0.002)
        for future, log in started:
            rc, leftovers = future.result()
            if leftovers:
                out.notes.append(f"a worker alongside left {len(leftovers)} process(es) running, killed: "
                                 + "; ".join(leftovers))
            if rc != 0:
                tail = log.read_text(errors="replace").strip().splitlines()[-6:] if log.exists() else []
                raise EngineCrashed(f"a worker started alongside another exited with {rc}: " + " | ".join(tail))

    def _alongside(self, ctx: RunContext, out: RunOutcome, n: int) -> None:
        """Run ``n`` more worker processes at once to their end (while this thread's worker is held)."""
        self._wait_alongside(out, self._start_alongside(ctx, out, n))

    def _launch_alongside(self, argv: list[str], env: dict[str, str], log: Path) -> tuple[int, list[str]]:
        """A worker alongside another: forked as in ``kill`` mode (never simulated), or a new interpreter."""
        mode = "kill-cold" if self.crash_mode == "kill-cold" else "kill"
        return launcher(mode, self.adapter, self.worker_timeout_s).launch(argv, env, log, None)

    def _work(self, ctx: RunContext, out: RunOutcome, crash_point: str | None, held: "_Holds") -> None:
        """Run worker processes until one exits cleanly; restart after the harness's SIGKILL.

        At most :data:`MAX_WORKERS_PER_RUN` workers per call (one event), so a crash loop ends.
        The harness's kept client connection is closed while workers run: the engine's files then
        behave as they would with no harness around (a worker's close is the last one, and checkpoints).
        """
        self._close_client(ctx)
        try:
            run_segment(self.adapter, ctx, self.launcher, out, crash_point, held=list(held.events), poll=held.poll,
                        ledger=held.ledger, together=held.together,
                        alongside=lambda n: functools.partial(self._wait_alongside, out,
                                                              self._start_alongside(ctx, out, n, list(held.events)),
                                                              held.poll))
        finally:
            self._open_client(ctx)

    def _open_client(self, ctx: RunContext) -> None:
        if hasattr(self.adapter, "open_run") and hasattr(self.adapter, "close_run"):
            self.adapter.open_run(ctx)

    def _close_client(self, ctx: RunContext) -> None:
        if hasattr(self.adapter, "open_run") and hasattr(self.adapter, "close_run"):
            self.adapter.close_run(ctx)


def tool_script(events: list[dict[str, Any]], faults: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """The tool events of a case in script order, with its faults on tool calls (``{kind, tool, call,
    times?, ...}``; see :data:`~crashpoint.harness.faults.kinds.Injection.tool_faults`) placed at their
    call: the ``call``-th call of ``tool`` gets the fault's script entry (its kind's ``script_entry``),
    the calls before it follow the case's own script (or succeed). Each entry comes back with ``times: 1``
    (the placement is :func:`crashpoint.harness.faults.kinds.tool.placed`, a target's too)."""
    faults = [fault_kinds.normalize(f) for f in faults]
    return [entry if index is None else {**fault_kinds.get(entry["kind"]).script_entry(entry), "times": 1}
            for entry, index in placed(faults, events)]


class _Holds:
    """Delivers the events of a case's ``at`` faults while a worker is held at their crash point."""

    def __init__(self, driver: Driver, ctx: RunContext, out: RunOutcome, ledger: Ledger, clock: VirtualClock,
                 events: dict[str, list[dict[str, Any]]], first_index: int, workflow: str, together: int = 1) -> None:
        self.driver, self.ctx, self.out, self.ledger, self.clock = driver, ctx, out, ledger, clock
        self.events, self.index, self.workflow = events, first_index, workflow
        self.together = together  # workers (count) that recover at once after a kill
        self.handled = 0

    def poll(self) -> None:
        """Deliver the events of every new hold, then release the worker."""
        held = crashpoints.paused_points(self.ctx.run_dir)
        while self.handled < len(held):
            point = held[self.handled]
            for ev in self.events.get(point, ()):
                logged = len(self.out.deliveries_log)
                self.driver._deliver(self.ctx, self.out, self.ledger, self.clock, ev, self.index,
                                     workflow=self.workflow)
                for entry in self.out.deliveries_log[logged:]:
                    entry["held_at"] = point
                self.index += 1
            crashpoints.release(self.ctx.run_dir, self.handled)
            self.handled += 1


#: Threads that start workers alongside the driver's own (each keeps its own zygote), at the most.
ALONGSIDE_THREADS = 3
_ALONGSIDE: ThreadPoolExecutor | None = None


def _alongside_pool() -> ThreadPoolExecutor:
    """The threads that run workers alongside another (made on first use, kept for the process's life)."""
    global _ALONGSIDE
    if _ALONGSIDE is None:
        _ALONGSIDE = ThreadPoolExecutor(max_workers=ALONGSIDE_THREADS, thread_name_prefix="crashpoint-alongside")
    return _ALONGSIDE


def snapshot_for(adapter: EngineAdapter, case: Case, crash_point: str | None,
                 golden: RunOutcome | None) -> "Snapshot | None":
    """The golden run's snapshot a crash run at ``crash_point`` may start from, or ``None`` (run it all).

    Only for a case without faults of its own, on an adapter that declares its runs deterministic
    (``deterministic_runs``): the latest segment that starts before the spec's first point (a run up to
    its first kill or hold is the golden run's; ``"A >> B"``, ``"A >> 3 workers"`` and ``"P || worker"``
    start from the snapshot before ``A`` or ``P``).
    """
    first = crashpoints.parse(crash_point).first
    if not (golden is not None and golden.snapshots and first and not case.faults
            and getattr(adapter, "deterministic_runs", False) and first in golden.crash_points):
        return None
    at = golden.crash_points.index(first)
    usable = [snap for snap in golden.snapshots if snap.log_length <= at]
    return usable[-1] if usable else None


def _fingerprint(out: RunOutcome) -> tuple[Any, ...]:
    """What two runs of one case must share to be the same run: trace, tool calls, crash points."""
    return (out.status, out.stop_reason, out.crash_points,
            [(e.get("kind"), e.get("task"), e.get("at"), e.get("idempotency_key"), e.get("name")) for e in out.trace],
            [(c["tool"], c["idempotency_key"], c["args"], c["outcome"], c["at"]) for c in out.calls])


#: Files of a run folder a snapshot leaves out: SQLite's shared-memory index (rebuilt from the WAL
#: on the next open) and worker logs.
_NOT_DURABLE = re.compile(r".*-shm$|worker-\d+\.log$")


@dataclass
class Snapshot:
    """The durable state of a golden run just before one of its worker segments starts.

    A worker segment is the worker processes started after the start request (segment 0) or after
    the N-th external event (segment N). Between segments no process writes the run's files, so their
    bytes are exactly what a new process would find; a crash run whose crash point lies in segment N
    starts from them (a deterministic engine reaches the same state again by the same inputs), and
    only segment N's own worker is run up to the crash point and killed. The harness's own bookkeeping
    (deliveries so far, workers counted) is restored with the files.

    Attributes:
        work: the segment number. ``log_length``: crash points the run had passed before it.
        files: run-folder-relative path -> zlib-compressed bytes (a snapshot travels with the golden
            outcome to pool processes and Dask workers). ``progress``: the outcome fields so far.
        witness: the probe's witness files (:func:`~crashpoint.harness.process.crashpoints.witness_dir`), the same way.
    """

    work: int
    log_length: int
    files: dict[str, bytes]
    progress: dict[str, Any]
    witness: dict[str, bytes] = field(default_factory=dict)

    @classmethod
    def take(cls, run_dir: Path, out: RunOutcome, work: int) -> "Snapshot":
        """Read the run folder's durable files and the outcome so far.

        The files are copied by a ``cp`` process first and read from the copy: opening and closing a
        database file in this process would drop the POSIX locks this process's own SQLite connections
        hold on it (fcntl locks belong to the process, not to the descriptor), and a worker closing
        its connection would then believe itself the last one and delete the WAL under them.
        """
        copy_dir = run_dir.with_name(run_dir.name + ".snapshot")
        try:
            subprocess.run(["cp", "-R", f"{run_dir}/.", str(copy_dir)], check=True, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            files = {str(p.relative_to(copy_dir)): zlib.compress(p.read_bytes(), 1)
                     for p in sorted(copy_dir.rglob("*")) if p.is_file() and not _NOT_DURABLE.match(p.name)}
        finally:
            shutil.rmtree(copy_dir, ignore_errors=True)
        progress = copy.deepcopy({"deliveries": out.deliveries, "deliveries_log": out.deliveries_log,
                                  "notes": out.notes, "workers": out.workers, "kills": out.kills,
                                  "kill_log": out.kill_log, "kill_problems": out.kill_problems})
        witness = crashpoints.witness_dir(run_dir)
        kept = {p.name: zlib.compress(p.read_bytes(), 1) for p in sorted(witness.iterdir()) if p.is_file()} \
            if witness.is_dir() else {}
        return cls(work, len(crashpoints.witness_passed(run_dir) or []), files, progress, kept)

    def restore(self, run_dir: Path, out: RunOutcome) -> None:
        """Write the files into the (empty) ``run_dir`` and set the outcome's fields so far."""
        made = {run_dir}
        for name, data in self.files.items():
            path = run_dir / name
            if path.parent not in made:
                path.parent.mkdir(parents=True, exist_ok=True)
                made.add(path.parent)
            path.write_bytes(zlib.decompress(data))
        if self.witness:
            witness = crashpoints.witness_dir(run_dir)
            witness.mkdir(exist_ok=True)
            for name, data in self.witness.items():
                (witness / name).write_bytes(zlib.decompress(data))
        for key, value in copy.deepcopy(self.progress).items():
            setattr(out, key, value)
