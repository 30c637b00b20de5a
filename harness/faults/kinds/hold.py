"""``hold``: hold the worker at a crash point and deliver an external event while the step is in flight.

``{kind: hold, at: POINT, event: EVENT}`` with an event of type ``cancel``, ``approval_granted``,
``approval_denied``, ``advance_clock`` or ``redeliver``: a cancellation, an approval, a clock jump or a
late duplicate of an earlier delivery at any point.
It changes the story (a cancel, a denial), so a correct engine does not mask it.
"""

from __future__ import annotations

from typing import Any, Iterable

from crashpoint.harness.faults.kinds import Fault, FaultError, FaultKind, Injection, Plan, Space, register

#: Clock jumps the generator draws, seconds (a minute, an hour, past a day-long approval deadline).
CLOCK_JUMPS = (60.0, 3600.0, 90000.0)
#: Event types a held worker may receive.
HELD_EVENTS = ("approval_granted", "approval_denied", "cancel", "advance_clock", "redeliver")


def with_approval_id(ev: dict[str, Any], gate: dict[str, Any] | None) -> dict[str, Any]:
    """``ev`` with an ``approval_id`` (the workflow's first gate's) when it is an approval event without one."""
    if ev["type"] in ("approval_granted", "approval_denied", "approval_timeout") and "approval_id" not in ev:
        ev["approval_id"] = gate["approval_id"] if gate else "approval"
    return ev


@register
class Hold(FaultKind):
    """See the module docstring."""

    name = "hold"
    order = 30
    summary = ("`at`, `event`: hold the worker at this crash point and deliver `event` (`cancel`, "
               "`approval_granted`, `approval_denied`, `advance_clock`) while the step is in flight")
    injected = True
    columns = ("held_event",)

    def check(self, fault: Fault, tools: Iterable[str], workflow: str) -> None:
        if fault["event"].get("before_wait"):
            raise FaultError("an event held for a crash point (`at`) cannot also be `before_wait`", ("event",))

    def apply(self, fault: Fault, plan: Plan) -> None:
        plan.faults.append({**fault, "event": with_approval_id(dict(fault["event"]), plan.gate)})

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        events = [{"type": "cancel", "reason": "generated cancel"}, {"type": "approval_granted"},
                  {"type": "approval_denied"}, *({"type": "advance_clock", "seconds": s} for s in CLOCK_JUMPS)]
        return st.builds(lambda at, ev: {"kind": "hold", "at": at, "event": ev}, st.sampled_from(space.points),
                         st.sampled_from(events))

    def describe(self, fault: Fault) -> str:
        return f"{fault['event']['type']} while held at {fault['at']}"

    def inject(self, fault: Fault, into: Injection) -> None:
        into.holds.setdefault(fault["at"], []).append(fault["event"])

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("held_event", fault["at"])]
