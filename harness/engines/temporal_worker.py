"""The worker process of a Temporal target: the team's own workflow classes and activities on the run's server.

``python -m crashpoint.harness.engines.temporal_worker --run-dir DIR --probe SPEC --probe-arg ARG
--phase start|recover|answer --address HOST:PORT [--namespace NS] [--version NAME]`` (``NS``: the run's own
namespace on a shared server, ``default`` on a server of the run's own)

The target is read from ``RUN_DIR/target.json``; its ``temporal:`` options name the ``workflows`` (``module:Class``
each; the entry is the one started for each input, an input may name ``workflow:`` another by its Temporal
name), the ``activities`` (``module:function`` or ``module:LIST``), the ``task_queue`` and ``worker`` options
(keyword arguments of ``temporalio.worker.Worker``), and ``versions`` (``NAME: {workflows, activities}``: the
code another deploy runs; ``--version NAME`` makes this worker run it).

Crash points, with no user code:

* activities, through an ``ActivityInboundInterceptor`` (Temporal's public interceptors):
  ``activity:WF@TYPE`` before the activity function runs, ``after_activity:WF@TYPE`` once it returned and
  before the worker reports its completion (``WF`` is the calling workflow's id);
* workflow tasks, through a ``WorkflowRunner`` that wraps the team's (sandboxed or not) runner's instances
  (``WorkflowInstance.activate``, public API: the SDK's interceptors have no timer hook), for activations
  that are not replays: before the workflow code sees a job, ``signal:WF@NAME``, ``update:WF@NAME`` (an
  update's validator and handler run next), ``timer_fired:WF``,
  ``resolved:WF@TYPE`` (an activity's result, i.e. after its completion report reached the server) and
  ``child_done:WF@TYPE``; once the workflow code produced its commands and before the worker reports the
  workflow task's completion, ``task_done:WF`` and, for the commands in it, ``timer_started:WF``,
  ``child_start:WF@TYPE``, ``update_done:WF@NAME`` (the update's handler returned; its result is in the completion);
* the client's calls this worker makes for the outside world: ``before_start:WF`` / ``after_start:WF``,
  ``before_signal:WF@NAME`` / ``after_signal:WF@NAME``, ``before_update:WF@NAME`` / ``after_update:WF@NAME``
  (the human's answer);
* ``before_effect:NAME`` / ``after_effect:NAME``: each ``crashpoint.effect`` (called from activities).

A child workflow has its parent recorded in the run's ledger from the parent's ``start_child_workflow_execution``
command, before the workflow task's completion is reported (so before the server starts the child):
``target.approval_gate`` follows it.

Worker defaults, each overridable in ``temporal.worker``: ``sticky_queue_schedule_to_start_timeout`` 1 s
(Temporal's 10 s is what a workflow task waits on a killed worker's sticky queue), ``graceful_shutdown_timeout``
0, ``build_id`` ``crashpoint-VERSION`` (``crashpoint-base`` before a deploy; the SDK's default hashes the code of
every loaded module, 0.9 s of each worker's start; not set when the team sets ``build_id``,
``use_worker_versioning`` or ``deployment_config``); workflows are started with ``task_timeout``
``temporal.task_timeout_s`` (default 2 s; Temporal's 10 s is what a workflow task taken by a killed worker waits
before it is given to another), and a child workflow started without one gets the same (through a
``WorkflowOutboundInterceptor``). Before its worker starts, a worker resets the sticky task queue of every open
workflow of the run and of their running children (:func:`reset_sticky`: the request a worker makes when it drops
a workflow from its cache), so a task does not wait on a killed worker's sticky queue at all. Activity timeouts
are the team's code.

Time compressed (``temporal.time_scale``, default
:data:`~crashpoint.harness.engines.workerlib.TIME_SCALE`; ``1`` turns it off): each ``StartTimer`` command of a
workflow task is given its first second as written and the rest ``time_scale`` times faster before the completion
reaches the server (:func:`compress_timers`: 3 days fire after 1.26 s), except a deadline a reviewer still has to
answer (a timer started while the workflow awaits a ``wait_condition``, in a thread the driver names with
``--answers-to-come``). ``workflow.now()`` and activity timeouts are not compressed.

Phases (what a Temporal application and its clients do):

* ``start``: ``client.start_workflow(NAME, input, id=THREAD, id_conflict_policy=USE_EXISTING)`` for each input
  not yet submitted (``--resubmit THREAD`` again);
* ``recover``: nothing but running the worker (the server redelivers what the killed worker had taken);
* ``answer``: for each answer in ``RUN_DIR/answers.json`` (``node`` is the name), ``handle.execute_update(NAME,
  VALUE)`` when a registered workflow has an ``@workflow.update`` of that name, else ``handle.signal(NAME, VALUE)``;
  the updates first (:func:`answer_all`).

Then the worker waits until every submitted workflow is at rest, from the server's own view: closed, or
running with no pending activity, child workflow or workflow task and no timer due within ``settle_s``
(``waiting``: each signal or update the target's humans answer is a wait, its id ``WF:NAME:N`` with N the
signals of that name, or the updates of that name accepted, in the history so far), or its latest workflow task **failed** (``stuck``, quoting the failure
Temporal wrote to the history; a nondeterminism error also names ``workflow.patched``). ``settle_s`` (default 30)
is a quiet window, not a deadline: the worker gives up waiting (a workflow still busy is ``running``, which
``target.ends_within_budget`` reports) only after ``settle_s`` seconds with no progress, progress being a new
history event of a submitted workflow or of one of its pending child workflows (followed too, from the
descriptions of their latest runs: a child may continue as new), a workflow task taken or given back, or a child started or closed; an activity attempt Temporal
retries writes no event and is no progress (an activity retried forever is a finding after ``settle_s``). An attempt
started by a worker that is gone (killed) ends at its timeout: the quiet window counts from then. A slow
machine slows every step and stretches the wait; the driver's ``budget_s`` stays the hard limit. It writes
``RUN_DIR/threads.json``: thread -> ``{"status": finished|waiting|stuck|running|no_checkpoint, "values",
"error"?, "waiting"}``, shuts the worker down and leaves with ``os._exit`` (Temporal workers have been seen
to crash at interpreter exit, after their work). With ``$CRASHPOINT_TEMPORAL_TIMING`` set, the worker's log
gets each crash point it passes with the seconds since the worker started (where a slow run spends its time).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

from temporalio import activity, workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import (EventType, PendingActivityState, PendingWorkflowTaskState, TimeoutType,
                                     WorkflowTaskFailedCause)
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest, ResetStickyTaskQueueRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowUpdateFailedError
from temporalio.common import WorkflowIDConflictPolicy
from temporalio.service import RPCError
from temporalio.worker import (ActivityInboundInterceptor, ExecuteActivityInput, Interceptor, StartChildWorkflowInput,
                               UnsandboxedWorkflowRunner, Worker, WorkflowInboundInterceptor, WorkflowInstance,
                               WorkflowInterceptorClassInput, WorkflowOutboundInterceptor, WorkflowRunner)
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

import crashpoint.api as effect_api
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.engines.effects import EffectSession
from crashpoint.harness.engines.temporal import SERVER_START_S
from crashpoint.harness.engines.workerlib import (TIME_SCALE, UNSUPPORTED_RC, append, barrier, compressed_s,
                                                   exit_after, load_object, open_run, patch_effects, submitted,
                                                   to_submit, worker_parser, worker_probe, write_threads)

ANSWERS_FILE = "answers.json"
STEPS_FILE = "steps.log"
TASK_QUEUE = "crashpoint-target"
#: Seconds between two looks at the workflows while waiting for rest when no new history event woke the worker
#: first (each look asks the server for each workflow's description and history: looking every 50 ms was a third
#: of a run's server CPU and of its workers'): :func:`follow` wakes it at each new event.
POLL_S = 0.5
#: Levels of pending child workflows whose progress counts while waiting for rest (children of children...).
CHILD_DEPTH = 4
ERROR_CHARS = 2000
#: Worker options crashpoint sets unless the target's ``temporal.worker`` does (see the module docstring).
WORKER_DEFAULTS = {"sticky_queue_schedule_to_start_timeout": timedelta(seconds=1),
                   "graceful_shutdown_timeout": timedelta(0)}
PATCHED_HINT = ("a code change that does not replay the running workflow's history: keep the old path for "
                "running workflows behind workflow.patched(\"CHANGE-ID\") (then workflow.deprecate_patch once "
                "none runs it)")

#: ``CHILD_ID NAME`` lines: the stable name of each child workflow whose id holds a generated UUID (see :func:`named`).
CHILD_NAMES_FILE = "child-names.log"
#: A UUID inside a workflow id (``workflow.uuid4()``'s, with or without dashes): drawn anew in every run.
_UUID = re.compile(r"[0-9a-fA-F]{8}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{4}-?[0-9a-fA-F]{12}")
_child_names: dict[str, str] = {}
_names_file = Path(os.devnull)

_probe: Callable[[str], None] = lambda name: None
#: The worker's effect session (:func:`main` installs it): child workflows' parents are recorded through it.
_session: EffectSession | None = None
#: With ``$CRASHPOINT_TEMPORAL_TIMING``: prints a stage of the worker (not a crash point) with its time.
_mark: Callable[[str], None] = lambda name: None
_task_timeout = timedelta(seconds=2)
#: ``temporal.time_scale`` (:func:`compress_timers`); ``_answers_to_come``: the threads whose humans still have
#: answers to give (the driver's ``--answers-to-come``), whose deadlines run as written.
_time_scale = 1.0
_answers_to_come: set[str] = set()


# ------------------------------------------------------------------ stable names of generated workflow ids
def named(workflow_id: str) -> str:
    """The name crash points and effect calls give workflow ``workflow_id``: its id, unless the id holds a UUID (a
    child started with ``id=f"notify-{workflow.uuid4()}"``: ``workflow.uuid4()`` is deterministic within one
    workflow run, for replay, but drawn from a seed Temporal picks per run, so each crashpoint run would name the
    child, its crash points and its effects' thread anew, and a crash run would never reach a point its golden
    run passed). Such a child is named by its parent and its start's ordinal among the parent's child starts
    (the ``seq`` of its ``StartChildWorkflowExecution`` command, in code order): the UUID in its id is replaced by
    ``PARENT.childN`` (``notify-refund-1001.child1``), the same in every run. The parent's worker records the name
    (:func:`_name_child`) in ``RUN_DIR/child-names.log`` before its workflow task completes, so before the child
    exists; a later worker of the run reads it from there."""
    if not _UUID.search(workflow_id):
        return workflow_id
    if workflow_id not in _child_names:
        try:
            lines = _names_file.read_text().splitlines()
        except OSError:
            lines = []
        _child_names.update(line.split(" ", 1) for line in lines if " " in line)  # type: ignore[arg-type]
    return _child_names.get(workflow_id, workflow_id)


def _name_child(parent: str, seq: int, child: str) -> None:
    """Record the stable name (:func:`named`) of ``child``, started by workflow ``parent`` with command ``seq``."""
    if not _UUID.search(child) or child in _child_names:
        return
    name = _UUID.sub(f"{named(parent)}.child{seq}", child)
    _child_names[child] = name
    append(_names_file, f"{child} {name}\n")


# ------------------------------------------------------------------ activities: Temporal's public interceptors
class _ActivityProbe(ActivityInboundInterceptor):
    async def execute_activity(self, input: ExecuteActivityInput) -> Any:
        info = activity.info()
        where = f"{named(info.workflow_id)}@{info.activity_type}"
        step = int(info.activity_id) if info.activity_id.isdigit() else None
        append(_steps, f"{os.getpid()} {named(info.workflow_id)} {step} {info.activity_type}\n")
        _probe(f"activity:{where}")
        result = await super().execute_activity(input)
        _probe(f"after_activity:{where}")
        return result


class _ChildTimeouts(WorkflowOutboundInterceptor):
    async def start_child_workflow(self, input: StartChildWorkflowInput) -> Any:
        if input.task_timeout is None:
            input = dataclasses.replace(input, task_timeout=_task_timeout)
        return await super().start_child_workflow(input)


class _WorkflowInbound(WorkflowInboundInterceptor):
    def init(self, outbound: WorkflowOutboundInterceptor) -> None:
        super().init(_ChildTimeouts(outbound))


class Probes(Interceptor):
    """The interceptor crashpoint adds to the team's worker (activities' crash points, child task timeouts)."""

    def intercept_activity(self, next: ActivityInboundInterceptor) -> ActivityInboundInterceptor:
        return _ActivityProbe(next)

    def workflow_interceptor_class(self, input: WorkflowInterceptorClassInput) -> type[WorkflowInboundInterceptor]:
        return _WorkflowInbound


# ------------------------------------------------------------------ workflow tasks: a runner around the team's
_types: dict[tuple[str, int], str] = {}  # (run id, activity seq) -> activity type; ("c" + run id, seq) -> child type
_updates: dict[str, str] = {}  # an update's protocol instance id -> its name


class _ProbedInstance(WorkflowInstance):
    def __init__(self, inner: WorkflowInstance, workflow_id: str) -> None:
        self.inner, self._id = inner, workflow_id

    @property
    def wf(self) -> str:
        """The workflow's name in crash points (:func:`named`)."""
        return named(self._id)

    def activate(self, act: Any) -> Any:
        live = not act.is_replaying
        if live:
            for job in act.jobs:
                kind = job.WhichOneof("variant")
                if kind == "signal_workflow":
                    _probe(f"signal:{self.wf}@{job.signal_workflow.signal_name}")
                elif kind == "do_update":
                    _updates[job.do_update.protocol_instance_id] = job.do_update.name
                    _probe(f"update:{self.wf}@{job.do_update.name}")
                elif kind == "fire_timer":
                    _probe(f"timer_fired:{self.wf}")
                elif kind == "resolve_activity":
                    _probe(f"resolved:{self.wf}@{_types.get((act.run_id, job.resolve_activity.seq), '?')}")
                elif kind == "resolve_child_workflow_execution":
                    seq = job.resolve_child_workflow_execution.seq
                    _probe(f"child_done:{self.wf}@{_types.get(('c' + act.run_id, seq), '?')}")
        completion = self.inner.activate(act)
        commands = completion.successful.commands if completion.HasField("successful") else ()
        if _time_scale > 1 and commands:
            compress_timers(commands, _time_scale,
                            keep=self._id in _answers_to_come and waits_on_condition(self.inner))
        for cmd in commands:
            kind = cmd.WhichOneof("variant")
            if kind == "schedule_activity":
                _types[(act.run_id, cmd.schedule_activity.seq)] = cmd.schedule_activity.activity_type
            elif kind == "start_child_workflow_execution":
                start = cmd.start_child_workflow_execution
                _types[("c" + act.run_id, start.seq)] = start.workflow_type
                _name_child(self._id, start.seq, start.workflow_id)
                # before the server hears of it: the child's effects are gated by this workflow's approvals
                if _session is not None:
                    _session.record_parent(named(start.workflow_id), self.wf)
        if live:
            _probe(f"task_done:{self.wf}" if completion.HasField("successful") else f"task_failed:{self.wf}")
            for cmd in commands:
                kind = cmd.WhichOneof("variant")
                if kind == "start_timer":
                    _probe(f"timer_started:{self.wf}")
                elif kind == "start_child_workflow_execution":
                    _probe(f"child_start:{self.wf}@{cmd.start_child_workflow_execution.workflow_type}")
                elif kind == "update_response" and cmd.update_response.WhichOneof("response") == "completed":
                    _probe(f"update_done:{self.wf}@{_updates.get(cmd.update_response.protocol_instance_id, '?')}")
        return completion

    def get_serialization_context(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_serialization_context(*args, **kwargs)

    def get_info(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_info(*args, **kwargs)

    def get_external_store_context(self, *args: Any, **kwargs: Any) -> Any:
        return self.inner.get_external_store_context(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def compress_timers(commands: Any, scale: float, keep: bool = False) -> int:
    """Time compressed (``temporal.time_scale``): each ``StartTimer`` command among a workflow task's ``commands``
    gets the start-to-fire timeout :func:`~crashpoint.harness.engines.workerlib.compressed_s` of its own (40 s, 10 min
    or 3 days fire within about a second), before the completion reaches the server, so the history holds the timer
    the server fires. Temporal's replay matches a timer command with its history event by type and sequence number,
    never by duration (a history of a 40 ms timer replays against code asking 40 s: ``tests/adapters/
    test_target_temporal_time.py``), so a replay by another worker, of either scale, is deterministic.
    ``workflow.now()`` (the task's start time) and activity timeouts are not touched. ``keep``: leave the timers as
    written (a deadline a reviewer still has to answer, :func:`waits_on_condition`). Returns the timers compressed."""
    done = 0
    for cmd in commands:
        if cmd.WhichOneof("variant") != "start_timer" or keep:
            continue
        timeout = cmd.start_timer.start_to_fire_timeout
        seconds = timeout.ToNanoseconds() / 1e9
        short = compressed_s(seconds, scale)
        if short < seconds:
            timeout.FromNanoseconds(int(short * 1e9))
            done += 1
    return done


def waits_on_condition(instance: Any) -> bool:
    """The workflow of ``instance`` (a runner's instance, sandboxed or not) awaits a ``workflow.wait_condition``
    after its activation: its timer is then a deadline for a signal or an update (a reviewer's answer) rather than a
    sleep. Read from the SDK's instance (``_conditions``); ``True`` when it cannot be read (the timer runs as
    written: the safe side)."""
    inner = getattr(instance, "globals_and_locals", {}).get("__temporal_in_sandbox")
    conditions = getattr(getattr(inner, "instance", instance), "_conditions", None)
    return True if conditions is None else bool(conditions)


class ProbedRunner(WorkflowRunner):
    """The team's workflow runner (Temporal's sandbox by default), its instances' activations probed."""

    def __init__(self, inner: WorkflowRunner) -> None:
        self.inner = inner

    def prepare_workflow(self, defn: Any) -> None:
        self.inner.prepare_workflow(defn)

    def create_instance(self, det: Any) -> WorkflowInstance:
        return _ProbedInstance(self.inner.create_instance(det), det.info.workflow_id)

    def set_worker_level_failure_exception_types(self, types: Any) -> None:
        self.inner.set_worker_level_failure_exception_types(types)


# ------------------------------------------------------------------ the team's code
#: The node of an effect called from workflow code (a signal or update handler, the run method), not an activity:
#: Temporal replays that code on every new worker and records nothing of the call.
WORKFLOW_CODE = "workflow code"


def workflow_code() -> dict[str, Any]:
    """Where an effect called outside an activity runs: in workflow code, the workflow (its id) with node
    :data:`WORKFLOW_CODE` and ``task`` ``workflow TYPE``; ``{}`` elsewhere (a thread the team's code started:
    :func:`~crashpoint.harness.engines.effects.follow_threads` places it)."""
    try:
        info = workflow.info()
    except Exception:  # noqa: BLE001 - not in a workflow's event loop (the SDK raises its own RuntimeError subclass)
        return {}
    return {"thread": named(info.workflow_id), "node": WORKFLOW_CODE, "task": f"workflow {info.workflow_type}",
            "step": None}


def _specs(specs: list[str]) -> list[Any]:
    out: list[Any] = []
    for spec in specs:
        obj = load_object(spec)
        out += list(obj) if isinstance(obj, (list, tuple)) else [obj]
    return out


def workflow_name(cls: Any) -> str:
    """The Temporal name of a ``@workflow.defn`` class (a string is returned as given)."""
    if isinstance(cls, str):
        return cls
    defn = workflow._Definition.from_class(cls)
    if defn is None or defn.name is None:
        raise TypeError(f"{cls!r} is not a named @workflow.defn class")
    return defn.name


def code(opts: dict[str, Any], version: str | None) -> tuple[list[Any], list[Any]]:
    """``(workflow classes, activities)`` of the target's code, or of its deployed ``version``.

    Raises:
        KeyError: no such version.
    """
    spec = {"workflows": opts.get("workflows") or [], "activities": opts.get("activities") or []}
    if version:
        spec |= {k: v for k, v in opts["versions"][version].items() if v}
    return _specs(spec["workflows"]), _specs(spec["activities"])


# ------------------------------------------------------------------ rest: the server's view of each workflow
def _failure_text(failure: Any) -> str:
    parts, seen = [], 0
    while failure is not None and failure.message and seen < 4:
        parts.append(failure.message)
        failure = failure.cause if failure.HasField("cause") else None
        seen += 1
    return ": ".join(parts)


async def look(client: Client, thread: str, signals: list[str], settle_until: float,
               children: list[str] | None = None, ours: set[str] | None = None,
               held: list[float] | None = None) -> tuple[dict[str, Any], bool, tuple[Any, ...]]:
    """``(threads.json entry, at rest, progress)`` of workflow ``thread`` from its description and history
    (``settle_until``: a time.time(); a timer due by then is waited for, a later one is a wait).

    ``progress`` changes whenever the workflow made progress: its history's length and its pending workflow task's
    state, and, while it is busy, the same of each of its pending child workflows (their children too, from
    their descriptions: no child history is fetched). An activity's attempt going up writes no history event
    and changes nothing. The ids of those children are appended to ``children`` (to be followed). An activity
    attempt started by a worker whose identity is not in ``ours`` (a worker killed mid-activity) ends only when
    Temporal times it out: that time (a time.time()) is appended to ``held`` (:func:`_attempt_timeout`).
    """
    handle = client.get_workflow_handle(thread)
    try:
        desc = await handle.describe()
    except RPCError as exc:
        if "not found" in str(exc).lower():
            return {"status": "no_checkpoint", "waiting": []}, True, ()
        raise
    history = (await handle.fetch_history()).events
    status = desc.status
    entry: dict[str, Any] = {"temporal_status": status.name if status else None, "waiting": []}
    if status == WorkflowExecutionStatus.COMPLETED:
        last = history[-1].workflow_execution_completed_event_attributes
        result = await client.data_converter.decode(last.result.payloads) if last.result.payloads else [None]
        entry |= {"status": "finished", "values": {"result": json.loads(json.dumps(result[0], default=repr))}}
        return entry, True, ()
    if status != WorkflowExecutionStatus.RUNNING:
        closing = history[-1]
        which = closing.WhichOneof("attributes")
        failure = getattr(getattr(closing, which), "failure", None) if which else None
        text = _failure_text(failure) if failure is not None else ""
        entry |= {"status": "stuck", "values": {"closed": entry["temporal_status"]},
                  "error": f"Temporal closed the workflow {entry['temporal_status']}: {text}"[:ERROR_CHARS]}
        return entry, True, ()
    failed = None
    task_open = False  # a workflow task scheduled or started and not closed (the history is read after describe)
    timed_out = None  # the latest workflow task that ran past its start-to-close timeout, none completed since
    scheduled: dict[str, Any] = {}  # activity id -> its ActivityTaskScheduled attributes (the timeouts)
    timers: dict[str, float] = {}
    counts = {name: 0 for name in signals}
    for event in history:
        et = event.event_type
        if et in (EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED):
            task_open = True
        elif et == EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
            task_open = False
            if event.workflow_task_timed_out_event_attributes.timeout_type == TimeoutType.TIMEOUT_TYPE_START_TO_CLOSE:
                timed_out = event  # the workflow code ran longer than the task timeout (a sticky queue's is no sign)
        if et == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
            failed, task_open = event, False
        elif et == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            failed, task_open, timed_out = None, False, None
        elif et == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            scheduled[event.activity_task_scheduled_event_attributes.activity_id] = \
                event.activity_task_scheduled_event_attributes
        elif et == EventType.EVENT_TYPE_TIMER_STARTED:
            attrs = event.timer_started_event_attributes
            timers[attrs.timer_id] = event.event_time.ToDatetime().timestamp() + attrs.start_to_fire_timeout.ToTimedelta().total_seconds()
        elif et in (EventType.EVENT_TYPE_TIMER_FIRED, EventType.EVENT_TYPE_TIMER_CANCELED):
            attrs = (event.timer_fired_event_attributes if et == EventType.EVENT_TYPE_TIMER_FIRED
                     else event.timer_canceled_event_attributes)
            timers.pop(attrs.timer_id, None)
        elif et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
            name = event.workflow_execution_signaled_event_attributes.signal_name
            counts[name] = counts.get(name, 0) + 1
        elif et == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED:
            name = event.workflow_execution_update_accepted_event_attributes.accepted_request.input.name
            counts[name] = counts.get(name, 0) + 1
    if failed is not None:
        attrs = failed.workflow_task_failed_event_attributes
        cause = WorkflowTaskFailedCause.Name(attrs.cause)
        text = _failure_text(attrs.failure)
        hint = f" ({PATCHED_HINT})" if "NON_DETERMINISTIC" in cause or "Nondeterminism" in text else ""
        entry |= {"status": "stuck", "values": {"workflow_task_failed": cause},
                  "error": f"Temporal workflow task failed ({cause}, event {failed.event_id}): {text}{hint}"[:ERROR_CHARS]}
        return entry, True, ()
    raw = desc.raw_description
    busy = (bool(raw.pending_activities) or bool(raw.pending_children) or raw.HasField("pending_workflow_task")
            or task_open)
    due = [t for t in timers.values() if t <= settle_until]
    entry |= {"status": "running" if busy or due else "waiting", "values": {"running": True}}
    if busy or due:
        what = ([f"activity {a.activity_type.name} (attempt {a.attempt})" for a in raw.pending_activities]
                + [f"child {c.workflow_id}" for c in raw.pending_children]
                + ([_task_text(raw, timed_out)] if raw.HasField("pending_workflow_task") or task_open else [])
                + [f"{len(due)} timer(s)"] * bool(due))
        entry["error"] = "Temporal still runs " + ", ".join(what) + " once this worker gave up waiting"
        if held is not None and ours is not None:
            held += [t for a in raw.pending_activities if a.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
                     and a.last_worker_identity not in ours and a.activity_id in scheduled
                     and (t := _attempt_timeout(a, scheduled[a.activity_id])) is not None]
        progress = (raw.workflow_execution_info.execution.run_id, len(history), _task_state(raw),
                    await _children_progress(client, raw, children))
        return entry, False, progress
    entry["waiting"] = [{"node": name, "interrupt": f"{thread}:{name}:{counts.get(name, 0)}", "value": None}
                        for name in signals]
    return entry, True, ()


def _attempt_timeout(pending: Any, attrs: Any) -> float | None:
    """When Temporal times out the started attempt ``pending`` (a PendingActivityInfo) of the activity scheduled with
    ``attrs`` (its ActivityTaskScheduled attributes): a time.time(), the earliest of its start-to-close and heartbeat
    timeouts, ``None`` with neither."""
    started = pending.last_started_time.ToDatetime().timestamp()
    due = []
    if attrs.start_to_close_timeout.ToTimedelta().total_seconds() > 0:
        due.append(started + attrs.start_to_close_timeout.ToTimedelta().total_seconds())
    if attrs.heartbeat_timeout.ToTimedelta().total_seconds() > 0:
        beat = pending.last_heartbeat_time.ToDatetime().timestamp() if pending.HasField("last_heartbeat_time") else 0.0
        due.append(max(started, beat) + attrs.heartbeat_timeout.ToTimedelta().total_seconds())
    return min(due) if due else None


def _task_text(raw: Any, timed_out: Any) -> str:
    """``a workflow task (attempt N)`` of a description ``raw``; with ``timed_out`` (a WorkflowTaskTimedOut event,
    start to close, no task completed since) also why it does not end: the workflow code ran past the task timeout
    (Temporal writes the first such timeout, then retries the task without writing more)."""
    attempt = raw.pending_workflow_task.attempt if raw.HasField("pending_workflow_task") else 0
    text = "a workflow task" + (f" (attempt {attempt})" if attempt > 1 else "")
    if timed_out is not None:
        text += (f", which timed out (event {timed_out.event_id}, start to close: the worker took longer than "
                 "temporal.task_timeout_s over it; workflow code that blocks, e.g. in time.sleep, does so)")
    return text


def _task_state(raw: Any) -> int | None:
    """The state of a description's pending workflow task (scheduled, started), None without one."""
    return raw.pending_workflow_task.state if raw.HasField("pending_workflow_task") else None


async def _children_progress(client: Client, raw: Any, children: list[str] | None,
                             depth: int = 0) -> tuple[Any, ...]:
    """``((child id, run id, history length, pending workflow task state, its children's progress), ...)`` of the
    pending children of a workflow description ``raw``, each from the description of its latest run
    (``history_length``; a child that continued as new goes on in a new run, which the parent's pending child entry,
    naming the first run, does not name), down to :data:`CHILD_DEPTH` levels; a child the server no longer describes
    is ``(id, None, None, None, ())``."""
    out = []
    for child in raw.pending_children:
        if children is not None:
            children.append(child.workflow_id)
        try:
            desc = await client.get_workflow_handle(child.workflow_id).describe()
        except RPCError:
            out.append((child.workflow_id, None, None, None, ()))
            continue
        inner = desc.raw_description
        info = inner.workflow_execution_info
        below = await _children_progress(client, inner, children, depth + 1) if depth + 1 < CHILD_DEPTH else ()
        out.append((child.workflow_id, info.execution.run_id, info.history_length, _task_state(inner), below))
    return tuple(out)


async def follow(client: Client, thread: str, changed: asyncio.Event) -> None:
    """Set ``changed`` at each new event of workflow ``thread``'s history, as the server writes it (a long poll:
    ``GetWorkflowExecutionHistory`` with ``wait_new_event``), until it closes or the task is cancelled. A worker
    waiting for rest looks again at once instead of at its next :data:`POLL_S` (every change that can bring a
    workflow to rest writes an event: a workflow task completed or failed, a timer fired, the workflow closed).
    An error ends the follow; the looks go on every :data:`POLL_S`."""
    try:
        async for _ in client.get_workflow_handle(thread).fetch_history_events(wait_new_event=True):
            changed.set()
    except (RPCError, RuntimeError):
        pass
    changed.set()


# ------------------------------------------------------------------ the human's answers
def update_names(workflows: list[Any]) -> set[str]:
    """The names of the ``@workflow.update`` handlers of ``workflows`` (the others' answers are signals)."""
    names: set[str] = set()
    for cls in workflows:
        defn = workflow._Definition.from_class(cls)
        names |= {n for n in (defn.updates if defn else {}) if n}
    return names


async def answer_all(client: Client, answers: list[dict[str, Any]], updates: set[str]) -> None:
    """Deliver each answer ``{thread, node, resume}``: ``handle.execute_update(node, resume)`` when ``node`` is an
    update, else ``handle.signal(node, resume)``. The updates go first, in their order, then the signals: an update
    returns once the workflow handled it, so a signal of the same phase (an approval) comes after it, in every run
    alike. A refusal (the validator's, a workflow the server no longer knows) is printed and left to the rest."""
    for answer in sorted(answers, key=lambda a: a["node"] not in updates):
        where = f"{answer['thread']}@{answer['node']}"
        handle = client.get_workflow_handle(answer["thread"])
        if answer["node"] in updates:
            _probe(f"before_update:{where}")
            try:
                result = await handle.execute_update(answer["node"], answer["resume"])
                print(f"update {where} returned {json.dumps(result, default=repr)}", flush=True)
            except (WorkflowUpdateFailedError, RPCError) as exc:
                print(f"update {where} refused: {exc}: {getattr(exc, 'cause', None)}", flush=True)
            _probe(f"after_update:{where}")
            continue
        _probe(f"before_signal:{where}")
        try:
            await handle.signal(answer["node"], answer["resume"])
        except RPCError as exc:  # the server no longer knows the workflow: reported by the rest below
            print(f"signal {where} refused by the server: {exc}", flush=True)
        _probe(f"after_signal:{where}")


# ------------------------------------------------------------------ one worker pass
async def reset_sticky(client: Client, threads: list[str]) -> list[str]:
    """Send the open workflows among ``threads`` and their running children back to the normal task queue
    (``ResetStickyTaskQueue``, what a worker asks for when it drops a workflow from its cache): a killed
    worker's sticky queue has no poller, and a task put there would wait out
    ``sticky_queue_schedule_to_start_timeout`` before the server gives it to another worker. A workflow whose
    workflow task the killed worker had started is left as it is: the server retries a sticky task that timed out
    as attempt 1 on the normal queue, where a failure of the retry (a nondeterminism error) is written to the
    history; reset first, the timeout counts as an attempt, and later attempts are transient (Temporal writes
    neither them nor their failures). Returns the workflow ids reset (a workflow the server does not know, or
    closed, is skipped)."""
    done: list[str] = []
    todo = list(threads)
    while todo:
        wid = todo.pop(0)
        try:
            desc = await client.get_workflow_handle(wid).describe()
        except RPCError:
            continue
        if desc.status != WorkflowExecutionStatus.RUNNING:
            continue
        raw = desc.raw_description
        todo += [c.workflow_id for c in raw.pending_children]
        if raw.HasField("pending_workflow_task") and \
                raw.pending_workflow_task.state == PendingWorkflowTaskState.PENDING_WORKFLOW_TASK_STATE_STARTED:
            continue  # taken by the killed worker: left sticky, its timeout retries it as attempt 1
        try:
            await client.workflow_service.reset_sticky_task_queue(ResetStickyTaskQueueRequest(
                namespace=client.namespace, execution=WorkflowExecution(workflow_id=wid, run_id=desc.run_id)))
        except RPCError:
            continue
        done.append(wid)
    return done


async def connect(address: str, within_s: float | None = None, namespace: str = "default") -> Client:
    """Connect once the server's frontend is healthy (it listens before it is: "Frontend is not healthy yet") and
    its workflow service answers for ``namespace`` (a server just restarted has accepted a connection and then
    refused a describe with "unknown service temporal.api.workflowservice.v1.WorkflowService": seen at load 30).

    Raises:
        RuntimeError: still unhealthy after ``within_s`` seconds (default :data:`SERVER_START_S`).
    """
    within_s = SERVER_START_S if within_s is None else within_s
    deadline = time.monotonic() + within_s
    client = None
    while True:
        try:
            client = client or await Client.connect(address, namespace=namespace)
            await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=namespace))
            return client
        except (RuntimeError, RPCError) as exc:
            if time.monotonic() > deadline:
                raise RuntimeError(f"temporal server at {address} not healthy within {within_s} s: {exc}") from exc
            await asyncio.sleep(0.05)


async def _pass(args: argparse.Namespace, target: dict[str, Any], run_dir: Path) -> dict[str, Any]:
    opts = target.get("temporal") or {}
    workflows, activities = code(opts, args.version)
    queue = opts.get("task_queue") or TASK_QUEUE
    entry_name = workflow_name(load_object(target["entry"]))
    signals = sorted({n for human in [target.get("human") or {}, *[c.get("human") or {} for c in target["cases"]]]
                      for n in human})
    client = await connect(args.address, namespace=args.namespace)
    _mark("connected")
    options: dict[str, Any] = {**WORKER_DEFAULTS, **(opts.get("worker") or {})}
    for name in ("sticky_queue_schedule_to_start_timeout", "graceful_shutdown_timeout"):
        if isinstance(options.get(name), (int, float)):
            options[name] = timedelta(seconds=options[name])
    if not {"build_id", "deployment_config", "use_worker_versioning"} & set(options):
        options["build_id"] = f"crashpoint-{args.version or 'base'}"  # the SDK's default hashes every loaded module
    executor = ThreadPoolExecutor(max_workers=int(options.pop("max_concurrent_activities", 8)))
    restrictions = SandboxRestrictions.default.with_passthrough_modules("crashpoint")
    worker = Worker(client, task_queue=queue, workflows=workflows, activities=activities, activity_executor=executor,
                    interceptors=[Probes()], workflow_runner=ProbedRunner(SandboxedWorkflowRunner(restrictions=restrictions)),
                    unsandboxed_workflow_runner=ProbedRunner(UnsandboxedWorkflowRunner()), **options)
    done = set(submitted(run_dir))
    threads = [i["thread"] for i in target["inputs"]]
    if done:  # a task put on a gone worker's sticky queue would wait there for sticky_queue_schedule_to_start_timeout
        _mark(f"sticky reset: {' '.join(await reset_sticky(client, sorted(done)))}")
    _mark("worker built")
    async with worker:
        _mark("worker running")
        if args.phase == "start":
            for item in to_submit(run_dir, target, done, args.resubmit, args.duplicate):
                thread = item["thread"]
                _probe(f"before_start:{thread}")
                await client.start_workflow(item.get("workflow") or entry_name, item["input"], id=thread,
                                            task_queue=queue, task_timeout=_task_timeout,
                                            id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING)
                _probe(f"after_start:{thread}")
        elif args.phase == "answer":
            await answer_all(client, json.loads((run_dir / ANSWERS_FILE).read_text()), update_names(workflows))
        settle_s = float(opts.get("settle_s", 30))
        ours = {client.identity, worker.config().get("identity")} - {None}  # this worker's activity attempts
        changed = asyncio.Event()
        followed: dict[str, asyncio.Task[None]] = {}
        last: list[Any] | None = None
        quiet_from = time.monotonic()
        while True:
            changed.clear()  # an event from now on wakes the wait below
            _mark("look")
            out: dict[str, Any] = {}
            rest = True
            horizon = time.time() + settle_s  # a timer firing within settle_s is waited for, a later one is a wait
            progress: list[Any] = []
            children: list[str] = []
            held: list[float] = []  # when Temporal times out an attempt a killed worker had started
            for thread in threads:
                if thread not in done:
                    out[thread] = {"status": "not_submitted", "waiting": []}
                    continue
                out[thread], one, made = await look(client, thread, signals, horizon, children, ours, held)
                rest = rest and one
                progress.append(made)
            if rest:
                break
            if progress != last:  # a new event, a workflow task taken or given back, a child started or closed
                last, quiet_from = progress, time.monotonic()
            if held:  # the attempt of a gone worker ends at its timeout, then Temporal retries it: quiet until then
                quiet_from = max(quiet_from, time.monotonic() + max(held) - time.time())
            elif time.monotonic() - quiet_from > settle_s:
                for entry in out.values():
                    if entry["status"] == "running":
                        entry["error"] += f" ({settle_s:g} s with no new history event of the run's workflows or children)"
                break
            for wid in [t for t in threads if t in done] + children:
                if wid not in followed:
                    followed[wid] = asyncio.create_task(follow(client, wid, changed))
            try:
                await asyncio.wait_for(changed.wait(), POLL_S)
            except asyncio.TimeoutError:
                pass
        followers = list(followed.values())
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
        _mark("at rest")
    _mark("worker shut down")
    return out


_steps = Path(os.devnull)


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    global _probe, _mark, _steps, _task_timeout, _names_file, _session, _time_scale, _answers_to_come
    parser = worker_parser("temporal_worker")
    parser.add_argument("--address", required=True, help="the run's Temporal server, HOST:PORT")
    parser.add_argument("--namespace", default="default", help="the run's namespace on it")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    target = open_run(run_dir, args.phase)
    if args.durability != "sync":
        print(f"unsupported: durability={args.durability!r}: the Temporal server records each event of a workflow's "
              "history before the worker is told of it; it has no other mode", flush=True)
        return UNSUPPORTED_RC
    _probe = worker_probe(args.probe, args.probe_arg)
    _steps, _names_file = run_dir / STEPS_FILE, run_dir / CHILD_NAMES_FILE
    if os.environ.get("CRASHPOINT_TEMPORAL_TIMING"):
        inner, t0 = _probe, time.monotonic()

        def _probe(name: str) -> None:
            print(f"{time.monotonic() - t0:.3f} {name}", flush=True)
            inner(name)

        def _mark(name: str) -> None:
            print(f"{time.monotonic() - t0:.3f} ({name})", flush=True)
        _mark("main")
    _task_timeout = timedelta(seconds=float((target.get("temporal") or {}).get("task_timeout_s", 2)))
    _time_scale = float((target.get("temporal") or {}).get("time_scale", TIME_SCALE))
    _answers_to_come = set(args.answers_to_come)
    patch_effects(target["effects"], team=target["pythonpath"], run_dir=run_dir)

    def where_am_i() -> dict[str, Any]:
        try:
            info = activity.info()
        except RuntimeError:
            return workflow_code()
        return {"thread": named(info.workflow_id), "node": info.activity_type, "task": f"attempt {info.attempt}",
                "step": int(info.activity_id) if info.activity_id.isdigit() else None}

    _session = EffectSession(run_dir / LEDGER_FILE, _probe, where_am_i, lambda thread: None if thread is None else True)
    effect_api._install(_session)
    if args.barrier:
        barrier(run_dir, args.barrier)
    write_threads(run_dir, asyncio.run(_pass(args, target, run_dir)))
    return 0


if __name__ == "__main__":
    exit_after(main)
