"""What every interpreted adapter shares: the run's adapter file, step execution, and the adapter base class.

An adapter for an engine nobody here wrote (DBOS, LangGraph, Temporal) keeps, next to the
engine's own durable files, one SQLite file ``RUN_DIR/adapter.db``:

* ``definitions``: the workflow definitions deployed (data, one row per version);
* ``inbox``: what the outside world sent (start requests, approvals, cancellations, timeouts), each
  under its idempotency key, so a duplicate is recognised. The worker hands messages to the
  engine through the engine's own API (a DBOS message, a LangGraph ``Command(resume=...)``, a
  Temporal signal); the engine's state says which it consumed;
* ``trace``: the trace of each workflow (shape of :mod:`crashpoint.harness.adapters.protocol`), written by
  the engine's steps as they run and, for each :class:`~crashpoint.harness.adapters.interpreter.Commit`,
  only once the engine has made the step durable (deduplicated by the commit's ordinal).

Worker processes run ``python -m <worker module> --run-dir DIR --world SPEC --probe SPEC --probe-arg ARG``.
Nothing here imports an engine.
"""

from __future__ import annotations

import importlib
import json
import sys
import threading
from contextlib import closing
from pathlib import Path
from typing import Any, Callable, Mapping

from crashpoint import __version__, sqlite
from crashpoint.harness.adapters.interpreter import FEATURES, TRACE_KINDS
from crashpoint.harness.adapters.protocol import RunContext

ADAPTER_FILE = "adapter.db"
_SCHEMA = """
CREATE TABLE IF NOT EXISTS definitions (workflow TEXT, version INTEGER, data TEXT, PRIMARY KEY (workflow, version));
CREATE TABLE IF NOT EXISTS inbox (seq INTEGER PRIMARY KEY AUTOINCREMENT, wid TEXT NOT NULL, key TEXT NOT NULL UNIQUE,
                                  kind TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS trace (seq INTEGER PRIMARY KEY AUTOINCREMENT, wid TEXT NOT NULL, data TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS commits (wid TEXT NOT NULL, n INTEGER NOT NULL, PRIMARY KEY (wid, n));
"""


def load_object(spec: str) -> Any:
    """Import ``"package.module:attribute"``.

    Raises:
        ValueError: no ``:`` in ``spec``. ImportError / AttributeError: it names nothing.
    """
    module, sep, attr = spec.partition(":")
    if not sep or not attr:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {spec!r}")
    return getattr(importlib.import_module(module), attr)


class AdapterStore:
    """``RUN_DIR/adapter.db`` (see the module docstring). One connection; autocommit, WAL; every commit
    survives a SIGKILL of the process (the harness's fault model), so no ``fsync`` is needed."""

    def __init__(self, run_dir: str | Path) -> None:
        self.path = Path(run_dir) / ADAPTER_FILE
        self.db = sqlite.connect(self.path, threads=True, what="adapter file")  # WAL + NORMAL: survives SIGKILL
        if not sqlite.has_table(self.db, "commits"):
            sqlite.create(self.db, _SCHEMA)
        self.lock = threading.RLock()  # an engine may commit from a background thread (LangGraph async)

    def close(self) -> None:
        """Close the connection."""
        self.db.close()

    # definitions -----------------------------------------------------------------------------
    def deploy(self, definition: Mapping[str, Any]) -> bool:
        """Store one version of a workflow definition; ``False`` if that version was there already."""
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO definitions VALUES (?, ?, ?)",
                              (definition["workflow"], int(definition.get("version", 1)), json.dumps(definition)))
        return cur.rowcount == 1

    def latest(self, workflow: str) -> dict[str, Any]:
        """The newest deployed definition of ``workflow``.

        Raises:
            KeyError: never deployed.
        """
        row = self.db.execute("SELECT data FROM definitions WHERE workflow=? ORDER BY version DESC LIMIT 1",
                              (workflow,)).fetchone()
        if row is None:
            raise KeyError(f"workflow {workflow!r} was never deployed (adapter.prepare / deploy)")
        return json.loads(row[0])

    # inbox -------------------------------------------------------------------------------------
    def post(self, wid: str, key: str, kind: str, data: Mapping[str, Any]) -> bool:
        """Queue a message; ``False`` when ``key`` was posted before (a duplicate delivery)."""
        with self.lock:
            cur = self.db.execute("INSERT OR IGNORE INTO inbox (wid, key, kind, data) VALUES (?, ?, ?, ?)",
                              (wid, key, kind, json.dumps({**data, "kind": kind, "key": key})))
        return cur.rowcount == 1

    def messages(self, wid: str | None = None, kind: str | None = None) -> list[dict[str, Any]]:
        """Queued messages (``wid`` and ``kind`` filter), oldest first, each with ``wid``."""
        rows = self.db.execute("SELECT wid, data FROM inbox WHERE (? IS NULL OR wid=?) AND (? IS NULL OR kind=?) "
                               "ORDER BY seq", (wid, wid, kind, kind)).fetchall()
        return [{**json.loads(data), "wid": w} for w, data in rows]

    def events_for(self, wid: str) -> list[dict[str, Any]]:
        """The external messages a workflow may receive (approvals, cancellations, timeouts), oldest first."""
        return [m for m in self.messages(wid) if m["kind"] != "start"]

    # trace ---------------------------------------------------------------------------------------
    def append(self, wid: str, events: list[Mapping[str, Any]]) -> None:
        """Append trace events in one transaction."""
        with self.lock, sqlite.transaction(self.db):
            for e in events:
                self.db.execute("INSERT INTO trace (wid, data) VALUES (?, ?)", (wid, json.dumps(dict(e), default=str)))

    def commit(self, wid: str, n: int, events: list[Mapping[str, Any]]) -> bool:
        """Append the events of commit number ``n`` once (``False`` when already written)."""
        with self.lock, sqlite.transaction(self.db):
            if self.db.execute("SELECT 1 FROM commits WHERE wid=? AND n=?", (wid, n)).fetchone():
                return False
            self.db.execute("INSERT INTO commits VALUES (?, ?)", (wid, n))
            for e in events:
                self.db.execute("INSERT INTO trace (wid, data) VALUES (?, ?)", (wid, json.dumps(dict(e), default=str)))
        return True

    def trace(self, wid: str) -> list[dict[str, Any]]:
        """The workflow's trace, oldest first, each event with ``seq``."""
        rows = self.db.execute("SELECT seq, data FROM trace WHERE wid=? ORDER BY seq", (wid,)).fetchall()
        return [{"seq": seq, **json.loads(data)} for seq, data in rows]


def status_from_trace(trace: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The adapter's status view: the last transition's target (``accepted`` before any), the last
    ``workflow_finished`` stop reason, the pending approval while ``waiting_approval``, ``progress``."""
    status, reason, pending = "accepted", None, None
    for e in trace:
        if e["kind"] == "transition":
            status = e["to"]
        elif e["kind"] == "workflow_finished":
            reason = e.get("stop_reason")
        elif e["kind"] == "approval_requested":
            pending = {"approval_id": e["approval_id"], "deadline": e["deadline"]}
    done = sorted({e["task"] for e in trace if e["kind"] == "step_result" and e.get("transition") == "continue"})
    return {"status": status, "stop_reason": reason, "pending_approval": pending if status == "waiting_approval"
            else None, "progress": {"tasks_done": done}}


def consumed_keys(trace: list[Mapping[str, Any]]) -> set[str]:
    """Idempotency keys of the external messages the workflow has acted on (``event_received``)."""
    return {e.get("idempotency_key") for e in trace if e["kind"] == "event_received"}


def awaiting(trace: list[Mapping[str, Any]]) -> bool:
    """``True`` while the workflow waits at a gate and has received nothing there yet (quiescent,
    unless a message is on its way)."""
    asked = max((i for i, e in enumerate(trace) if e["kind"] == "approval_requested"), default=-1)
    got = max((i for i, e in enumerate(trace) if e["kind"] == "event_received"), default=-1)
    return asked > got and status_from_trace(trace)["status"] == "waiting_approval"


def due_timeout(store: AdapterStore, wid: str, now: float) -> dict[str, Any] | None:
    """Post (once) and return a ``timeout`` message when the workflow waits past its approval deadline.

    The worker is the timer service: virtual time moved past ``deadline`` while nothing else was
    delivered. ``None`` when no timeout is due.
    """
    view = status_from_trace(store.trace(wid))
    pending = view["pending_approval"]
    if pending and now > float(pending["deadline"]):
        key = f"timeout:{pending['approval_id']}"
        store.post(wid, key, "timeout", {"approval_id": pending["approval_id"]})
        return next(m for m in store.events_for(wid) if m["key"] == key)
    return None


def unsent(store: AdapterStore, wid: str, sent: set[str]) -> list[dict[str, Any]]:
    """The workflow's external messages whose keys are not in ``sent`` (the worker adds them once delivered)."""
    return [m for m in store.events_for(wid) if m["key"] not in sent]


def quiet(store: AdapterStore, wid: str, sent: set[str], now: float) -> bool:
    """``True`` when an unfinished workflow can make no progress in this worker: it waits at a gate,
    consumed every message delivered (``sent``), and no timeout is due (one that is due is posted)."""
    trace = store.trace(wid)
    if not (awaiting(trace) and sent <= consumed_keys(trace)):
        return False
    timeout = due_timeout(store, wid, now)
    return timeout is None or timeout["key"] in consumed_keys(trace)


class StepRunner:
    """Executes :class:`~crashpoint.harness.adapters.interpreter.Step` requests (as dicts) and commits,
    in a worker process.

    Args:
        store: the run's adapter file.
        world: ``() -> (tools, clock)``, called once per thread (engines run steps on their own threads and
            the world's SQLite connections belong to one thread): ``tools.call(tool, args, idempotency_key)``
            raising ``ToolError``; ``clock.now()`` in seconds.
        probe: the crash probe (``probe(name)``).
    """

    def __init__(self, store: AdapterStore, world: Callable[[], tuple[Any, Any]],
                 probe: Callable[[str], None]) -> None:
        self.store, self.world, self.probe = store, world, probe
        self._local = threading.local()
        self._lock = threading.Lock()
        #: Steps and commits running right now (a worker must not exit in the middle of one).
        self.inflight = 0

    def _enter(self, delta: int) -> None:
        with self._lock:
            self.inflight += delta

    def _world(self) -> tuple[Any, Any]:
        if not hasattr(self._local, "world"):
            self._local.world = self.world()
        return self._local.world

    @property
    def tools(self) -> Any:
        """This thread's tools."""
        return self._world()[0]

    @property
    def clock(self) -> Any:
        """This thread's clock."""
        return self._world()[1]

    def step(self, wid: str, step: Mapping[str, Any]) -> dict[str, Any]:
        """Trace the step's events, pass ``step_started:NAME`` and the step's probe, wait until the call's
        ``not_before`` (virtual seconds), refuse it when the virtual clock is past its ``deadline`` (unless it
        was made before a crash), trace ``tool_call``, call its tool. The answer: ``{"ok", "result" | "error",
        "retryable", "maybe_applied", "skipped_call", "began", "now"}`` (``began``: the virtual time the call
        was made). A tool's ``ToolError`` is an answer, not an exception. The ``tool_result`` event belongs to
        the step's commit (traced once the answer is durable)."""
        self._enter(1)
        try:
            return self._step(wid, step)
        finally:
            self._enter(-1)

    def _step(self, wid: str, step: Mapping[str, Any]) -> dict[str, Any]:
        if step.get("events"):
            self.store.append(wid, step["events"])
        self.probe(f"step_started:{step['name']}")  # the step is announced; its work has not begun
        if step.get("probe"):
            self.probe(step["probe"])
        call = step.get("call")
        if not call:
            now = self.clock.now()
            return {"ok": True, "now": now, "began": now}
        if call.get("not_before") is not None and self.clock.now() < float(call["not_before"]):
            self.clock.sleep(float(call["not_before"]) - self.clock.now())  # a retry's backoff, on the virtual clock
        began = self.clock.now()
        base = {"task": call["task"], "tool": call["tool"], "idempotency_key": call["key"],
                "attempt": call.get("attempt", 1)}
        # a call made before a crash may have had its effect: it is made again with its key (which reconciles
        # it) rather than failed by a deadline that ran out meanwhile (as the reference engine does)
        if call.get("deadline") is not None and began > float(call["deadline"]) and not self._called(wid, base):
            return {"ok": False, "error": call.get("deadline_error") or "deadline exceeded", "retryable": False,
                    "skipped_call": True, "now": began, "began": began}
        self.store.append(wid, [{"kind": "tool_call", **base, "args": call["args"],
                                 "side_effect": call.get("side_effect", True)}])
        try:
            result = self.tools.call(call["tool"], call["args"], call["key"])
        except Exception as exc:  # a ToolError (from the world) is an answer; the class name keeps this engine-free
            if type(exc).__name__ != "ToolError":
                raise
            return {"ok": False, "error": str(exc), "retryable": bool(getattr(exc, "retryable", False)),
                    "maybe_applied": bool(getattr(exc, "maybe_applied", False)), "now": self.clock.now(),
                    "began": began}
        return {"ok": True, "result": result, "now": self.clock.now(), "began": began}

    def _called(self, wid: str, base: Mapping[str, Any]) -> bool:
        """``True`` when the trace has this call's ``tool_call`` already (it was made before a crash)."""
        return any(e["kind"] == "tool_call" and e.get("idempotency_key") == base["idempotency_key"]
                   and e.get("attempt") == base["attempt"] for e in self.store.trace(wid))

    def resumed(self, wid: str, worker: str) -> None:
        """Trace ``workflow_resumed`` (``status``, ``from_checkpoint``, ``worker``, ``version``) when this worker
        picks up a workflow that an earlier worker left neither accepted nor terminal. Call once per workflow
        as the worker starts."""
        trace = self.store.trace(wid)
        status = status_from_trace(trace)["status"]
        if status in ("accepted", "succeeded", "failed", "cancelled", "escalated"):
            return
        last = next((e.get("name") for e in reversed(trace) if e["kind"] == "checkpoint"), None)
        version = next((e.get("version") for e in trace if e["kind"] == "workflow_accepted"), None)
        self.store.append(wid, [{"kind": "workflow_resumed", "status": status, "from_checkpoint": last,
                                 "worker": worker, "version": version}])

    def commit(self, wid: str, n: int, name: str, events: list[Mapping[str, Any]]) -> None:
        """Write commit ``n``'s events once, between ``before_checkpoint:NAME`` and ``after_checkpoint:NAME``.

        An engine may run the commit step again when a worker exited (or was killed) after the commit
        was written but before the engine recorded the step: that repeat writes nothing and passes no
        crash point, so the crash points of a run do not depend on that race."""
        self._enter(1)
        try:
            if self.store.db.execute("SELECT 1 FROM commits WHERE wid=? AND n=?", (wid, n)).fetchone():
                return
            self.probe(f"before_checkpoint:{name}")
            if self.store.commit(wid, n, events):
                self.probe(f"after_checkpoint:{name}")
        finally:
            self._enter(-1)


def open_world(world: str, run_dir: str, probe: Callable[[str], None]) -> tuple[Any, Any]:
    """Build the world with the run's factory (``MODULE:FACTORY(run_dir, probe) -> (tools, clock)``)."""
    return load_object(world)(run_dir, probe)


def open_probe(spec: str | None, arg: str) -> Callable[[str], None]:
    """The crash probe named by ``spec`` (``MODULE:FACTORY(arg)``), or one that does nothing."""
    return load_object(spec)(arg) if spec else (lambda _name: None)


def _duplicate(store: AdapterStore, wid: str, kind: str, key: str) -> bool:
    """Trace a delivery recognised as a duplicate (``event_duplicate``); returns ``False`` (what the
    protocol method answers for it)."""
    store.append(wid, [{"kind": "event_duplicate", "event": kind, "idempotency_key": key}])
    return False


class InterpretedAdapter:
    """Base of the adapters that run the pack's workflow definitions with
    :mod:`crashpoint.harness.adapters.interpreter` on a real engine. A subclass sets ``name``,
    ``worker_module`` (run as ``python -m``), optionally ``worker_args``, and ``version()``.

    Harness-side methods only touch ``adapter.db`` (definitions, inbox, trace); the engine runs in
    the worker processes, which hand the inbox to the engine and record the trace.
    """

    name = "interpreted"
    worker_module = ""
    worker_args: tuple[str, ...] = ()
    #: What the interpreter runs and traces (see :mod:`crashpoint.harness.adapters.support`): a case that
    #: needs more is ``unsupported``, never ``failed``.
    supported_features = FEATURES
    trace_kinds = TRACE_KINDS

    def version(self) -> str:
        """The engine's version (subclasses name the engine's package)."""
        return __version__

    def _store(self, run: RunContext) -> closing[AdapterStore]:
        return closing(AdapterStore(run.run_dir))

    def prepare(self, run: RunContext, workflows: Mapping[str, Mapping[str, Any]]) -> None:
        """Create ``adapter.db`` and store each workflow definition."""
        with self._store(run) as store:
            for data in workflows.values():
                store.deploy(data)

    def deploy(self, run: RunContext, workflow: Mapping[str, Any]) -> bool:
        """Store one more version; runs keep the definition they started with (it is part of their input)."""
        with self._store(run) as store:
            return store.deploy(workflow)

    def start(self, run: RunContext, workflow_id: str, workflow: str, input: Mapping[str, Any], *,
              initial_step: str | None, idempotency_key: str) -> bool:
        """Queue a start request with the newest definition; ``False`` for a repeated key or workflow id."""
        with self._store(run) as store:
            if store.messages(workflow_id, "start"):
                _duplicate(store, workflow_id, "start", idempotency_key)
                return False
            definition = store.latest(workflow)
            accepted = store.post(workflow_id, idempotency_key, "start",
                                  {"definition": definition, "input": dict(input), "initial_step": initial_step})
            if accepted:
                store.append(workflow_id, [{"kind": "workflow_accepted", "definition": workflow,
                                            "version": definition.get("version"), "idempotency_key": idempotency_key}])
            else:
                _duplicate(store, workflow_id, "start", idempotency_key)
            return accepted

    def send_approval(self, run: RunContext, workflow_id: str, approval_id: str, *, granted: bool, by: str,
                      idempotency_key: str) -> bool:
        """Queue a human decision; ``False`` for a repeated key."""
        with self._store(run) as store:
            return store.post(workflow_id, idempotency_key, "approval",
                              {"approval_id": approval_id, "granted": granted, "by": by}) \
                or _duplicate(store, workflow_id, "approval", idempotency_key)

    def cancel(self, run: RunContext, workflow_id: str, *, reason: str, idempotency_key: str) -> bool:
        """Queue a cancellation; ``False`` for a repeated key."""
        with self._store(run) as store:
            return store.post(workflow_id, idempotency_key, "cancel", {"reason": reason}) \
                or _duplicate(store, workflow_id, "cancel", idempotency_key)

    def status(self, run: RunContext, workflow_id: str) -> dict[str, Any]:
        """See :func:`status_from_trace`."""
        with self._store(run) as store:
            return status_from_trace(store.trace(workflow_id))

    def trace(self, run: RunContext, workflow_id: str) -> list[dict[str, Any]]:
        """The trace recorded in ``adapter.db``."""
        with self._store(run) as store:
            return store.trace(workflow_id)

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        """``python -m WORKER_MODULE --run-dir DIR --world SPEC --probe SPEC --probe-arg ARG [worker_args]``."""
        return [sys.executable, "-m", self.worker_module, "--run-dir", str(run.run_dir), "--world", run.world,
                "--probe", probe_spec, "--probe-arg", probe_arg, *self.worker_args]


def open_pass(argv: list[str] | None = None) -> tuple[Any, Callable[[str], None], Any, AdapterStore, StepRunner]:
    """What one interpreted-adapter worker pass opens first, from its command line
    (:meth:`InterpretedAdapter.worker_command`): ``(args, probe, clock, store, runner)``: the parsed
    arguments (:func:`worker_arguments`), the crash probe, the world's virtual clock, the run's
    :class:`AdapterStore`, and the :class:`StepRunner` that runs its steps (the world built again for each).

    Raises:
        SystemExit: a bad command line (argparse). Whatever the world's factory or the probe's raises.
    """
    args = worker_arguments(argv)
    probe = open_probe(args.probe, args.probe_arg)
    _tools, clock = open_world(args.world, args.run_dir, probe)
    store = AdapterStore(args.run_dir)
    return args, probe, clock, store, StepRunner(store, lambda: open_world(args.world, args.run_dir, probe), probe)


def worker_arguments(argv: list[str] | None = None, extra: Callable[[Any], None] | None = None) -> Any:
    """Parse the worker command line of :meth:`InterpretedAdapter.worker_command` (``extra`` adds options)."""
    import argparse

    parser = argparse.ArgumentParser(description="crashpoint interpreted-adapter worker")
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--world", required=True)
    parser.add_argument("--probe", default=None)
    parser.add_argument("--probe-arg", default="")
    if extra:
        extra(parser)
    return parser.parse_args(argv)
