"""LangGraph targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.engines.langgraph_worker` (it imports LangGraph; this module does
not). Supported: ``langgraph`` releases whose ``StateGraph.compile(checkpointer=...)``, ``invoke(...,
durability=...)``, ``interrupt()`` / ``Command(resume=...)`` and ``SqliteSaver(conn)`` exist (see README,
"Findings per langgraph release", for the releases tried).
"""

from __future__ import annotations

from crashpoint.versions import installed_versions as _versions

WORKER_MODULE = "crashpoint.harness.engines.langgraph_worker"
PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")


def engine_version() -> str:
    """``langgraph X, langgraph-checkpoint Y, langgraph-checkpoint-sqlite Z`` (``not installed`` for a missing one)."""
    return _versions(*PACKAGES)
