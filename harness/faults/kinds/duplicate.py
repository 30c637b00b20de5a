"""``duplicate``: deliver one external event several times with the same idempotency key.

``{kind: duplicate, event: N, times: T}``: external event ``N`` (0 is the start request; taken modulo
the number of external events) goes out ``T`` times. A correct engine masks it.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Plan, Space, register

#: External event types that carry ``deliveries``.
REDELIVERABLE = frozenset({"start", "approval_granted", "approval_denied", "cancel"})


@register
class Duplicate(FaultKind):
    """See the module docstring."""

    name = "duplicate"
    order = 20
    summary = ("`event` (index among the external events; 0 is the start request), `times`: deliver it "
               "`times` times with the same idempotency key")
    masked = True
    columns = ("duplicate_delivery",)

    def apply(self, fault: Fault, plan: Plan) -> None:
        ev = plan.external[fault["event"] % len(plan.external)]
        if ev["type"] in REDELIVERABLE:
            ev["deliveries"] = ev.get("deliveries", 1) + fault["times"] - 1

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        return st.builds(lambda i, n: {"kind": "duplicate", "event": i, "times": n},
                         st.integers(0, space.n_external - 1), st.integers(2, 3))

    def describe(self, fault: Fault) -> str:
        return f"deliver external event {fault['event']} x{fault['times']}"


def event_cells(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Coverage cells of a case's events delivered more than once."""
    return [("duplicate_delivery", None) for ev in events if ev.get("deliveries", 1) > 1]
