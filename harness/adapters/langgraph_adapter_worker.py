"""LangGraph worker: run the pack's workflows as a LangGraph graph checkpointed by ``SqliteSaver``.

``python -m crashpoint.harness.adapters.langgraph_adapter_worker --run-dir DIR --world SPEC --probe SPEC
--probe-arg ARG --durability sync|async|exit``

The graph has one node, ``advance``, that loops on itself: each run of it replays the
interpreter over the answers stored in the thread's state (``history``), then does the next
request: a :class:`~crashpoint.harness.adapters.interpreter.Step` (tool call) or, for a
:class:`~crashpoint.harness.adapters.interpreter.Receive`, ``interrupt()``, resumed with
``Command(resume=message)``. One node run is one superstep, so one LangGraph checkpoint per step.

Crash points declared by this adapter come from a wrapper around the checkpointer: the commit of
a step (its trace events, such as ``checkpoint NAME``) is written only once ``SqliteSaver.put`` has
stored the checkpoint that holds its answer, between ``before_checkpoint:NAME`` and
``after_checkpoint:NAME``. With ``durability="async"`` LangGraph writes checkpoints from a
background thread while the next node already runs; the harness's kills show what that loses.

LangGraph recovers nothing by itself: this worker calls ``invoke`` for every unfinished thread
(never trusting ``get_state().next == ()`` to mean finished: the state's ``outcome`` says so).
Exit 0 once every workflow is finished or waits for a message that has not arrived.
"""

from __future__ import annotations

import operator
import os
import sqlite3
import sys
import time
from pathlib import Path
from typing import Annotated, Any, Callable, TypedDict

from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import END, StateGraph
from langgraph.types import Command, interrupt

from crashpoint.harness.adapters.interpreter import Commit, Receive, Step, interpret
from crashpoint.harness.adapters.runtime import (AdapterStore, StepRunner, due_timeout, open_probe, open_world,
                                                 worker_arguments)

LANGGRAPH_FILE = "langgraph.db"
#: invoke() calls per workflow in one worker before it gives up (a loop that makes no progress).
MAX_INVOKES = 200


class State(TypedDict, total=False):
    """The thread's state: the run's inputs, the interpreter's answers so far, the last commit, the outcome."""

    wid: str
    definition: dict[str, Any]
    input: dict[str, Any]
    initial_step: str | None
    history: Annotated[list[Any], operator.add]
    commit: dict[str, Any] | None
    outcome: dict[str, Any] | None


class TracingSaver(SqliteSaver):
    """``SqliteSaver`` that writes a step's commit (trace events) after the checkpoint holding it is stored,
    between the probe's ``before_checkpoint:NAME`` and ``after_checkpoint:NAME``."""

    def __init__(self, conn: sqlite3.Connection, store: AdapterStore, probe: Callable[[str], None],
                 latency_s: float = 0.0) -> None:
        super().__init__(conn)
        self.store, self.probe, self.latency_s = store, probe, latency_s

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        """See ``SqliteSaver.put``; the commit rides on it."""
        commit = (checkpoint.get("channel_values") or {}).get("commit")
        wid = config["configurable"]["thread_id"]
        fresh = bool(commit) and not self.store.db.execute(
            "SELECT 1 FROM commits WHERE wid=? AND n=?", (wid, commit["n"])).fetchone()
        if fresh:
            self.probe(f"before_checkpoint:{commit['name']}")
        if self.latency_s:
            time.sleep(self.latency_s)  # a slow disk: --write-latency-ms
        saved = super().put(config, checkpoint, metadata, new_versions)
        if fresh and self.store.commit(wid, commit["n"], commit["events"]):
            self.probe(f"after_checkpoint:{commit['name']}")
        return saved


def build_graph(runner: StepRunner, saver: SqliteSaver) -> Any:
    """The one-node graph described in the module docstring, compiled with ``saver``."""

    def advance(state: State) -> dict[str, Any]:
        history = state.get("history") or []
        program = interpret(state["wid"], state["definition"], state["input"], state.get("initial_step"))
        request = next(program)
        for answer in history:
            request = program.send(answer)
        if isinstance(request, Receive):
            answer = interrupt({"approval_id": request.approval_id, "deadline": request.deadline})
        elif isinstance(request, Step):
            answer = runner.step(state["wid"], {"name": request.name, "events": request.events,
                                                "call": request.call, "probe": request.probe})
        else:
            raise RuntimeError(f"interpreter asked for {request!r} where a step or a wait belongs")
        commit = program.send(answer)
        if not isinstance(commit, Commit):
            raise RuntimeError(f"interpreter asked for {commit!r} where a commit belongs")
        outcome = None
        try:
            program.send(None)
        except StopIteration as stop:
            outcome = stop.value
        n = (len(history) + 2) // 2
        return {"history": [answer, None], "outcome": outcome,
                "commit": {"n": n, "name": commit.name, "events": commit.events}}

    graph = StateGraph(State)
    graph.add_node("advance", advance)
    graph.set_entry_point("advance")
    graph.add_conditional_edges("advance", lambda s: END if s.get("outcome") else "advance")
    return graph.compile(checkpointer=saver)


def _waiting(snapshot: Any) -> bool:
    return bool(getattr(snapshot, "interrupts", ())) or any(t.interrupts for t in snapshot.tasks)


def _stored_outcome(graph: Any, config: dict[str, Any]) -> Any:
    """The outcome in the newest *stored* checkpoint (``get_state`` also shows a killed step's pending
    writes, which LangGraph has not made a checkpoint of yet)."""
    saved = graph.checkpointer.get_tuple(config)
    return saved and (saved.checkpoint.get("channel_values") or {}).get("outcome")


def drive(graph: Any, store: AdapterStore, clock: Any, start: dict[str, Any], durability: str) -> None:
    """Bring one workflow to its end or to a wait nothing can answer yet.

    Raises:
        RuntimeError: :data:`MAX_INVOKES` invocations without reaching either.
    """
    wid = start["wid"]
    config = {"configurable": {"thread_id": wid}, "recursion_limit": 100_000}
    saved = graph.checkpointer.get_tuple(config)
    commit = saved and (saved.checkpoint.get("channel_values") or {}).get("commit")
    if commit:  # stored, but the worker died before tracing it: the checkpoint is durable, so trace it now
        store.commit(wid, commit["n"], commit["events"])
    snapshot = graph.get_state(config)
    if not snapshot.values:  # no checkpoint survived (or none was ever written): start it
        graph.invoke({"wid": wid, "definition": start["definition"], "input": start["input"],
                      "initial_step": start.get("initial_step"), "history": [], "commit": None,
                      "outcome": None}, config, durability=durability)
    for _ in range(MAX_INVOKES):
        snapshot = graph.get_state(config)
        if _stored_outcome(graph, config):
            return
        if _waiting(snapshot):
            consumed = {h.get("key") for h in snapshot.values.get("history") or [] if isinstance(h, dict)}
            message = next((m for m in store.events_for(wid) if m["key"] not in consumed), None)
            message = message or due_timeout(store, wid, clock.now())
            if message is None:
                return
            graph.invoke(Command(resume=message), config, durability=durability)
        else:
            graph.invoke(None, config, durability=durability)
    raise RuntimeError(f"workflow {wid}: {MAX_INVOKES} invocations without finishing or waiting")


def main(argv: list[str] | None = None) -> int:
    """One worker pass over every workflow of the run (see the module docstring)."""
    def options(parser: Any) -> None:
        parser.add_argument("--durability", choices=("sync", "async", "exit"), default="sync")
        parser.add_argument("--write-latency-ms", type=int, default=0)

    args = worker_arguments(argv, options)
    probe = open_probe(args.probe, args.probe_arg)
    _tools, clock = open_world(args.world, args.run_dir, probe)
    store = AdapterStore(args.run_dir)
    conn = sqlite3.connect(Path(args.run_dir) / LANGGRAPH_FILE, check_same_thread=False)
    saver = TracingSaver(conn, store, probe, args.write_latency_ms / 1000)
    runner = StepRunner(store, lambda: open_world(args.world, args.run_dir, probe), probe)
    graph = build_graph(runner, saver)
    for start in store.messages(kind="start"):
        runner.resumed(start["wid"], f"langgraph-{os.getpid()}")
        drive(graph, store, clock, start, args.durability)
    return 0


if __name__ == "__main__":
    sys.exit(main())
