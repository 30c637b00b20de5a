"""LangGraph adapters (``pip install 'crashpoint[langgraph]'``): one per durability mode.

``crashpoint certify --adapter crashpoint.harness.adapters.langgraph_adapter:LangGraphSync`` (or
``LangGraphAsync``, LangGraph's default mode). The worker is
:mod:`crashpoint.harness.adapters.langgraph_adapter_worker`; the harness side only touches ``adapter.db``.
"""

from __future__ import annotations

from crashpoint.versions import installed_versions as _versions
from crashpoint.harness.adapters.runtime import InterpretedAdapter


class LangGraphAdapter(InterpretedAdapter):
    """LangGraph + ``SqliteSaver`` with ``durability`` ``"sync"``, ``"async"`` or ``"exit"``.

    Args:
        durability: passed to every ``invoke`` of the worker.
        write_latency_ms: milliseconds each checkpoint write waits before it is stored (a slow disk; ``0``: none).
            Under ``async`` the write runs in LangGraph's background thread, so the next step begins while it
            waits: the window in which a kill loses the previous checkpoint is at least this wide, on a quiet
            machine too.

    Raises:
        ValueError: an unknown durability mode, or a negative latency.
    """

    worker_module = "crashpoint.harness.adapters.langgraph_adapter_worker"

    def __init__(self, durability: str = "sync", write_latency_ms: int = 0) -> None:
        if durability not in ("sync", "async", "exit"):
            raise ValueError(f"durability must be sync, async or exit, got {durability!r}")
        if write_latency_ms < 0:
            raise ValueError(f"write_latency_ms must be >= 0, got {write_latency_ms!r}")
        self.durability = durability
        self.name = f"langgraph-{durability}"
        self.worker_args = ("--durability", durability, "--write-latency-ms", str(int(write_latency_ms)))

    def version(self) -> str:
        """``langgraph X, langgraph-checkpoint-sqlite Y``."""
        return _versions("langgraph", "langgraph-checkpoint-sqlite")


class LangGraphSync(LangGraphAdapter):
    """LangGraph with ``durability="sync"`` (each checkpoint stored before the next step starts)."""

    def __init__(self) -> None:
        super().__init__("sync")


class LangGraphAsync(LangGraphAdapter):
    """LangGraph with ``durability="async"``, its default (checkpoints stored while the next step runs)."""

    #: Found by ``crashpoint certify`` (README, "Certifying an engine"); the verdicts stay failed.
    known_findings = {
        "resume": "langgraph 1.2.24 / checkpoint-sqlite 3.1.2, durability='async': a kill as the next step "
                  "begins loses the previous step's checkpoint; the resumed thread runs that step again "
                  "(its effect stays single only thanks to the stable idempotency key)",
    }

    def __init__(self) -> None:
        super().__init__("async")
