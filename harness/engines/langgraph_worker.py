"""The worker process of a LangGraph target: the team's own graph, checkpointed by a saver crashpoint controls.

``python -m crashpoint.harness.engines.langgraph_worker --run-dir DIR --probe SPEC --probe-arg ARG
--durability sync|async|exit --phase start|recover|answer``

The target is read from ``RUN_DIR/target.json`` (:meth:`~crashpoint.harness.load.target.Target.dumps`).
The entry point (``module:attr``) is a ``StateGraph`` builder, compiled here with the saver, or a
compiled graph, copied with the saver in place of its own. The saver is ``SqliteSaver`` on
``RUN_DIR/langgraph.db`` or the target's own ``BaseCheckpointSaver`` subclass (constructed with the
``sqlite3`` connection), subclassed here so that every ``put`` passes ``before_put:THREAD@STEP`` /
``after_put:THREAD@STEP`` and every ``put_writes`` ``before_writes:THREAD@NODE`` /
``after_writes:THREAD@NODE`` (``NODE`` is ``resume`` for the write of a ``Command(resume=...)``). A
callback handler passes ``node:THREAD@NODE`` as each node starts. Effects (``crashpoint.effect`` and
the target's ``effects:`` paths, patched here) pass their own crash points and go to the run's ledger.

Phases (what a LangGraph application does, nothing more):

* ``start``: ``invoke(input, config)`` for each input thread not yet submitted (``submitted.log``
  records a thread as it is submitted, so a start is never repeated by crashpoint itself);
  ``--resubmit THREAD`` submits a thread again (the harness, as the caller, after it found the thread
  with no checkpoint: never silently);
* ``recover``: a new process after a kill: ``invoke(None, config)`` for each submitted thread that has a
  checkpoint and has not finished. A submitted thread with **no** checkpoint is reported
  ``no_checkpoint``; it is not resubmitted here;
* ``answer``: ``invoke(Command(resume=VALUE), config)`` for each answer in ``RUN_DIR/answers.json``
  (``[{"thread", "interrupt", "resume"}]``) whose interrupt the thread is still waiting on.

"Finished" is never read from ``get_state().next == ()`` alone (after a lost checkpoint that is what
the surviving input checkpoint shows, and also a ``loop`` checkpoint whose tasks all stored their
writes before the kill, in any durability mode): a thread is finished when its newest checkpoint is a
``loop`` checkpoint with nothing left to run, no pending writes and no interrupt. Each time a pass finds
``next == ()`` on an unfinished thread it says so (``trap`` in ``threads.json``, a note of the run). Every pass ends by writing ``RUN_DIR/threads.json``:
thread -> ``{"status": finished|waiting|unfinished|no_checkpoint|not_submitted|stuck, "error"?,
"waiting": [{"node", "interrupt", "value"}], "values"?}``. Exit 0 unless the harness killed it.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Any, Callable

from langchain_core.callbacks import BaseCallbackHandler
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

import crashpoint.api as effect_api
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.engines.effects import EffectSession
from crashpoint.harness.engines.workerlib import append as _append, barrier as _barrier, deployed, load_object, open_run
from crashpoint.harness.engines.workerlib import UNSUPPORTED_RC, patch_effects, worker_parser, worker_probe
from crashpoint.harness.engines.workerlib import held_lock, log_invoke_error, write_threads
from crashpoint.harness.engines.workerlib import mark_submitted as _mark_submitted, submitted as _submitted

LANGGRAPH_FILE = "langgraph.db"
#: Held while a worker sets up the saver's tables (:func:`build`).
SETUP_LOCK_FILE = "langgraph.setup.lock"
ANSWERS_FILE = "answers.json"
STEPS_FILE = "steps.log"
#: JSON lines of what the saver was handed, in order (the judge's view of LangGraph's durability, see
#: :func:`crashpoint.harness.engines.langgraph.facts`): ``{"pid", "op": "put", "thread", "step", "source",
#: "at": "call" | "end"}`` (a checkpoint: ``call`` once LangGraph called the saver's ``put``, before its crash point;
#: ``end`` once it returned) and ``{"pid", "op": "writes", "thread", "node", "task", "channels", "at"}`` (a task's
#: pending writes, ``put_writes``).
SAVER_FILE = "saver.log"
#: ``invoke(None)`` calls per thread in one recovery pass before the thread is called stuck.
MAX_INVOKES = 20
#: Characters of an engine error kept in ``threads.json``.
ERROR_CHARS = 2000


def probed_saver_class(base: type) -> type:
    """A subclass of the saver class ``base`` whose writes pass the probe (``self.crash_probe``)."""

    class Probed(base):  # type: ignore[misc, valid-type]
        crash_probe: Callable[[str], None] = staticmethod(lambda name: None)
        write_latency_s: float = 0.0
        saver_log: Path | None = None

        def _log(self, **entry: Any) -> None:
            if self.saver_log is not None:
                _append(self.saver_log, json.dumps({"pid": os.getpid(), **entry}, sort_keys=True, default=str) + "\n")

        def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
            thread, step = config['configurable'].get('thread_id'), (metadata or {}).get('step')
            where = f"{thread}@{step}"
            self._log(op="put", thread=thread, step=step, source=(metadata or {}).get("source"), at="call")
            self.crash_probe(f"before_put:{where}")
            if self.write_latency_s:
                time.sleep(self.write_latency_s)
            saved = super().put(config, checkpoint, metadata, new_versions)
            self._log(op="put", thread=thread, step=step, source=(metadata or {}).get("source"), at="end")
            self.crash_probe(f"after_put:{where}")
            return saved

        def put_writes(self, config: Any, writes: Any, task_id: str, task_path: str = "") -> Any:
            node = (task_path or "").split(",")[-1].strip() or "resume"
            thread = config['configurable'].get('thread_id')
            where = f"{thread}@{node}"
            channels = sorted({str(w[0]) for w in writes or () if isinstance(w, (tuple, list)) and w})
            self._log(op="writes", thread=thread, node=node, task=task_id, channels=channels, at="call")
            self.crash_probe(f"before_writes:{where}")
            done = super().put_writes(config, writes, task_id, task_path)
            self._log(op="writes", thread=thread, node=node, task=task_id, channels=channels, at="end")
            self.crash_probe(f"after_writes:{where}")
            return done

    Probed.__name__ = Probed.__qualname__ = f"Probed{base.__name__}"
    return Probed


class NodeProbe(BaseCallbackHandler):
    """Passes ``node:THREAD@NODE`` when a node of the graph starts (not its inner runnables), after
    appending ``PID THREAD STEP NODE`` to ``steps.log`` (where each process had got to, for the judge)."""

    def __init__(self, probe: Callable[[str], None], thread: str, steps: Path) -> None:
        self.probe, self.thread, self.steps = probe, thread, steps

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: Any, parent_run_id: Any = None,
                       tags: list[str] | None = None, metadata: dict[str, Any] | None = None, **kwargs: Any) -> None:
        node = (metadata or {}).get("langgraph_node")
        if node and kwargs.get("name") == node and any(t.startswith("graph:step:") for t in tags or ()):
            _append(self.steps, f"{os.getpid()} {self.thread} {(metadata or {}).get('langgraph_step')} {node}\n")
            self.probe(f"node:{self.thread}@{node}")


def where_am_i() -> dict[str, Any]:
    """The thread, node and task LangGraph says the calling code runs in (``None`` values outside a node)."""
    try:
        from langgraph.config import get_config

        config = get_config()
    except (ImportError, RuntimeError):
        return {}
    meta = config.get("metadata") or {}
    conf = config.get("configurable") or {}
    return {"thread": conf.get("thread_id") or meta.get("thread_id"), "node": meta.get("langgraph_node"),
            "task": conf.get("checkpoint_ns") or meta.get("langgraph_checkpoint_ns"), "step": meta.get("langgraph_step")}


def build(target: dict[str, Any], run_dir: Path, probe: Callable[[str], None]) -> tuple[Any, sqlite3.Connection]:
    """The team's graph compiled with the probed saver on ``RUN_DIR/langgraph.db``, its ``setup()`` (tables, WAL)
    done, one process at a time (an exclusive ``flock`` on ``RUN_DIR/langgraph.setup.lock``). ``SqliteSaver``
    would make its tables at its first use, inside ``invoke``: the two processes of a duplicated start do that at
    the same instant on a new file, SQLite's lock upgrade deadlocks and one of them gets ``database is locked`` at
    once (no busy wait); its invoke raised before any node ran, and the duplicate was never tested.

    Raises:
        TypeError: the entry point is neither a ``StateGraph`` nor a compiled graph; the saver class is
            not a ``BaseCheckpointSaver`` subclass.
    """
    conn = sqlite3.connect(run_dir / LANGGRAPH_FILE, check_same_thread=False)
    # No fsync: a commit is in the OS's page cache when it returns, which a SIGKILL (the fault tested here)
    # cannot take away; only a power loss could, and no run tests one.
    conn.execute("PRAGMA synchronous=OFF")
    base = SqliteSaver if target["saver"] == "sqlite" else load_object(target["saver"])
    if not (isinstance(base, type) and issubclass(base, BaseCheckpointSaver)):
        raise TypeError(f"saver {target['saver']!r} is not a BaseCheckpointSaver subclass")
    saver = probed_saver_class(base)(conn)
    setup = getattr(saver, "setup", None)
    if callable(setup):  # its tables, made by one process at a time (see the docstring)
        with held_lock(run_dir / SETUP_LOCK_FILE):
            setup()
    saver.crash_probe = probe
    saver.saver_log = run_dir / SAVER_FILE
    saver.write_latency_s = float(target.get("write_latency_ms") or 0) / 1000.0
    entry = load_object(target["entry"])
    if callable(entry) and not hasattr(entry, "compile") and not hasattr(entry, "invoke"):
        entry = entry()  # a factory: builder() -> StateGraph or compiled graph
    if hasattr(entry, "compile") and not hasattr(entry, "invoke"):
        return entry.compile(checkpointer=saver), conn
    if hasattr(entry, "invoke") and hasattr(entry, "checkpointer"):
        graph = entry.copy(update={"checkpointer": saver}) if hasattr(entry, "copy") else copy.copy(entry)
        graph.checkpointer = saver
        return graph, conn
    raise TypeError(f"entry {target['entry']!r} is {type(entry).__name__}: expected a StateGraph or a compiled graph")


def durability_options(graph: Any, mode: str) -> dict[str, Any] | None:
    """The ``invoke`` keyword arguments of durability ``mode`` on this langgraph, or ``None`` when it has no such
    mode: ``durability=`` (langgraph >= 0.6); before it, ``checkpoint_during=True`` (checkpoints written in the
    background while the next step runs: ``async``) or ``False`` (only at the end: ``exit``); no ``sync``."""
    import inspect

    params = inspect.signature(graph.invoke).parameters
    if "durability" in params:
        return {"durability": mode}
    if "checkpoint_during" in params and mode in ("async", "exit"):
        return {"checkpoint_during": mode == "async"}
    return None


#: The channel that triggers node NAME is ``branch:to:NAME`` (langgraph >= 0.3).
BRANCH = "branch:to:"


def thread_status(graph: Any, thread: str, submitted: set[str]) -> dict[str, Any]:
    """The thread's status (see the module docstring), read from the saver only."""
    config = {"configurable": {"thread_id": thread}}
    saved = graph.checkpointer.get_tuple(config)
    if saved is None:
        return {"status": "no_checkpoint" if thread in submitted else "not_submitted", "waiting": []}
    snapshot = graph.get_state(config)
    waiting = [{"node": t.name, "interrupt": getattr(i, "id", None) or getattr(i, "interrupt_id", None) or
                f"{t.id}:{n}", "value": _jsonable(i.value)}
               for t in snapshot.tasks for n, i in enumerate(t.interrupts)]
    source = (saved.metadata or {}).get("source")
    pending = bool(saved.pending_writes)
    if waiting:
        status = "waiting"
    elif source == "loop" and not snapshot.next and not pending:
        status = "finished"
    else:
        status = "unfinished"
    report = {"status": status, "waiting": waiting, "values": _jsonable(snapshot.values),
              "step": (saved.metadata or {}).get("step"), "source": source}
    channels = (saved.checkpoint or {}).get("channel_values") or {}
    gone = sorted(c[len(BRANCH):] for c in channels if c.startswith(BRANCH) and c[len(BRANCH):] not in graph.nodes)
    if status == "unfinished" and gone:  # e.g. a deploy renamed the node a thread waited in
        report["error"] = (f"the newest checkpoint triggers node(s) {', '.join(gone)} that this graph does not have; "
                           "LangGraph raised nothing and runs none of them (the thread's interrupt is dropped)")
    if status == "unfinished" and not snapshot.next:
        report["trap"] = (f"get_state().next == () although the thread has not finished (newest checkpoint: "
                          f"step {report['step']}, source {source}, {len(saved.pending_writes or ())} pending "
                          "write(s)): a recovery loop that trusts next == () drops this thread")
    return report


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=repr, sort_keys=True))


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:ERROR_CHARS]


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    parser = worker_parser("langgraph_worker", durability=("sync", "async", "exit"))
    parser.add_argument("--rendezvous", type=int, default=0, metavar="N",
                        help="one of N processes delivering one request at once: the first effect call waits until "
                             "the others are inside a step too")
    args = parser.parse_args(argv)
    run_dir = Path(args.run_dir)
    target = deployed(open_run(run_dir, args.phase), args.version)
    probe = worker_probe(args.probe, args.probe_arg)
    graph, conn = build(target, run_dir, probe)
    options = durability_options(graph, args.durability)
    if options is None:
        from importlib.metadata import version

        print(f"unsupported: durability={args.durability!r} does not exist in langgraph {version('langgraph')} "
              "(before 0.6 a graph has checkpoint_during=True, like async, or False, like exit)", flush=True)
        return UNSUPPORTED_RC
    patch_effects(target["effects"], team=target["pythonpath"], run_dir=run_dir)
    reader = sqlite3.connect(run_dir / LANGGRAPH_FILE, check_same_thread=False)

    def durable(thread: str | None) -> bool | None:
        if thread is None:
            return None
        try:
            return reader.execute("SELECT 1 FROM checkpoints WHERE thread_id=? LIMIT 1", (thread,)).fetchone() is not None
        except sqlite3.OperationalError:  # the saver has not made its tables yet: nothing is durable
            return False

    effect_api._install(EffectSession(run_dir / LEDGER_FILE, probe, where_am_i, durable, rendezvous=args.rendezvous))
    submitted = set(_submitted(run_dir))
    errors: dict[str, str] = {}

    def run(thread: str, what: Any) -> None:
        config = {"configurable": {"thread_id": thread}, "callbacks": [NodeProbe(probe, thread, run_dir / STEPS_FILE)]}
        try:
            graph.invoke(what, config, **options)
        except Exception as exc:  # noqa: BLE001 - the engine's own error is the finding
            errors[thread] = _error(exc)
            log_invoke_error(run_dir, thread, errors[thread])

    threads = [i["thread"] for i in target["inputs"]]
    todo: list[tuple[str, Any]] = []  # decided before the barrier, so that a duplicate sees what the first saw
    if args.phase == "start":
        todo = [(item["thread"], item["input"]) for item in target["inputs"]
                if item["thread"] not in submitted or item["thread"] in args.resubmit or args.duplicate]
    elif args.phase == "answer":
        for answer in json.loads((run_dir / ANSWERS_FILE).read_text()):
            status = thread_status(graph, answer["thread"], submitted)
            if answer.get("late") or any(w["interrupt"] == answer["interrupt"] for w in status["waiting"]):
                todo.append((answer["thread"], Command(resume=answer["resume"])))
    if args.barrier:
        _barrier(run_dir, args.barrier)
    for thread, what in todo:
        if args.phase == "start":
            _mark_submitted(run_dir, thread)
            submitted.add(thread)
        run(thread, what)
    traps: dict[str, str] = {}
    for thread in threads:  # every pass ends as a recovering application's would: nothing left unfinished
        for _ in range(MAX_INVOKES):
            status = thread_status(graph, thread, submitted)
            if "trap" in status:
                traps.setdefault(thread, status["trap"])
            if thread in errors or status["status"] != "unfinished":
                break
            run(thread, None)
    report = {}
    for thread in threads:
        status = thread_status(graph, thread, submitted)
        if thread in errors and status["status"] not in ("finished", "waiting"):
            status = {**status, "status": "stuck", "error": errors[thread]}
        elif thread in errors:  # the thread is fine, but an invoke of this pass raised: say so
            status = {**status, "invoke_errors": [errors[thread]]}
        if thread in traps:
            status = {**status, "trap": traps[thread]}
        report[thread] = status
    write_threads(run_dir, report)
    conn.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
