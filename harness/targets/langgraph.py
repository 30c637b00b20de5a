"""LangGraph targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.targets.langgraph_worker` (it imports LangGraph; this module does
not). Supported: ``langgraph`` releases whose ``StateGraph.compile(checkpointer=...)``, ``invoke(...,
durability=...)``, ``interrupt()`` / ``Command(resume=...)`` and ``SqliteSaver(conn)`` exist (see README,
"Findings per langgraph release", for the releases tried).
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

WORKER_MODULE = "crashpoint.harness.targets.langgraph_worker"
PACKAGES = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")


def engine_version() -> str:
    """``langgraph X, langgraph-checkpoint Y, langgraph-checkpoint-sqlite Z`` (``not installed`` for a missing one)."""
    found = []
    for package in PACKAGES:
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} (not installed)")
    return ", ".join(found)
