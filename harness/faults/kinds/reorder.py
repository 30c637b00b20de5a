"""``reorder``: swap two neighbouring external events (never the start request).

``{kind: reorder, event: N}`` swaps external events ``N`` and ``N + 1`` (indices modulo the events
after the start); a no-op with fewer than two events after the start, or next to an early approval.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Plan, Space, register


@register
class Reorder(FaultKind):
    """See the module docstring."""

    name = "reorder"
    order = 50
    summary = "`event`: swap external events `event` and `event + 1` (never the start request)"

    def apply(self, fault: Fault, plan: Plan) -> None:
        external = plan.external
        if len(external) >= 3:
            i = 1 + fault["event"] % (len(external) - 2)
            if not (external[i].get("before_wait") or external[i + 1].get("before_wait")):
                external[i], external[i + 1] = external[i + 1], external[i]

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        return st.builds(lambda i: {"kind": "reorder", "event": i}, st.integers(0, max(space.n_external - 1, 0)))

    def describe(self, fault: Fault) -> str:
        return f"swap external events {fault['event']} and {fault['event'] + 1}"
