"""The worker process of a DBOS target: the team's own ``@DBOS.workflow`` / ``@DBOS.step`` code on a system
database crashpoint controls.

``python -m crashpoint.harness.engines.dbos_worker --run-dir DIR --probe SPEC --probe-arg ARG
--phase start|recover|answer [--executor-id ID] [--as-executor ID] [--recover-executor ID ...]``

The target is read from ``RUN_DIR/target.json``. The entry point ``module:workflow`` names the team's
module and its default workflow; an input may name another workflow of that module (``workflow:``) and a
queue to start it through (``queue:``, a queue the team's ``dbos.setup`` function registers with
``DBOS.register_queue``). DBOS is configured here, as a team's ``main`` would: the system database is
SQLite ``RUN_DIR/dbos.sqlite`` (or ``dbos.database_url``), ``application_version`` is pinned (DBOS keys
recovery to it: an unpinned version is an MD5 of the workflow source), ``executor_id`` is the worker's
identity (``--as-executor``: a dead worker's id, restarted; its ``DBOS.launch()`` recovers that executor) (``dbos.executor_id`` gives every worker the same one, as a deployment that hard-codes it does),
the notification listener and DBOS's internal queue poll every 10 ms (``dbos.poll_s``; DBOS's defaults, 1 s,
are what a cycle would otherwise wait on). A DBOS the team's module made when it was imported (``DBOS(config=...)``
at module level, as DBOS's quickstart does; DBOS keeps the first instance of a process) is made again with the
team's config and those settings (:func:`dbos_for_run`), and the run's notes say so.

Crash points, with no user code (methods of ``dbos._sys_db.SystemDatabase`` wrapped, see
:mod:`crashpoint.harness.engines.dbos`):

* ``before_status:WF@STATUS`` / ``after_status:WF@STATUS``: the workflow's status row written (``PENDING``
  or ``ENQUEUED`` at start, ``SUCCESS`` / ``ERROR`` at the end);
* ``step:WF@STEP``: a step about to run (nothing recorded for it yet); ``before_result:WF@STEP`` /
  ``after_result:WF@STEP``: its result recorded;
* ``recv:WF@TOPIC`` / ``after_recv:WF@TOPIC``: a ``DBOS.recv`` entered, and returned with a message;
* ``before_send:DEST@TOPIC`` / ``after_send:DEST@TOPIC``: a message sent (a workflow's ``DBOS.send`` or the
  human's answer delivered by this worker);
* ``dequeued:WF@QUEUE``: a workflow claimed from a queue (DBOS's internal queue too: recovery goes
  through it), before it runs;
* ``before_effect:NAME`` / ``after_effect:NAME``: each ``crashpoint.effect``.

A child workflow (started from a workflow: ``DBOS.start_workflow`` or an enqueue in its code) has its parent
recorded in the run's ledger before its status row is written (the row's ``parent_workflow_id``, in
``init_workflow`` or, dbos 3.4 and later, ``init_child_workflow``): ``target.approval_gate`` follows it.

Phases (what a DBOS application and its clients do, nothing more). Every phase calls ``DBOS.launch()``,
which recovers the PENDING workflows of this executor id and application version:

* ``start``: start each input not yet submitted, ``DBOS.start_workflow`` under ``SetWorkflowID(thread)``
  or ``DBOS.retrieve_queue(name).enqueue``;
* ``recover``: nothing more (``--recover-executor ID`` also asks DBOS to recover executor ``ID``'s pending
  workflows, what an operator or a control plane does for a dead executor);
* ``answer``: ``DBOSClient.send(thread, resume, topic=NODE)`` for each answer in ``RUN_DIR/answers.json``,
  before ``DBOS.launch()`` (what the team's web app does for a human's click; the workflows launch recovers
  then find their message waiting, whatever thread runs first).

Then the worker waits until every submitted workflow is at rest: terminal, or PENDING blocked in a ``recv``
(its durable timeout recorded) with no message waiting for it (``waiting``), or PENDING under another executor whose
processes were all killed and which no live process executes (:func:`orphaned`: it waits for that executor's
recovery, ``pending``), or ``dbos.settle_s`` seconds pass. It
looks every 10 ms, through DBOS's API only when a plain read of the SQLite system database's rows (and the ``recv``
marks) changed since the last look (a look through DBOS's API costs about 10 ms of CPU, the plain read under 1 ms;
PostgreSQL: every look, and once more at the deadline). It writes
``RUN_DIR/threads.json``: thread -> ``{"status": finished|waiting|stuck|pending|enqueued|no_checkpoint,
"dbos_status", "executor", "error"?, "waiting": [{"node": TOPIC, "interrupt": "WF:FUNCTION_ID"}], "values"}``
and exits 0 (without ``DBOS.destroy()``: its background threads die with the process, as in a SIGKILL).
"""

from __future__ import annotations

import base64
import fcntl
import hashlib
import importlib
import json
import os
import pickle
import re
import threading
import time
from pathlib import Path
from typing import Any, Callable

import crashpoint.api as effect_api
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.engines import dbos_warm
from crashpoint.harness.engines.dbos_reads import SystemReads
from crashpoint.harness.engines.effects import EffectSession, alive, digest
from crashpoint.harness.engines.workerlib import (TIME_SCALE, UNSUPPORTED_RC, append, barrier, barrier_exit,
                                                   compressed_s, deployed, exit_after, load_object, mark_submitted,
                                                   open_run, patch_effects, replace_json, submitted, worker_parser,
                                                   worker_probe, write_threads)

DBOS_FILE = "dbos.sqlite"
ANSWERS_FILE = "answers.json"
STEPS_FILE = "steps.log"
#: JSON lines ``{"pid", "wf", "queue"}``: each workflow a worker claimed from a queue.
DEQUEUES_FILE = "dequeues.log"
#: JSON lines ``{"pid", "wf", "status"}``: each final status DBOS wrote (``update_workflow_outcome``).
OUTCOMES_FILE = "outcomes.log"
#: ``PID WF`` lines: each workflow a process executed (any of its steps checked).
EXECUTIONS_FILE = "executions.log"
#: ``PID WF FUNCTION_ID NAME`` lines: each step position a process asked DBOS about (recorded or not), in order.
CHECKS_FILE = "checks.log"
#: JSON lines ``{"pid", "wf", "holders"}``: a process executed a workflow another live process was executing.
OVERLAPS_FILE = "overlaps.log"
EXECUTING_DIR = "executing"
#: ``PID EXECUTOR_ID`` lines: the DBOS executor id each worker process launched with (:func:`orphaned`).
LAUNCHES_FILE = "launches.log"
#: JSON ``[{"id", "name", "queue", "status", "waiting", "digest", "executor"}]``: DBOS's queued workflows at the end.
QUEUED_FILE = "queued.json"
WAITING_DIR = "waiting"
#: ``SystemDatabase`` methods the worker wraps (a dbos release lacking one is ``unsupported``).
HOOKS = ("init_workflow", "check_operation_execution", "record_operation_result", "update_workflow_outcome",
         "recv", "send_bulk", "start_queued_workflows")
#: A hook a release may lack -> the older method wrapped in its place (before 2.2x: one ``send`` per message).
FALLBACKS = {"send_bulk": "send"}
#: DBOS workflow statuses after which nothing more runs.
TERMINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", "RETRIES_EXCEEDED")
#: Seconds between two looks at the workflows' statuses while waiting for rest.
POLL_S = 0.01
#: Seconds between DBOS's polls of its notifications and internal queue in a worker (``dbos.poll_s``; DBOS's own
#: default, :data:`DBOS_DEFAULT_POLL_S`, is what a cycle would otherwise wait on).
FAST_POLL_S = 0.01
DBOS_DEFAULT_POLL_S = 1.0
#: Seconds between the queue manager's looks for newly registered queues in a worker (a query each; DBOS's: 1 s).
QUEUE_MANAGER_S = 0.05
#: Version pinned when the target gives none.
APP_VERSION = "crashpoint-pinned"
ERROR_CHARS = 2000

_position = threading.local()
dbos_warm.preload()

#: JSON lines ``{"pid", "where", "replaced"}``: the team's own ``DBOS(config=...)`` a worker rebuilt for the run
#: (``where``: ``FILE:LINE`` of the call; ``replaced``: the team's values of the keys crashpoint sets or leaves out).
TEAM_CONFIG_FILE = "team-dbos-config.log"
#: Keys of a team's ``DBOSConfig`` that crashpoint sets itself or leaves out of a run: the system database (and
#: whatever else names a database or a schema, which would send the run's state elsewhere), the application version
#: and executor id recovery is keyed to, the log level, DBOS's polls, its admin server and DBOS Conductor. Every
#: other key of the team's config is kept.
RUN_OWNED = ("name", "system_database_url", "system_database_engine", "database_url", "application_database_url",
             "dbos_system_schema", "application_version", "executor_id", "log_level",
             "notification_listener_polling_interval_sec", "run_admin_server", "admin_port", "conductor_key",
             "conductor_url")
#: ``(config, "FILE:LINE")`` of each ``DBOS(config=...)`` the team's code made in this process (its module's import,
#: in the zygote or the worker), in order: :func:`watch_team_config`.
_team_configs: list[tuple[dict[str, Any], str]] = []
_building = threading.local()  # crashpoint's own DBOS(...) is being made in this thread
_ready = False  # crashpoint made the run's DBOS: DBOS.launch() may run (before: the team's import-time code)


def _caller() -> str:
    """``FILE:LINE`` of the innermost frame outside dbos and this module: where the team's code made its DBOS."""
    import sys

    frame = sys._getframe(1)
    ours = {os.path.dirname(os.path.abspath(__file__))}
    try:
        import dbos

        ours.add(os.path.dirname(os.path.abspath(dbos.__file__)))
    except ImportError:  # pragma: no cover - the worker imports dbos first
        pass
    while frame is not None:
        path = os.path.abspath(frame.f_code.co_filename)
        if not any(path.startswith(folder + os.sep) for folder in ours):
            return f"{frame.f_code.co_filename}:{frame.f_lineno}"
        frame = frame.f_back
    return "the team's code"


def watch_team_config() -> None:
    """Record the ``config`` of every ``DBOS(...)`` made in this process other than crashpoint's own (``DBOS.__init__``
    wrapped once; its first call per instance, DBOS calling it twice), so that a worker can rebuild the team's DBOS,
    made when its module was imported (as DBOS's quickstart does), for the run: :func:`dbos_for_run`. Called when
    this module is imported, before the team's module is (the warm zygote imports this module first)."""
    try:
        from dbos import DBOS
    except ImportError:  # pragma: no cover - dbos is what this worker runs
        return
    inner = DBOS.__init__
    if getattr(inner, "_crashpoint_watch", False):
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        if not getattr(_building, "on", False) and not getattr(self, "_initialized", False):
            _team_configs.append((dict(kwargs.get("config") or {}), _caller()))
        inner(self, *args, **kwargs)

    __init__._crashpoint_watch = True  # type: ignore[attr-defined]
    DBOS.__init__ = __init__  # type: ignore[method-assign]
    launch = DBOS.__dict__["launch"].__func__  # a classmethod

    def launch_after_crashpoint(cls: Any, *args: Any, **kwargs: Any) -> Any:
        if not _ready:
            where = _caller()
            raise RuntimeError(f"DBOS.launch() called at {where} when the team's module was imported: it would "
                               "recover and run workflows on the team's own database before crashpoint configured "
                               "DBOS for the run; call DBOS.launch() in your main (under if __name__ == "
                               "\"__main__\":), not at import")
        return launch(cls, *args, **kwargs)

    DBOS.launch = classmethod(launch_after_crashpoint)  # type: ignore[method-assign,assignment]


watch_team_config()


def _shown(key: str, value: Any) -> Any:
    """A config value as the run's notes may show it: no secret (a Conductor key, a URL's password)."""
    if key == "conductor_key":
        return "(set)"
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", value) if isinstance(value, str) else value


def dbos_for_run(ours: dict[str, Any], run_dir: Path) -> Any:
    """The run's DBOS instance, configured with ``ours`` (the run's system database, pinned application version,
    executor id, polls). When the team's code already made one (``DBOS(config=...)`` at its module's import: DBOS
    keeps the first instance of a process and ignores a later config, so every worker would have run on the team's
    own database, under its own version), that instance, not launched yet, is destroyed and made again with the
    team's config, its :data:`RUN_OWNED` keys replaced by crashpoint's (the way crashpoint configures DBOS when it
    makes it itself), and ``RUN_DIR/``:data:`TEAM_CONFIG_FILE` says so (the run's notes quote it). An instance the
    team's code keeps (``app = DBOS(...)``) is then a destroyed one: DBOS's class methods reach the new instance.

    Raises:
        RuntimeError: the team's code launched DBOS when its module was imported (``DBOS.launch()`` at module level):
            it then recovered and ran workflows on its own database before crashpoint could configure it.
    """
    import dbos._dbos as dbos_core
    from dbos import DBOS

    config = dict(ours)
    team = getattr(dbos_core, "_dbos_global_instance", None)
    if team is not None:
        given, where = _team_configs[-1] if _team_configs else ({}, "the team's code")
        if getattr(team, "_launched", False):
            raise RuntimeError(f"DBOS was launched when the team's module was imported (DBOS(...) at {where}, then "
                               "DBOS.launch()): crashpoint configures and launches DBOS in each worker; call "
                               "DBOS.launch() in your main (if __name__ == \"__main__\":), not at import")
        config = {**{k: v for k, v in given.items() if k not in RUN_OWNED}, **ours}
        replaced = {k: _shown(k, given[k]) for k in RUN_OWNED if k in given and given[k] != config.get(k)}
        DBOS.destroy()
        append(run_dir / TEAM_CONFIG_FILE, json.dumps({"pid": os.getpid(), "where": where,
                                                       "replaced": _jsonable(replaced)}) + "\n")
    global _ready
    _building.on = True
    try:
        instance = DBOS(config=config)
    finally:
        _building.on = False
    _ready = True
    return instance


def compress_time(scale: float, poll_s: float) -> list[str]:
    """Time compressed (``dbos.time_scale``, :func:`~crashpoint.harness.engines.workerlib.compressed_s`): the team's
    ``DBOS.sleep`` / ``DBOS.sleep_async`` sleep the compressed seconds (DBOS records the wake-up time of the first
    execution, so a recovered sleep keeps it), and the team's queues poll every ``poll_s`` at most instead of their
    ``polling_interval_sec`` (a queue made from now on, in the code or from DBOS's table of database-backed queues,
    and those the team's module made when imported), as DBOS's internal queue does. The same on dbos 2.2x and 3.x
    (``Queue._polling_interval_sec``, read by each queue's worker thread at each poll; a release without it keeps its
    polls). Returns what it changed, for the worker's log; nothing with ``scale`` 1."""
    if scale <= 1:
        return []
    from dbos import DBOS
    from dbos import _queue

    changed = []
    for name in ("sleep", "sleep_async"):
        original = getattr(DBOS, name, None)
        if original is None:
            continue
        inner = original.__func__
        if name == "sleep":
            def fast(cls: Any, seconds: float, inner: Any = inner) -> Any:
                return inner(cls, compressed_s(seconds, scale))
        else:
            async def fast(cls: Any, seconds: float, inner: Any = inner) -> Any:  # type: ignore[misc]
                return await inner(cls, compressed_s(seconds, scale))
        setattr(DBOS, name, classmethod(fast))
        changed.append(f"DBOS.{name}")
    init = _queue.Queue.__init__

    def fast_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        _poll_fast(self, poll_s)

    _queue.Queue.__init__ = fast_init  # type: ignore[method-assign]
    try:
        from dbos._dbos import _get_or_create_dbos_registry

        made = list(getattr(_get_or_create_dbos_registry(), "queue_info_map", {}).values())
    except ImportError:
        made = []
    changed += [f"queue {q.name}" for q in made if _poll_fast(q, poll_s)]
    return changed + ["the team's queues' polls"]


def _poll_fast(queue: Any, poll_s: float) -> bool:
    """Lower ``queue``'s poll interval to ``poll_s``; ``True`` when it was longer."""
    now = getattr(queue, "_polling_interval_sec", None)
    if isinstance(now, (int, float)) and now > poll_s:
        queue._polling_interval_sec = poll_s
        return True
    return False


def _mark(name: str) -> None:
    """With ``$CRASHPOINT_DBOS_TIMING`` set, print ``EPOCH_SECONDS NAME`` to the worker's log: a stage of the worker
    (``main``, ``launched``, ``at rest``, ...) or, through the probe, each crash point (how README "Speed" was
    profiled)."""
    if os.environ.get("CRASHPOINT_DBOS_TIMING"):
        print(f"{time.time():.3f} {name}", flush=True)


def app_name(target_name: str) -> str:
    """A DBOS application name for ``target_name`` (3-256 of ``[a-z0-9_-]``)."""
    name = re.sub(r"[^a-z0-9_-]", "-", target_name.lower())
    return (name + "-app")[:256] if len(name) < 3 else name[:256]


#: The node of an effect called from a workflow's own code, outside any step (DBOS runs it again on every recovery and
#: records nothing of it).
WORKFLOW_CODE = "workflow code"


def where_am_i() -> dict[str, Any]:
    """The workflow, step (name and DBOS function id) the calling thread runs in; in a workflow's own code outside
    any step, the workflow with node :data:`WORKFLOW_CODE` (``task``: "not a step"); ``{}`` outside both (a thread the
    team's code started: :func:`~crashpoint.harness.engines.effects.follow_threads` places it). DBOS's context says
    which (``is_step``); the step hook's last record (``_position``) names the step (it is left behind when the step
    returns: the context tells the workflow's own code from its last step)."""
    pos = getattr(_position, "value", None)
    try:
        from dbos._context import get_local_dbos_context
    except ImportError:  # a dbos without that context: the step hook's record alone
        return {} if pos is None else {"thread": pos[0], "node": pos[2], "task": None, "step": pos[1]}
    ctx = get_local_dbos_context()
    if ctx is None or not ctx.workflow_id:
        return {}
    if ctx.is_step() and pos is not None and pos[0] == ctx.workflow_id:
        wf, fid, name = pos
        return {"thread": wf, "node": name, "task": None, "step": fid}
    return {"thread": ctx.workflow_id, "node": WORKFLOW_CODE, "task": "not a step", "step": None}


_held: dict[str, int] = {}
#: The DBOS executor id this process launched with (set in :func:`main`).
_me: str | None = None


def _lock_path(run_dir: Path, workflow_id: str) -> Path:
    """``RUN_DIR/executing/DIGEST.lock``: the file a process executing ``workflow_id`` holds an exclusive ``flock`` on."""
    return run_dir / EXECUTING_DIR / f"{hashlib.sha256(workflow_id.encode()).hexdigest()[:32]}.lock"


def orphaned(run_dir: Path, workflow_id: str, executor: str | None) -> bool:
    """``True`` when the PENDING workflow ``workflow_id``, owned by DBOS executor ``executor``, is one no process of
    the run advances until an operator recovers that executor: ``executor`` is not this process's, every worker
    process that launched as it (``RUN_DIR/launches.log``) is dead (killed), this process never executed the
    workflow, and no live process holds its execution lock (:func:`executing`). DBOS's ``launch()`` recovers its own
    executor's pending workflows only, so such a workflow stays PENDING: a worker waiting for it to rest waited out
    ``dbos.settle_s`` for nothing (20 s of each run whose second kill hit one of several recovering workers)."""
    if executor is None or executor == _me or workflow_id in _held:
        return False
    try:
        rows = [line.split() for line in (run_dir / LAUNCHES_FILE).read_text().splitlines()]
    except OSError:
        return False
    pids = [int(r[0]) for r in rows if len(r) == 2 and r[1] == executor]
    if not pids or any(alive(pid) for pid in pids):
        return False
    return _lock_path(run_dir, workflow_id).name not in held_locks(run_dir)


def held_locks(run_dir: Path) -> frozenset[str]:
    """The names of the execution lock files (``RUN_DIR/executing/``) some process holds a ``flock`` on, read from
    ``/proc/locks`` (Linux): a look that takes no lock, so a worker taking one meanwhile never finds it held by the
    looker (which :func:`executing` would record as an overlap). A killed process's lock is listed until its last
    thread exited, after its pid already reads as a zombie. Empty when there is no such folder; every file when
    ``/proc/locks`` cannot be read (nothing is then taken for free)."""
    try:
        files = {os.stat(entry.path).st_ino: entry.name for entry in os.scandir(run_dir / EXECUTING_DIR)}
    except FileNotFoundError:
        return frozenset()
    try:
        with open("/proc/locks") as f:
            rows = [line.split() for line in f]
    except OSError:
        return frozenset(files.values())
    held = set()
    for row in rows:
        kind = row[1] if row[1] != "->" else row[2]  # a waiter's line: "N: -> FLOCK ..."
        if kind == "FLOCK" and len(row) >= 6:
            inode = int(row[-3].rsplit(":", 1)[1])
            if inode in files:
                held.add(files[inode])
    return frozenset(held)


def executing(run_dir: Path, workflow_id: str) -> None:
    """Note that this process executes ``workflow_id`` (the first time only): take an exclusive ``flock`` on
    ``RUN_DIR/executing/WF.lock`` and keep it until the process ends (the kernel drops it on a SIGKILL). When
    another live process holds it, append ``{"pid", "wf", "holders"}`` to ``RUN_DIR/overlaps.log``: two live
    processes executing one workflow at once (``holders``: the other live pids that executed it)."""
    if workflow_id in _held:
        return
    (run_dir / EXECUTING_DIR).mkdir(exist_ok=True)
    fd = os.open(_lock_path(run_dir, workflow_id), os.O_RDWR | os.O_CREAT, 0o644)
    _held[workflow_id] = fd
    append(run_dir / EXECUTIONS_FILE, f"{os.getpid()} {workflow_id}\n")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holders = sorted({int(line.split(" ", 1)[0]) for line in (run_dir / EXECUTIONS_FILE).read_text().splitlines()
                          if line.split(" ", 1)[1] == workflow_id} - {os.getpid()})
        append(run_dir / OVERLAPS_FILE, json.dumps({"pid": os.getpid(), "wf": workflow_id,
                                                    "holders": [p for p in holders if alive(p)]}) + "\n")


def install_hooks(probe: Callable[[str], None], run_dir: Path) -> list[str]:
    """Wrap ``SystemDatabase``'s methods (see the module docstring); returns the :data:`HOOKS` this dbos lacks
    (nothing is wrapped then). A ``recv`` in progress is ``RUN_DIR/waiting/WF.json`` (``{"node", "interrupt",
    "topic", "pid", "timeout_step", "function_id"}``), removed when it returns: every worker of the run sees which workflows wait (a SIGKILL
    inside ``recv`` leaves it: the workflow waits there in the database too)."""
    from dbos._sys_db import SystemDatabase

    hooks = [h if callable(getattr(SystemDatabase, h, None)) or h not in FALLBACKS else FALLBACKS[h] for h in HOOKS]
    missing = [h for h in hooks if not callable(getattr(SystemDatabase, h, None))]
    if missing:
        return missing
    orig = {h: getattr(SystemDatabase, h) for h in hooks}
    steps = run_dir / STEPS_FILE
    waits = run_dir / WAITING_DIR

    def init_workflow(self: Any, status: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{status['workflow_uuid']}@{status['status']}"
        _record_parent(status["workflow_uuid"], status.get("parent_workflow_id"))
        probe(f"before_status:{where}")
        out = orig["init_workflow"](self, status, *args, **kwargs)
        probe(f"after_status:{where}")
        return out

    def check_operation_execution(self: Any, workflow_id: str, function_id: int, function_name: str,
                                  *args: Any, **kwargs: Any) -> Any:
        executing(run_dir, workflow_id)
        append(run_dir / CHECKS_FILE, f"{os.getpid()} {workflow_id} {function_id} {function_name}\n")
        recorded = orig["check_operation_execution"](self, workflow_id, function_id, function_name, *args, **kwargs)
        _position.value = (workflow_id, function_id, function_name)
        if recorded is None:
            append(steps, f"{os.getpid()} {workflow_id} {function_id} {function_name}\n")
            probe(f"step:{workflow_id}@{function_name}")
        return recorded

    def record_operation_result(self: Any, result: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{result['workflow_uuid']}@{result['function_name']}"
        probe(f"before_result:{where}")
        out = orig["record_operation_result"](self, result, *args, **kwargs)
        probe(f"after_result:{where}")
        return out

    def update_workflow_outcome(self: Any, workflow_id: str, status: Any, *args: Any, **kwargs: Any) -> Any:
        where = f"{workflow_id}@{status}"
        probe(f"before_status:{where}")
        out = orig["update_workflow_outcome"](self, workflow_id, status, *args, **kwargs)
        append(run_dir / OUTCOMES_FILE, json.dumps({"pid": os.getpid(), "wf": workflow_id, "status": status}) + "\n")
        probe(f"after_status:{where}")
        return out

    def recv(self: Any, workflow_uuid: str, function_id: int, timeout_function_id: int, topic: Any,
             *args: Any, **kwargs: Any) -> Any:
        mark = waits / f"{workflow_uuid}.json"
        waits.mkdir(exist_ok=True)
        mark.write_text(json.dumps({"node": topic or "default", "interrupt": f"{workflow_uuid}:{function_id}",
                                    "topic": topic, "pid": os.getpid(), "timeout_step": timeout_function_id,
                                    "function_id": function_id}))
        try:
            probe(f"recv:{workflow_uuid}@{topic}")
            out = orig["recv"](self, workflow_uuid, function_id, timeout_function_id, topic, *args, **kwargs)
        finally:
            mark.unlink(missing_ok=True)
        probe(f"after_recv:{workflow_uuid}@{topic}")
        return out

    def send_bulk(self: Any, messages: Any, *args: Any, **kwargs: Any) -> Any:
        wheres = [f"{getattr(m, 'destination_id', '?')}@{getattr(m, 'topic', None)}" for m in messages]
        for where in wheres:
            probe(f"before_send:{where}")
        out = orig["send_bulk"](self, messages, *args, **kwargs)
        for where in wheres:
            probe(f"after_send:{where}")
        return out

    def send(self: Any, workflow_uuid: Any, function_id: Any, destination_uuid: str, message: Any,
             topic: Any = None, *args: Any, **kwargs: Any) -> Any:
        where = f"{destination_uuid}@{topic}"
        probe(f"before_send:{where}")
        out = orig["send"](self, workflow_uuid, function_id, destination_uuid, message, topic, *args, **kwargs)
        probe(f"after_send:{where}")
        return out

    def start_queued_workflows(self: Any, queue: Any, *args: Any, **kwargs: Any) -> Any:
        out = orig["start_queued_workflows"](self, queue, *args, **kwargs)
        ids = out[0] if isinstance(out, tuple) else out
        for wf in ids or ():
            append(run_dir / DEQUEUES_FILE, json.dumps({"pid": os.getpid(), "wf": wf,
                                                        "queue": getattr(queue, "name", str(queue))}) + "\n")
            probe(f"dequeued:{wf}@{getattr(queue, 'name', queue)}")
        return out

    for name, fn in locals().copy().items():
        if name in hooks:
            setattr(SystemDatabase, name, fn)
    child = getattr(SystemDatabase, "init_child_workflow", None)  # dbos >= 3.4: a child's status row, apart
    if callable(child):
        def init_child_workflow(self: Any, status: Any, *args: Any, **kwargs: Any) -> Any:
            _record_parent(status["workflow_uuid"], kwargs.get("parent_workflow_id") or status.get("parent_workflow_id"))
            return child(self, status, *args, **kwargs)

        SystemDatabase.init_child_workflow = init_child_workflow
    return []


#: The worker's effect session (:func:`main` installs it): child workflows' parents are recorded through it.
_session: EffectSession | None = None


def _record_parent(workflow_id: str, parent: str | None) -> None:
    """Record a child workflow's parent (DBOS's ``parent_workflow_id`` of the status row it is about to write: a
    workflow started from a workflow) before the row is written (:meth:`EffectSession.record_parent`)."""
    if _session is not None and parent:
        _session.record_parent(workflow_id, parent)


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def _waiting(run_dir: Path, thread: str) -> dict[str, Any] | None:
    try:
        return json.loads((run_dir / WAITING_DIR / f"{thread}.json").read_text())
    except (OSError, ValueError):
        return None


def _blocked(run_dir: Path, db: SystemReads, wf: str, status: str) -> dict[str, Any] | None:
    """The ``recv`` mark of ``wf`` when it is PENDING and blocked in a ``recv`` with no message waiting, else ``None``
    (until ``recv``'s durable timeout, a ``DBOS.sleep`` step, is recorded, the ``recv`` is still setting up; once
    its own result is recorded it has returned in the database: DBOS marks the message consumed and records the
    ``recv`` in one transaction, and the workflow runs on while the mark is still there, until the wrapper returns).

    The message is read before the ``recv``'s own result: a ``recv`` that takes its message between two reads is
    then seen recorded (read the other way round, it was seen neither recorded nor with a message waiting, hence
    blocked, and its worker exited inside the next step). A read that fails is never taken for blocked."""
    wait = _waiting(run_dir, wf) if status == "PENDING" else None
    if wait is None or db.message_waiting(wf, wait["topic"]) is not False:
        return None
    step, own = wait.get("timeout_step"), wait.get("function_id")
    if (step is not None and db.step_recorded(wf, step) is not True) or \
            (own is not None and db.step_recorded(wf, own) is not False):
        return None
    return wait


def queued_work(dbos: Any, run_dir: Path, db: SystemReads, internal: str) -> tuple[list[dict[str, Any]], bool]:
    """``(DBOS's workflows put on a team's queue, each at rest)``: ``[{"id", "name", "queue", "status", "waiting",
    "digest", "executor"}]`` sorted by id (``waiting``: blocked in a ``recv``; ``digest``: of the workflow's inputs;
    DBOS's internal queue left out: recovery uses it for workflows started directly)."""
    work, rest = [], True
    for st in dbos.list_workflows(load_input=True, load_output=False):
        queue = getattr(st, "queue_name", None)
        if not queue or queue == internal:
            continue
        waiting = _blocked(run_dir, db, st.workflow_id, st.status) is not None
        work.append({"id": st.workflow_id, "name": st.name, "queue": queue, "status": st.status, "waiting": waiting,
                     "digest": digest({"input": getattr(st, "input", None)}), "executor": getattr(st, "executor_id", None)})
        if st.status not in TERMINAL and not waiting and not (
                st.status == "PENDING" and orphaned(run_dir, st.workflow_id, getattr(st, "executor_id", None))):
            rest = False
    return sorted(work, key=lambda w: w["id"]), rest


def _state(db: SystemReads, run_dir: Path) -> tuple[Any, ...] | None:
    """What rest is judged from: the system database's :meth:`~SystemReads.snapshot`, the ``recv`` marks
    (``RUN_DIR/waiting/``, name, size and modification time), the run's worker processes that died
    (``RUN_DIR/launches.log``) and the execution locks held (:func:`held_locks`): a partner's death changes no row,
    yet makes its workflows :func:`orphaned` once its last thread dropped their locks; ``None`` when the snapshot is
    unknown."""
    snap = db.snapshot()
    if snap is None:
        return None
    marks = []
    try:
        for entry in os.scandir(run_dir / WAITING_DIR):
            try:
                st = entry.stat()
            except FileNotFoundError:  # its recv just returned
                continue
            marks.append((entry.name, st.st_size, st.st_mtime_ns))
    except FileNotFoundError:
        pass
    return snap, tuple(sorted(marks)), _dead_launches(run_dir), held_locks(run_dir)


def _dead_launches(run_dir: Path) -> tuple[int, ...]:
    """The pids in ``RUN_DIR/launches.log`` no longer alive, sorted."""
    try:
        rows = [line.split() for line in (run_dir / LAUNCHES_FILE).read_text().splitlines()]
    except OSError:
        return ()
    return tuple(sorted(int(r[0]) for r in rows if r and not alive(int(r[0]))))


def stored_error(error: Any) -> str | None:
    """A workflow's error as DBOS reports it, quoted decoded: ``Name: message`` of an exception; DBOS hands back the
    stored form when it cannot unpickle it (a team's exception whose ``__init__`` takes keyword-only arguments, or a
    class this process cannot import): a base64 pickle, whose class and text are read here without running it
    (``pickletools``: the class named, the strings it was built with), "(stored pickled; not unpickled: ...)" after
    it. ``None``: no error. At most :data:`ERROR_CHARS` characters."""
    if error is None:
        return None
    if isinstance(error, BaseException):
        return f"{type(error).__name__}: {error}"[:ERROR_CHARS]
    text = str(error)
    try:
        raw = base64.b64decode(text, validate=True)
    except (ValueError, TypeError):
        return text[:ERROR_CHARS]
    if not raw.startswith(b"\x80"):  # not a pickle (protocol 2 and later start with PROTO)
        return text[:ERROR_CHARS]
    try:
        exc = pickle.loads(raw)
    except Exception as why:  # noqa: BLE001 - what DBOS met too: read the pickle's class and strings instead
        reason = f"{type(why).__name__}: {why}"
    else:
        return (f"{type(exc).__name__}: {exc}" if isinstance(exc, BaseException) else repr(exc))[:ERROR_CHARS]
    return f"{_pickled_text(raw)} (stored pickled; not unpickled: {reason})"[:ERROR_CHARS]


def _pickled_text(raw: bytes) -> str:
    """``Class: first string, ...`` of a pickled object, read opcode by opcode (nothing of it is run); the raw text's
    start when the pickle cannot be read."""
    import pickletools

    strings: list[str] = []
    name = None
    try:
        for op, arg, _ in pickletools.genops(raw):
            if op.name in ("GLOBAL",) and name is None:
                name = str(arg).replace(" ", ".")
            elif op.name == "STACK_GLOBAL" and name is None and len(strings) >= 2:
                name = f"{strings[-2]}.{strings[-1]}"
                strings = strings[:-2]
            elif isinstance(arg, str) and op.name.endswith("UNICODE"):
                strings.append(arg)
    except Exception:  # noqa: BLE001 - a torn pickle: what was read so far
        pass
    shown = name.rsplit(".", 1)[-1] if name else "an object"
    return f"{shown}: {strings[0]}" if strings else shown


def report(dbos: Any, threads: list[str], done: set[str], run_dir: Path,
           db: SystemReads) -> tuple[dict[str, Any], bool]:
    """``(threads.json's content, every submitted workflow at rest)`` from DBOS's own workflow statuses."""
    out: dict[str, Any] = {}
    rest = True
    for thread in threads:
        if thread not in done:
            out[thread] = {"status": "not_submitted", "waiting": []}
            continue
        status = dbos.get_workflow_status(thread)
        if status is None:
            out[thread] = {"status": "no_checkpoint", "waiting": []}
            continue
        st = status.status
        values = {"output": _jsonable(getattr(status, "output", None)),
                  "error": stored_error(getattr(status, "error", None))}
        entry: dict[str, Any] = {"dbos_status": st, "executor": getattr(status, "executor_id", None),
                                 "app_version": getattr(status, "app_version", None), "values": values, "waiting": []}
        wait = _blocked(run_dir, db, thread, st)
        if st == "SUCCESS":
            entry["status"] = "finished"
        elif st in TERMINAL:
            entry["status"] = "stuck"
            entry["error"] = f"DBOS workflow status {st}: {values['error']}"
        elif wait is not None:
            entry["status"] = "waiting"
            entry["waiting"] = [{"node": wait["node"], "interrupt": wait["interrupt"], "value": None}]
        elif st == "PENDING" and orphaned(run_dir, thread, entry["executor"]):
            entry["status"] = "pending"
            entry["error"] = (f"DBOS workflow status PENDING (executor {entry['executor']}, whose processes were "
                              "killed; none of this run executes it until that executor is recovered)")
        else:
            rest = False
            entry["status"] = st.lower()
            entry["error"] = (f"DBOS workflow status {st} (executor {entry['executor']}, application version "
                              f"{entry['app_version']}) once this worker gave up waiting")
        out[thread] = entry
    return out, rest


def deliver(url: str, app: str, answers: list[dict[str, Any]]) -> None:
    """Send each answer ``{"thread", "node", "resume"}`` as ``DBOSClient.send(thread, resume, topic=node)``: what
    the team's web app does for a human's click, through the system database alone (no workflow code)."""
    import inspect

    from dbos import DBOSClient

    accepted = inspect.signature(DBOSClient).parameters
    client = DBOSClient(system_database_url=url,
                        **({"application_name": app} if "application_name" in accepted else {}))
    try:
        for answer in answers:
            client.send(answer["thread"], answer["resume"], topic=answer.get("node"))
    finally:
        client.destroy()


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    parser = worker_parser("dbos_worker")
    parser.add_argument("--executor-id", default="crashpoint-executor", help="this worker's DBOS executor id")
    parser.add_argument("--as-executor", default=None,
                        help="the DBOS executor id to launch with (default: --executor-id): a dead worker's, restarted")
    parser.add_argument("--recover-executor", action="append", default=[],
                        help="also recover this (dead) executor's pending workflows after launch")
    args = parser.parse_args(argv)
    _mark("main")
    run_dir = Path(args.run_dir)
    target = deployed(open_run(run_dir, args.phase, args.executor_id), args.version)
    opts = target.get("dbos") or {}
    if args.durability != "sync":
        print(f"unsupported: durability={args.durability!r}: DBOS records each step's result before the next "
              "step runs; it has no other mode", flush=True)
        return UNSUPPORTED_RC
    probe = worker_probe(args.probe, args.probe_arg)
    if os.environ.get("CRASHPOINT_DBOS_TIMING"):
        inner = probe

        def probe(name: str) -> None:
            _mark(name)
            inner(name)
    missing = install_hooks(probe, run_dir)
    if missing:
        from importlib.metadata import version

        print(f"unsupported: dbos {version('dbos')} has no SystemDatabase.{', '.join(missing)} "
              "(crashpoint's DBOS crash points wrap them)", flush=True)
        return UNSUPPORTED_RC
    from dbos import DBOS, SetWorkflowID
    from dbos._utils import INTERNAL_QUEUE_NAME

    module_name, _, default_workflow = target["entry"].partition(":")
    module = importlib.import_module(module_name)
    patch_effects(target["effects"], team=target["pythonpath"], run_dir=run_dir)
    url = opts.get("database_url") or f"sqlite:///{run_dir / DBOS_FILE}"
    poll_s = float(opts.get("poll_s", FAST_POLL_S))
    compressed = compress_time(float(opts.get("time_scale", TIME_SCALE)), poll_s)
    if compressed:
        _mark(f"time compressed: {', '.join(compressed)}")
    if poll_s != DBOS_DEFAULT_POLL_S:  # crashpoint's way (README "Speed"); the naive way keeps DBOS's own start-up
        if not opts.get("database_url"):
            dbos_warm.seed_schema(run_dir / DBOS_FILE)
            dbos_warm.unsynced(run_dir / DBOS_FILE)
        dbos_warm.fast_queue_manager(max(poll_s, QUEUE_MANAGER_S))
    db = SystemReads(url=opts["database_url"]) if opts.get("database_url") else SystemReads(sqlite_file=run_dir / DBOS_FILE)

    def durable(thread: str | None) -> bool | None:
        return None if thread is None else db.has_status(thread)

    global _session
    _session = EffectSession(run_dir / LEDGER_FILE, probe, where_am_i, durable)
    effect_api._install(_session)
    if args.barrier:
        barrier(run_dir, args.barrier)
    if args.phase == "answer":  # before launch: the workflows DBOS.launch() recovers find their message waiting
        deliver(url, app_name(target["target"]), json.loads((run_dir / ANSWERS_FILE).read_text()))
    global _me
    _me = opts.get("executor_id") or args.as_executor or args.executor_id
    append(run_dir / LAUNCHES_FILE, f"{os.getpid()} {_me}\n")
    instance = dbos_for_run(dbos_warm.without_admin_server({
        "name": app_name(target["target"]), "system_database_url": url,
        "application_version": str(opts.get("application_version") or APP_VERSION),
        "executor_id": _me, "log_level": "WARNING",
        "notification_listener_polling_interval_sec": poll_s}), run_dir)
    fast_queue = getattr(instance._registry, "_register_internal_queue", None)
    if fast_queue is not None and poll_s != DBOS_DEFAULT_POLL_S:  # dbos >= 3.0; before it the internal queue keeps its 1 s poll
        fast_queue(INTERNAL_QUEUE_NAME, polling_interval_sec=poll_s)
    DBOS.launch()
    _mark("launched")
    if opts.get("setup"):
        load_object(opts["setup"])()
    if args.recover_executor:
        DBOS._recover_pending_workflows(args.recover_executor)
    _mark("recovered")
    done = set(submitted(run_dir))
    threads = [i["thread"] for i in target["inputs"]]
    if args.phase == "start":
        for item in target["inputs"]:
            thread = item["thread"]
            if thread in done and thread not in args.resubmit and not args.duplicate:
                continue
            mark_submitted(run_dir, thread)
            done.add(thread)
            workflow = getattr(module, item.get("workflow") or default_workflow)
            with SetWorkflowID(thread):
                if item.get("queue"):
                    DBOS.retrieve_queue(item["queue"]).enqueue(workflow, item["input"])
                else:
                    DBOS.start_workflow(workflow, item["input"])
    _mark("started")
    deadline = time.monotonic() + float(opts.get("settle_s", 20))
    seen: Any = None
    while True:
        now = _state(db, run_dir)
        late = time.monotonic() > deadline
        if now is None or now != seen or late:  # DBOS's API only when something changed (a look costs ~10 ms of CPU)
            out, rest = report(DBOS, threads, done, run_dir, db)
            work, work_rest = queued_work(DBOS, run_dir, db, INTERNAL_QUEUE_NAME)
            # rest is judged from several reads: trusted only when nothing changed while they were made
            steady = _state(db, run_dir) == now
            seen = now if steady else None
            rest, work_rest = rest and steady, work_rest and steady
        if (rest and work_rest) or late:
            break
        time.sleep(POLL_S)
    _mark("at rest")
    if args.barrier:  # workers that started together stay up until all are at rest, as a deployment's replicas do
        barrier_exit(run_dir)
    replace_json(run_dir / QUEUED_FILE, work)
    write_threads(run_dir, out)
    _mark("written")
    return 0


if __name__ == "__main__":
    exit_after(main)
