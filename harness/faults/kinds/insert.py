"""``insert``: a new external event after another one.

``{kind: insert, after: N, event: EVENT}``: an approval granted or denied (a second one has its own
idempotency key), granted before the wait (``before_wait``), timed out, a cancellation, a clock jump,
a new definition version (``deploy``; its version is the next one) or a restart. Only an inserted
``restart`` is one a correct engine masks.
"""

from __future__ import annotations

from typing import Any, Sequence

from crashpoint.harness.faults.kinds import Fault, FaultKind, Plan, Space, register
from crashpoint.harness.faults.kinds.hold import CLOCK_JUMPS, with_approval_id


@register
class Insert(FaultKind):
    """See the module docstring."""

    name = "insert"
    order = 40
    summary = ("`after`, `event`: a new external event after external event `after`: an approval granted or "
               "denied, granted before the wait (`before_wait`), timed out, a cancellation, a clock jump, a new "
               "definition version, a restart")
    masking = "only a `restart`"

    def apply(self, fault: Fault, plan: Plan) -> None:
        external = plan.external
        ev = with_approval_id(dict(fault["event"]), plan.gate)
        if ev.get("before_wait"):
            if plan.gate is not None:
                external.insert(1, ev)
            return
        after = fault["after"] % len(external)
        while after + 1 < len(external) and external[after + 1].get("before_wait"):
            after += 1  # early decisions stay right after the start request
        if ev["type"] == "deploy":
            ev["version"] = max([plan.workflow["version"]] + [e["version"] for e in external
                                                               if e["type"] == "deploy"]) + 1
            later = [e for e in external[after + 1:] if e["type"] == "deploy"]
            if later:  # versions must grow along the case: put it after the last deploy
                after = external.index(later[-1])
        external.insert(after + 1, ev)

    def is_masked(self, fault: Fault, schedule: Sequence[Fault], case: Any, pack: Any) -> bool:
        return fault["event"]["type"] == "restart"

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        events = [{"type": "approval_granted"}, {"type": "approval_denied"}, {"type": "approval_timeout"},
                  {"type": "approval_granted", "before_wait": True}, {"type": "approval_denied", "before_wait": True},
                  {"type": "cancel", "reason": "generated cancel"},
                  *({"type": "advance_clock", "seconds": s} for s in CLOCK_JUMPS),
                  {"type": "deploy", "version": 0, "rename_tasks": {}}, {"type": "restart"}]
        return st.builds(lambda after, ev: {"kind": "insert", "after": after, "event": ev},
                         st.integers(0, space.n_external - 1), st.sampled_from(events))

    def describe(self, fault: Fault) -> str:
        extra = " before the wait" if fault["event"].get("before_wait") else ""
        return f"insert {fault['event']['type']}{extra} after external event {fault['after']}"
