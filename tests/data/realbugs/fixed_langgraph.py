"""A *fixed build* of LangGraph, for comparison (not team code): what the engine's fix of issue 28's classes A and B
does, patched into the importing process (a worker's zygote imports the entry's module before forking).

* ``sync``: the loop waits for each task's ``put_writes`` before it goes on, so a node's pending writes are durable
  before the step's checkpoint write begins (released LangGraph, 0.6.11 to 1.2.24, submits them to its background
  pool and waits only for the step's ``put``: a kill inside that ``put`` runs a node that had returned again);
* ``async``: the loop waits for the thread's first (input) checkpoint before the first node runs (released LangGraph
  writes it in the background like every other checkpoint: a kill during the first node leaves no checkpoint at all).

Entries (``fixed_langgraph:NAME``): ``sync_refund``, ``sync_refund_nokey``, ``async_intake`` (the team graphs beside
this module),
``refund_example`` and ``refund_example_no_key`` (``examples/langgraph_refund``'s graph and its ``no_key`` variant:
put ``examples`` on the target's ``pythonpath``)."""
from __future__ import annotations

import concurrent.futures
from typing import Any

from langgraph.pregel import _loop

_put_writes = _loop.SyncPregelLoop.put_writes
_put_checkpoint = _loop.SyncPregelLoop._put_checkpoint


def put_writes(self: Any, task_id: str, writes: Any, **kw: Any) -> Any:
    if getattr(self, "durability", None) != "sync":
        return _put_writes(self, task_id, writes, **kw)
    submit, futs = self.submit, []

    def waiting_submit(fn: Any, *a: Any, **k: Any) -> Any:
        fut = submit(fn, *a, **k)
        if fn is self.checkpointer_put_writes:
            futs.append(fut)
        return fut

    self.submit = waiting_submit
    try:
        out = _put_writes(self, task_id, writes, **kw)
    finally:
        self.submit = submit
    concurrent.futures.wait(futs)
    return out


def put_checkpoint(self: Any, metadata: Any) -> Any:
    out = _put_checkpoint(self, metadata)
    if getattr(self, "durability", None) == "async" and (metadata or {}).get("source") == "input":
        fut = getattr(self, "_put_checkpoint_fut", None)
        if fut is not None:
            fut.result()
    return out


_loop.SyncPregelLoop.put_writes = put_writes
_loop.SyncPregelLoop._put_checkpoint = put_checkpoint

from sync_refund.agent import builder as sync_refund, builder_nokey as sync_refund_nokey  # noqa: E402,F401
from async_intake.agent import builder as async_intake  # noqa: E402,F401


def __getattr__(name: str) -> Any:
    if name == "refund_example":
        from langgraph_refund.graph import builder

        return builder
    if name == "refund_example_no_key":
        from langgraph_refund.variants import no_key

        return no_key
    raise AttributeError(name)
