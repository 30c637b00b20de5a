"""LangGraph targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.engines.langgraph_worker` (it imports LangGraph; this module does
not). Supported: ``langgraph`` releases whose ``StateGraph.compile(checkpointer=...)``, ``invoke(...,
durability=...)``, ``interrupt()`` / ``Command(resume=...)`` and ``SqliteSaver(conn)`` exist (see README,
"Findings per langgraph release", for the releases tried). A thread's state is the saver's checkpoints in the run
folder; no server, no worker identity.
"""

from __future__ import annotations

from typing import ClassVar

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine


class LangGraph(Engine):
    """LangGraph: checkpoints written by a saver (SQLite in the run folder) after each superstep."""

    name: ClassVar[str] = "langgraph"
    title: ClassVar[str] = "LangGraph"
    worker_module: ClassVar[str] = "crashpoint.harness.engines.langgraph_worker"
    packages: ClassVar[tuple[str, ...]] = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")
    order: ClassVar[int] = 10
    default: ClassVar[bool] = True
    durability_modes: ClassVar[tuple[str, ...]] = ("sync", "async", "exit")
    #: A node's start, the team's effects, the saver's checkpoint write and its pending writes.
    recovery_kinds: ClassVar[tuple[str, ...]] = ("node:", *EFFECT_KINDS, "before_put:", "before_writes:")
    #: A checkpoint write comes between supersteps: its id (numbered by occurrence) is the same in every run.
    pair_kinds: ClassVar[tuple[str, ...]] = ("before_put:", "after_put:")
    #: Two invocations of one thread are not serialised by LangGraph: the worker holds them together in a step.
    rendezvous: ClassVar[bool] = True
