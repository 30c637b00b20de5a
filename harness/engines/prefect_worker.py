"""The worker process of a Prefect target: the team's own ``@flow`` and ``@task`` code, run as a deployment's flow
runs against the sweep's Prefect server.

``python -m crashpoint.harness.engines.prefect_worker --run-dir DIR --probe SPEC --probe-arg ARG
--phase start|recover|answer --api-url http://HOST:PORT/api``

The target is read from ``RUN_DIR/target.json``; its entry ``module:flow`` is the team's ``@flow``, an input is the
flow's parameters (by name). The worker plays the process a Prefect team runs its flows in: the runner of a
deployment (``flow.serve()``, or a process worker), executing the deployment's scheduled flow runs in this process.
The flow has one deployment per server (made by the first worker, its id kept in the server's folder:
``--server-folder``), each run's flow runs carry the run's tag, its task results are persisted in
``RUN_DIR/prefect-results`` (``PREFECT_RESULTS_LOCAL_STORAGE_PATH``) and its Prefect home
is ``RUN_DIR/prefect-home``: runs share the server and nothing else. ``prefect.settings`` (``PREFECT_*`` names)
sets the team's own Prefect settings; crashpoint sets ``PREFECT_LOGGING_TO_API_ENABLED=false`` unless it is given
(the run's logs stay in the worker's log).

Crash points, with no user code (methods of Prefect's client, result store and transactions wrapped):

* ``before_start:THREAD`` / ``after_start:THREAD``: the request's flow run created from the deployment
  (``create_flow_run_from_deployment``, with the request's idempotency key: a start delivered twice is one run);
* ``after_flow_state:THREAD@STATE``: a state of the flow run written by the server (``set_flow_run_state``:
  ``Pending``, ``Running``, ``Suspended``, ``Completed``, ``Failed``; the runner's ``Crashed`` and the retry's
  ``Scheduled`` too), once the server accepted it (a proposal it rejects writes nothing: a suspend that has fired
  before is rejected, and the run goes on with the stored answer);
* ``after_input:THREAD@schema``: the input schema of a suspend saved (the run can be answered from then on);
* ``before_answer:THREAD@NODE`` / ``after_answer:THREAD@NODE``: the human's answer (``resume_flow_run`` with
  ``run_input``: the server stores it and reschedules the run in one transaction);
* ``after_result:THREAD@TASK``: a task's result persisted under its cache key (a file in the result storage:
  ``ResultStore.persist_result_record``; inside a ``transaction()``, when the transaction commits);
  ``after_result:THREAD@flow``: the flow's own result;
* ``before_effect:NAME`` / ``after_effect:NAME``: each ``crashpoint.effect`` (called from tasks, a rollback hook
  or the flow's code).

A task run's state changes are not among them: Prefect sends them as events (a background thread), not as writes
the flow waits for; the task's durable record is its persisted result. Cache lookups, results persisted and the
transactions' rollbacks and hooks are recorded (``prefect-tasks.log``, ``prefect-transactions.log``) for the rules
of :mod:`crashpoint.harness.engines.prefect`. A task starting (a cache miss) is a step (``steps.log``): a task outside
a transaction is a step of its own, the tasks of one transaction share its step (Prefect persists them together, at
its commit), and a transaction that rolled back leaves its step number to the next step: it persisted nothing, so a
retried flow run runs it again (Prefect's design: only a committed transaction has a record), which is no lost
place.

Phases (what a Prefect team's runner and its clients do):

* ``start``: create a flow run of the deployment for each input not yet submitted;
* ``recover``: nothing more;
* ``answer``: ``resume_flow_run(id, run_input=VALUE)`` for each answer in ``RUN_DIR/answers.json`` whose flow run
  still waits on it.

Then, in every phase, each request's latest flow run is brought to rest, one at a time, in this process:

* ``Scheduled`` (just created, retried, or a suspended run answered and rescheduled): executed, as a runner executes
  it (``run_flow(flow, flow_run=...)``);
* ``Pending`` or ``Running`` (its process was killed), or ``Suspended`` without its input schema (killed between the
  two writes of the suspend): the runner's report, ``Crashed`` ("Flow run infrastructure exited with non-zero status
  code", proposed as a runner proposes it: the server may refuse), then the recovery of ``prefect.recovery``:
  ``retry`` (default): what ``prefect flow-run retry ID`` does for a deployment's run, ``Scheduled`` (forced), then
  executed; for a run with a fired pause whose answer was never stored, what the UI's Retry does instead
  (``AwaitingRetry``, not forced: the pause fires again; the forced retry fails such a run); ``rerun``: a new flow
  run of the deployment with the same parameters (a team that re-runs the flow);
* ``Crashed``: the same recovery;
* ``Suspended`` with its input schema stored: ``waiting`` (its process ended: a suspend exits the flow's process);
* ``Completed``: ``finished``; ``Failed`` / ``Cancelled``: ``stuck``, quoting Prefect's message.

A flow that pauses in its process (``pause_flow_run``, a blocking pause) is ``unsupported``: crashpoint's workers end
once every flow run waits for a human, and Prefect starts a blocking pause whose process ended again from the top on
its next attempt (its pause asks again: ``HandleResumingPausedFlows``); a flow that waits in crashpoint writes the
wait as ``suspend_flow_run`` (Prefect's pattern for a wait whose process ends). It writes ``RUN_DIR/threads.json``:
thread -> ``{"status": finished|waiting|stuck|running|no_checkpoint|not_submitted, "values", "prefect_state",
"flow_run", "flow_runs", "run_count", "error"?, "waiting": [{"node", "interrupt"}]}`` (``node``: the title of the
suspend's input model, its class name: ``Approval``) and leaves with ``os._exit``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any, Callable
from uuid import UUID

import prefect  # noqa: F401  (imported by the warm zygote: 1.7 to 2.0 CPU seconds a worker does not pay)
import prefect.context
import prefect.flow_engine
import prefect.flow_runs
import prefect.input
import prefect.results
import prefect.states
import prefect.task_engine
import prefect.transactions
from prefect.client.orchestration import get_client
from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterDeploymentId, FlowRunFilterTags
from prefect.exceptions import ObjectNotFound, Pause, PrefectHTTPStatusError

import crashpoint.api as effect_api
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.engines.effects import EffectSession
from crashpoint.harness.engines.prefect import TASKS_FILE, TXNS_FILE
from crashpoint.harness.engines.workerlib import (UNSUPPORTED_RC, append, barrier, exit_after, load_object,
                                                   mark_submitted, open_run, patch_effects, submitted, worker_parser,
                                                   worker_probe, write_threads)

ANSWERS_FILE = "answers.json"
STEPS_FILE = "steps.log"
DEPLOYMENT_FILE = "prefect-deployment.json"
RESULTS_DIR = "prefect-results"
HOME_DIR = "prefect-home"
#: Executions of one request's flow runs one worker makes at most before it reports the request as it is.
MAX_EXECUTIONS = 4
ERROR_CHARS = 2000
#: The runner's message on a flow run whose process died (Prefect's own wording, ``workers/base.py``).
CRASHED_MESSAGE = ("Flow run infrastructure exited with non-zero status code -9 (the flow's process was "
                   "SIGKILLed by crashpoint)")
#: Settings crashpoint gives a worker unless ``prefect.settings`` does.
SETTINGS = {"PREFECT_LOGGING_TO_API_ENABLED": "false"}
#: The node of an effect called from the flow's own code (outside any task or rollback hook).
FLOW_CODE = "flow code"

_probe: Callable[[str], None] = lambda name: None
#: With ``$CRASHPOINT_PREFECT_TIMING`` set: prints a stage of the worker (not a crash point) with its time.
_mark: Callable[[str], None] = lambda name: None
_run_dir = Path(os.devnull)
_threads: dict[str, str] = {}  # flow run id -> the request (thread) it belongs to
_unsupported: list[str] = []


class _Attempt:
    """What the worker knows of the flow-run attempt it executes now (reset at each execution; one at a time, read by
    every thread of the process: the flow's own result is persisted from Prefect's event loop thread)."""

    def __init__(self) -> None:
        self.reset(None, None, 0)

    def reset(self, thread: str | None, flow_run: str | None, attempt: int) -> None:
        self.thread, self.flow_run, self.attempt = thread, flow_run, attempt
        self.calls: dict[str, int] = {}  # task run id -> its call index among its task's calls
        self.per_task: dict[str, int] = {}  # task name -> calls so far
        self.keys: dict[str, str] = {}  # cache key -> task name (looked up in this attempt)
        self.steps: dict[int, int] = {}  # id(transaction) -> its step
        self.txn_ids: dict[int, str] = {}
        self.step = 0
        self.keyless = 0
        self.hook: tuple[str, int | None] | None = None  # (hook name, step) while a rollback hook runs


_now = _Attempt()


def _log(name: str, row: dict[str, Any]) -> None:
    append(_run_dir / name, json.dumps({"pid": os.getpid(), "thread": _now.thread, "flow_run": _now.flow_run,
                                        "attempt": _now.attempt, **row}, sort_keys=True, default=str) + "\n")


def _thread_of(flow_run_id: Any) -> str:
    return _threads.get(str(flow_run_id), str(flow_run_id))


# ------------------------------------------------------------------ where Prefect makes state durable
def _txn_id(txn: Any) -> str:
    """A transaction's name in the facts: its key, or ``transaction N`` (the N-th keyless one of the attempt)."""
    if txn.key:
        return str(txn.key)
    known = _now.txn_ids.get(id(txn))
    if known is None:
        _now.keyless += 1
        known = _now.txn_ids[id(txn)] = f"transaction {_now.keyless}"
    return known


def _step_of(txn: Any) -> int:
    """The step of a task's transaction: its outermost transaction's (the tasks of one transaction persist together,
    at its commit), else a new one."""
    outer = txn
    while outer is not None and outer.get_parent() is not None:
        outer = outer.get_parent()
    key = id(outer)
    if key not in _now.steps:
        _now.step += 1
        _now.steps[key] = _now.step
    return _now.steps[key]


def _state_written(flow_run_id: Any, state: Any, out: Any) -> None:
    """The crash point after a flow run state the server accepted (a rejected or aborted proposal writes nothing: a
    suspend that has fired before, a ``Crashed`` of a final run)."""
    status = getattr(getattr(out, "status", None), "value", "ACCEPT")
    if status == "ACCEPT":
        _probe(f"after_flow_state:{_thread_of(flow_run_id)}@{state.name or state.type.value}")


def install_hooks() -> None:
    """Wrap the Prefect methods behind the crash points and facts (see the module docstring)."""
    _hook_flow_runs()
    _hook_results()
    _hook_transactions()
    _hook_heartbeats()


def _hook_heartbeats() -> None:
    """A flow run's heartbeat thread stops without the flow run waiting for it, as Prefect's async engine does
    (``_send_heartbeats(engine, join_on_exit=False)``). The heartbeats are events (Prefect's crash detection reads
    them; nothing of the run's state), and the thread sleeps in 1 s steps, so the sync engine's join at each flow
    run's end sat out up to a second per execution (benchmarks/RESULTS.md, "2026-12-06: Prefect"). The thread still
    sends its first heartbeat, and none once told to stop. A release without ``_send_heartbeats`` is left as it is."""
    send = getattr(prefect.flow_engine, "_send_heartbeats", None)
    if send is None or getattr(send, "_crashpoint", False):
        return

    @contextlib.contextmanager
    def send_heartbeats(engine: Any, join_on_exit: bool = True) -> Any:
        with send(engine, join_on_exit=False):
            yield

    send_heartbeats._crashpoint = True  # type: ignore[attr-defined]
    prefect.flow_engine._send_heartbeats = send_heartbeats


def _hook_flow_runs() -> None:
    """Flow run states and a suspend's input schema: writes of the server's."""
    from prefect.client.orchestration._flow_runs.client import FlowRunAsyncClient, FlowRunClient

    def refuse_blocking_pause(state: Any) -> None:
        if state.is_paused() and not state.state_details.pause_reschedule:
            print("unsupported: the flow pauses in its process (pause_flow_run, a blocking pause): crashpoint's "
                  "workers end once every flow run waits for a human, and Prefect starts a blocking pause whose "
                  "process ended again from the top on its next attempt (it asks again); write the wait as "
                  "suspend_flow_run(wait_for_input=...), Prefect's pattern for a wait whose process ends", flush=True)
            os._exit(UNSUPPORTED_RC)

    set_state = FlowRunClient.set_flow_run_state

    @functools.wraps(set_state)
    def set_flow_run_state(self: Any, flow_run_id: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_blocking_pause(state)
        out = set_state(self, flow_run_id, state, *args, **kwargs)
        _state_written(flow_run_id, state, out)
        return out

    aset_state = FlowRunAsyncClient.set_flow_run_state

    @functools.wraps(aset_state)
    async def aset_flow_run_state(self: Any, flow_run_id: Any, state: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_blocking_pause(state)
        out = await aset_state(self, flow_run_id, state, *args, **kwargs)
        _state_written(flow_run_id, state, out)
        return out

    create_input = FlowRunClient.create_flow_run_input

    @functools.wraps(create_input)
    def create_flow_run_input(self: Any, flow_run_id: Any, key: str, *args: Any, **kwargs: Any) -> Any:
        out = create_input(self, flow_run_id, key, *args, **kwargs)
        _probe(f"after_input:{_thread_of(flow_run_id)}@{key.rsplit('-', 1)[-1]}")
        return out

    FlowRunClient.set_flow_run_state = set_flow_run_state
    FlowRunAsyncClient.set_flow_run_state = aset_flow_run_state
    FlowRunClient.create_flow_run_input = create_flow_run_input


def _hook_results() -> None:
    """Cache lookups, results persisted (files of the result storage), a task's body starting (a step)."""
    from prefect.context import TaskRunContext
    from prefect.results import ResultStore
    from prefect.task_engine import SyncTaskRunEngine

    exists = ResultStore.exists

    @functools.wraps(exists)
    def store_exists(self: Any, key: str) -> bool:
        hit = exists(self, key)
        ctx = TaskRunContext.get()
        if ctx is not None and _now.thread is not None:
            run_id = str(ctx.task_run.id)
            if run_id not in _now.calls:
                n = _now.per_task.get(ctx.task.name, 0) + 1
                _now.per_task[ctx.task.name] = n
                _now.calls[run_id] = n
            _now.keys[key] = ctx.task.name
            _log(TASKS_FILE, {"event": "lookup", "task": ctx.task.name, "call": _now.calls[run_id], "key": key,
                              "hit": bool(hit)})
        return hit

    persist = ResultStore.persist_result_record

    def _persisted(record: Any) -> None:
        key = Path(str(getattr(record.metadata, "storage_key", "") or "")).name  # the storage's path, then the key
        ctx = TaskRunContext.get()  # a task's result outside a cache lookup's key (a failed task's exception)
        name = _now.keys.get(key) or (ctx.task.name if ctx is not None else "flow")
        if key in _now.keys:  # a result under the cache key a lookup of this attempt computed
            _log(TASKS_FILE, {"event": "persisted", "task": name, "key": key})
        _probe(f"after_result:{_now.thread}@{name}")

    @functools.wraps(persist)
    def persist_result_record(self: Any, result_record: Any, *args: Any, **kwargs: Any) -> Any:
        out = persist(self, result_record, *args, **kwargs)
        _persisted(result_record)
        return out

    apersist = ResultStore.apersist_result_record

    @functools.wraps(apersist)
    async def apersist_result_record(self: Any, result_record: Any, *args: Any, **kwargs: Any) -> Any:
        out = await apersist(self, result_record, *args, **kwargs)
        _persisted(result_record)
        return out

    call_task_fn = SyncTaskRunEngine.call_task_fn

    @functools.wraps(call_task_fn)
    def call_task(self: Any, transaction: Any) -> Any:
        if not transaction.is_committed() and _now.thread is not None:  # a cache miss: the task's body runs
            append(_run_dir / STEPS_FILE, f"{os.getpid()} {_now.thread} {_step_of(transaction)} {self.task.name}\n")
        return call_task_fn(self, transaction)

    ResultStore.exists = store_exists
    ResultStore.persist_result_record = persist_result_record
    ResultStore.apersist_result_record = apersist_result_record
    SyncTaskRunEngine.call_task_fn = call_task


def _hook_transactions() -> None:
    """Transactions' commits, rollbacks and rollback hooks (facts: nothing of a rollback is durable)."""
    from prefect.transactions import Transaction, TransactionState

    commit = Transaction.commit

    @functools.wraps(commit)
    def txn_commit(self: Any) -> Any:
        out = commit(self)
        if out and _now.thread is not None:
            _log(TXNS_FILE, {"event": "committed", "txn": _txn_id(self)})
        return out

    rollback = Transaction.rollback

    @functools.wraps(rollback)
    def txn_rollback(self: Any) -> Any:
        live = self.state not in (TransactionState.ROLLED_BACK, TransactionState.COMMITTED) and _now.thread is not None
        if live:
            _log(TXNS_FILE, {"event": "rollback", "txn": _txn_id(self),
                             "hooks": [getattr(h, "__name__", repr(h)) for h in self.on_rollback_hooks]})
        out = rollback(self)
        if live:
            _log(TXNS_FILE, {"event": "rolled_back" if out else "rollback_failed", "txn": _txn_id(self)})
            if self.get_parent() is None and _now.steps.get(id(self)) == _now.step:
                _now.step -= 1  # a rolled-back transaction persisted nothing: its step was never made durable
        return out

    run_hook = Transaction.run_hook

    @functools.wraps(run_hook)
    def txn_run_hook(self: Any, hook: Any, hook_type: str, *args: Any, **kwargs: Any) -> Any:
        name = getattr(hook, "__name__", repr(hook))
        before = _now.hook
        _now.hook = (name, _now.steps.get(id(_outermost(self))))
        try:
            out = run_hook(self, hook, hook_type, *args, **kwargs)
        except Exception as exc:
            if hook_type == "rollback":
                _log(TXNS_FILE, {"event": "hook", "txn": _txn_id(self), "hook": name, "ok": False,
                                 "error": f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]})
            raise
        finally:
            _now.hook = before
        if hook_type == "rollback":
            _log(TXNS_FILE, {"event": "hook", "txn": _txn_id(self), "hook": name, "ok": True})
        return out

    Transaction.commit = txn_commit
    Transaction.rollback = txn_rollback
    Transaction.run_hook = txn_run_hook


def _outermost(txn: Any) -> Any:
    while txn is not None and txn.get_parent() is not None:
        txn = txn.get_parent()
    return txn


def where_am_i() -> dict[str, Any]:
    """Where an effect call runs: the request, the task (its attempt, its step), a rollback hook (node: the hook's
    name), or the flow's own code (node :data:`FLOW_CODE`); ``{}`` outside a flow run (a thread the team's code
    started: :func:`~crashpoint.harness.engines.effects.follow_threads` places it)."""
    from prefect.context import FlowRunContext, TaskRunContext

    if _now.thread is None:
        return {}
    if _now.hook is not None:
        return {"thread": _now.thread, "node": _now.hook[0], "task": "rollback hook", "step": _now.hook[1]}
    ctx = TaskRunContext.get()
    if ctx is not None:
        from prefect.transactions import get_transaction

        txn = get_transaction()
        return {"thread": _now.thread, "node": ctx.task.name, "task": f"attempt {ctx.task_run.run_count}",
                "step": _now.steps.get(id(_outermost(txn))) if txn is not None else None}
    if FlowRunContext.get() is not None:
        return {"thread": _now.thread, "node": FLOW_CODE, "task": "flow run", "step": None}
    return {}


# ------------------------------------------------------------------ the runner's side
def run_tag(run_dir: Path) -> str:
    """The tag of a run's flow runs: ``crashpoint-DIGEST`` of its folder."""
    return "crashpoint-" + hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]


def deployment(flow: Any, entry: str, run_dir: Path, shared: Path | None) -> UUID:
    """The deployment of the team's flow on this server (no work pool: this process is its runner), made once per
    server and flow: its id is kept in ``shared`` (the server's folder: every run of a sweep uses it), else in the run
    folder. Runs are told apart by their tag (:func:`run_tag`), not by their deployment."""
    name = "crashpoint-" + hashlib.sha256(f"{entry} {flow.name}".encode()).hexdigest()[:16]
    folder = shared / "deployments" if shared is not None else run_dir
    path = folder / (f"{name}.json" if shared is not None else DEPLOYMENT_FILE)
    if path.exists():
        try:
            return UUID(json.loads(path.read_text())["id"])
        except (ValueError, KeyError, OSError):
            pass
    found = flow.to_deployment(name=name).apply()  # an upsert by flow and name: two runs at once get one id
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"id": str(found)}))
    os.replace(tmp, path)
    return found


def request_tag(thread: str) -> str:
    return f"request:{thread}"


def flow_runs(client: Any, dep: UUID, thread: str) -> list[Any]:
    """The request's flow runs of this run (its tag and the request's, on the deployment), oldest first."""
    runs = client.read_flow_runs(flow_run_filter=FlowRunFilter(
        deployment_id=FlowRunFilterDeploymentId(any_=[dep]),
        tags=FlowRunFilterTags(all_=[run_tag(_run_dir), request_tag(thread)])))
    runs = sorted(runs, key=lambda r: r.created)
    for r in runs:
        _threads[str(r.id)] = thread
    return runs


def create_run(client: Any, dep: UUID, run_dir: Path, item: dict[str, Any], attempt: int = 0) -> Any:
    """A flow run of the deployment for request ``item`` (its idempotency key: the run's tag, the request and the
    rerun's number: a start delivered twice creates one flow run)."""
    thread = item["thread"]
    key = f"{run_tag(run_dir)}:{thread}" + (f":rerun-{attempt}" if attempt else "")
    _probe(f"before_start:{thread}")
    fr = client.create_flow_run_from_deployment(dep, parameters=dict(item["input"]), name=thread,
                                                tags=[run_tag(run_dir), request_tag(thread)], idempotency_key=key)
    _threads[str(fr.id)] = thread
    _probe(f"after_start:{thread}")
    return fr


def schema_of(client: Any, fr: Any) -> dict[str, Any] | None:
    """The stored input schema of a suspended run's suspend (``None``: not stored; ``{}``: a suspend with no
    input)."""
    keyset = fr.state.state_details.run_input_keyset if fr.state else None
    if not keyset:
        return {}
    try:
        value = client.read_flow_run_input(fr.id, keyset["schema"])
    except (ObjectNotFound, PrefectHTTPStatusError) as exc:  # 404: "Flow run input not found"
        if isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code != 404:
            raise
        return None
    try:
        return json.loads(value) if isinstance(value, str) else dict(value or {})
    except ValueError:
        return {"title": "input"}


def _node(schema: dict[str, Any]) -> str:
    return str(schema.get("title") or "resume")


def execute(flow: Any, fr: Any, thread: str) -> Any:
    """Execute flow run ``fr`` in this process, as a runner does; returns its state (``None``: it suspended)."""
    from prefect.flow_engine import run_flow

    _now.reset(thread, str(fr.id), int(fr.run_count or 0) + 1)
    try:
        return run_flow(flow=flow, flow_run=fr, parameters=dict(fr.parameters or {}), return_type="state")
    except Pause:
        return None
    finally:
        _now.reset(None, None, 0)


def unanswered_pauses(client: Any, fr: Any) -> list[str]:
    """The pause keys of flow run ``fr`` that fired (``empirical_policy.pause_keys``) with no answer stored under
    them (``suspended-KEY-response`` / ``paused-KEY-response``): a forced retry would take them as fired and go on
    without an answer."""
    missing = []
    for key in sorted(getattr(fr.empirical_policy, "pause_keys", None) or ()):
        for kind in ("suspended", "paused"):
            try:
                client.read_flow_run_input(fr.id, f"{kind}-{key}-response")
                break
            except (ObjectNotFound, PrefectHTTPStatusError) as exc:
                if isinstance(exc, PrefectHTTPStatusError) and exc.response.status_code != 404:
                    raise
        else:
            missing.append(str(key))
    return missing


def recover(client: Any, flow: Any, dep: UUID, run_dir: Path, fr: Any, item: dict[str, Any], mode: str,
            reruns: int) -> None:
    """A flow run whose process is gone: the runner's ``Crashed`` (unless it is final), then ``mode``'s recovery:
    ``retry`` and execution, or ``rerun`` (a new flow run with the same parameters) and its execution.

    A retry is ``prefect flow-run retry ID``'s (``Scheduled``, forced: the run's fired pauses stay fired, so a suspend
    answered before the kill returns its stored answer), except for a run killed between the two writes of its
    suspend (``Suspended``, its input schema never stored): the forced retry of such a run fails it (its suspend
    counts as fired, no answer is stored: ``ValidationError``, measured on 3.9.1), so it is retried as the UI's Retry
    does (``AwaitingRetry``, not forced: Prefect's rules reset the run's pauses when it leaves ``Crashed``, and the
    suspend asks again). Generally: a run with a fired pause whose answer was never stored
    (:func:`unanswered_pauses`) is retried as the UI does; a forced retry would go on without that answer."""
    from prefect.states import AwaitingRetry, Crashed, Scheduled

    thread = item["thread"]
    unanswered = unanswered_pauses(client, fr)
    if not fr.state.is_final():
        client.set_flow_run_state(fr.id, Crashed(message=CRASHED_MESSAGE))
        fr = client.read_flow_run(fr.id)
    if mode == "rerun":
        execute(flow, create_run(client, dep, run_dir, item, reruns + 1), thread)
        return
    if not fr.state.is_crashed():
        return  # the server kept it (completed meanwhile): nothing to retry
    if unanswered:
        client.set_flow_run_state(fr.id, AwaitingRetry(message="Retry from the UI"))
    else:
        client.set_flow_run_state(fr.id, Scheduled(message="Retried via CLI"), force=True)
    execute(flow, client.read_flow_run(fr.id), thread)


def drive(client: Any, flow: Any, dep: UUID, run_dir: Path, item: dict[str, Any], mode: str) -> None:
    """Bring the request's latest flow run to rest (see the module docstring)."""
    thread = item["thread"]
    for _ in range(MAX_EXECUTIONS):
        runs = flow_runs(client, dep, thread)
        if not runs:
            return
        fr, state = runs[-1], runs[-1].state
        if state is None or state.is_completed() or (state.is_final() and not state.is_crashed()):
            return
        if state.is_paused() and schema_of(client, fr) is not None:
            return  # waiting for its answer
        if state.is_scheduled():
            execute(flow, fr, thread)
        else:
            recover(client, flow, dep, run_dir, fr, item, mode, len(runs) - 1)


def answer_all(client: Any, dep: UUID, answers: list[dict[str, Any]]) -> None:
    """Deliver each answer ``{thread, interrupt, resume, node}`` with ``resume_flow_run(id, run_input=resume)`` when the
    flow run its interrupt names still waits on it (else it is printed and left: the report shows what waits)."""
    from prefect.flow_runs import resume_flow_run

    for answer in answers:
        thread, node = answer["thread"], answer["node"]
        run_id = str(answer.get("interrupt") or "").split(":", 1)[0]
        try:
            fr = client.read_flow_run(UUID(run_id))
        except (ValueError, ObjectNotFound):
            print(f"answer {thread}@{node}: no flow run {run_id!r}", flush=True)
            continue
        _threads[str(fr.id)] = thread
        if not (fr.state and fr.state.is_paused()):
            print(f"answer {thread}@{node}: flow run {fr.id} is {fr.state.name if fr.state else None}, not waiting",
                  flush=True)
            continue
        value = answer["resume"]
        _probe(f"before_answer:{thread}@{node}")
        try:
            resume_flow_run(fr.id, run_input=value if isinstance(value, dict) else {"value": value})
        except Exception as exc:  # noqa: BLE001 - Prefect refused it (validation, state): reported, left to the rest
            print(f"answer {thread}@{node} refused: {type(exc).__name__}: {exc}", flush=True)
        _probe(f"after_answer:{thread}@{node}")


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def report(client: Any, dep: UUID, threads: list[str], done: set[str], results: dict[str, Any]) -> dict[str, Any]:
    """``threads.json``'s content, from the server's flow runs of each request."""
    out: dict[str, Any] = {}
    for thread in threads:
        if thread not in done:
            out[thread] = {"status": "not_submitted", "waiting": []}
            continue
        runs = flow_runs(client, dep, thread)
        if not runs:
            out[thread] = {"status": "no_checkpoint", "waiting": []}
            continue
        fr = runs[-1]
        state = fr.state
        entry: dict[str, Any] = {"prefect_state": state.name if state else None, "flow_run": str(fr.id),
                                 "flow_runs": len(runs), "run_count": fr.run_count, "waiting": []}
        if state is not None and state.is_completed():
            value = results.get(str(fr.id), _missing)
            if value is _missing:
                try:
                    value = state.result(raise_on_failure=False)
                except Exception as exc:  # noqa: BLE001 - the result could not be read back: say so
                    value = f"(result not readable: {type(exc).__name__}: {exc})"
            entry |= {"status": "finished", "values": {"result": _jsonable(value)}}
        elif state is not None and state.is_paused() and (schema := schema_of(client, fr)) is not None:
            keyset = state.state_details.run_input_keyset or {}
            node = _node(schema)
            entry |= {"status": "waiting", "values": {"waiting_for": node},
                      "waiting": [{"node": node, "interrupt": f"{fr.id}:{keyset.get('schema', state.name)}",
                                   "value": None}]}
        elif state is not None and state.is_final():
            entry |= {"status": "stuck", "values": {"state": state.type.value},
                      "error": f"Prefect flow run {state.name}: {state.message}"[:ERROR_CHARS]}
        else:
            name = state.name if state else None
            entry |= {"status": "running", "values": {"state": name},
                      "error": f"Prefect flow run {name} once this worker gave up"
                               + (" (suspended, its input schema never stored: it cannot be answered)"
                                  if state is not None and state.is_paused() else "")}
        out[thread] = entry
    return out


_missing = object()


def configure(run_dir: Path, api_url: str, settings: dict[str, Any]) -> None:
    """The run's Prefect settings (its server, home and result storage; the team's ``prefect.settings``), then
    Prefect's settings read again (they were read when the zygote imported prefect)."""
    (run_dir / RESULTS_DIR).mkdir(exist_ok=True)
    (run_dir / HOME_DIR).mkdir(exist_ok=True)
    env = {**SETTINGS, **{str(k): str(v) for k, v in settings.items()},
           "PREFECT_API_URL": api_url, "PREFECT_HOME": str(run_dir / HOME_DIR),
           "PREFECT_RESULTS_LOCAL_STORAGE_PATH": str(run_dir / RESULTS_DIR)}
    os.environ.update(env)
    refresh = getattr(prefect.context, "refresh_global_settings_context", None)
    if refresh is not None:
        refresh()


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    global _probe, _run_dir, _mark
    if os.environ.get("CRASHPOINT_PREFECT_TIMING"):
        t0 = time.monotonic()

        def _mark(name: str) -> None:
            print(f"{time.monotonic() - t0:.3f} cpu {time.process_time():.2f} ({name})", flush=True)
        _mark("main")
    parser = worker_parser("prefect_worker")
    parser.add_argument("--api-url", required=True, help="the Prefect server's API, http://HOST:PORT/api")
    parser.add_argument("--server-folder", default=None,
                        help="a folder of the server's, shared by the runs on it (the deployment's id)")
    args = parser.parse_args(argv)
    run_dir = _run_dir = Path(args.run_dir)
    target = open_run(run_dir, args.phase)
    opts = target.get("prefect") or {}
    if args.durability != "sync":
        print(f"unsupported: durability={args.durability!r}: Prefect writes each flow run state to its server before "
              "the flow goes on, and a task's result when its transaction commits; it has no other mode", flush=True)
        return UNSUPPORTED_RC
    configure(run_dir, args.api_url, opts.get("settings") or {})
    _mark("configured")
    _probe = worker_probe(args.probe, args.probe_arg)
    if os.environ.get("CRASHPOINT_PREFECT_TIMING"):
        inner = _probe

        def _probe(name: str) -> None:
            _mark(name)
            inner(name)
    install_hooks()
    flow = load_object(target["entry"])
    patch_effects(target["effects"], team=target["pythonpath"], run_dir=run_dir)
    effect_api._install(EffectSession(run_dir / LEDGER_FILE, _probe, where_am_i,
                                      lambda thread: None if thread is None else thread == _now.thread or None))
    if args.barrier:
        barrier(run_dir, args.barrier)
    mode = opts.get("recovery", "retry")
    items = {i["thread"]: i for i in target["inputs"]}
    done = set(submitted(run_dir))
    results: dict[str, Any] = {}
    _mark("ready")
    with get_client(sync_client=True) as client:
        dep = deployment(flow, target["entry"], run_dir, Path(args.server_folder) if args.server_folder else None)
        _mark("deployment")
        if args.phase == "answer":
            answer_all(client, dep, json.loads((run_dir / ANSWERS_FILE).read_text()))
        if args.phase == "start":
            for thread, item in items.items():
                if thread in done and thread not in args.resubmit and not args.duplicate:
                    continue
                mark_submitted(run_dir, thread)
                done.add(thread)
                create_run(client, dep, run_dir, item)
        for thread, item in items.items():
            if thread in done:
                drive(client, flow, dep, run_dir, item, mode)
        _mark("at rest")
        out = report(client, dep, list(items), done, results)
    write_threads(run_dir, out)
    _mark("reported")
    return 0


if __name__ == "__main__":
    exit_after(main)
