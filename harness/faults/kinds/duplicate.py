"""``duplicate``: deliver one external event several times with the same idempotency key.

``{kind: duplicate, event: N, times: T}``: external event ``N`` (0 is the start request; taken modulo
the number of external events) goes out ``T`` times, back to back. Duplicates also come late (issue
15): with ``after: M`` the ``T - 1`` copies go out after external event ``M`` (a ``redeliver`` event;
never before the original), with ``at: POINT`` while a worker is held at that crash point (a ``hold``
of a ``redeliver`` event): a start request retried after the run began, an approval or a cancel
redelivered mid-step. A correct engine masks every form.

On a target, ``{kind: duplicate, event: start | answer}`` (the target file's older ``duplicate: start | answer``):
the first start request, or the first human answer, is delivered twice **at once**, by a second worker process
started beside the first at a barrier (a client retrying a slow request, a reviewer clicking twice); ``times`` is 2.
A correct target masks it: one of the two runs the step, the other finds it done.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultError, FaultKind, Injection, Plan, Space, register

#: External event types that carry ``deliveries``.
REDELIVERABLE = frozenset({"start", "approval_granted", "approval_denied", "cancel"})
#: The requests of a target that a duplicate delivers twice at once (the driver's phases).
TARGET_REQUESTS = ("start", "answer")


@register
class Duplicate(FaultKind):
    """See the module docstring."""

    name = "duplicate"
    order = 20
    summary = ("`event` (index among the external events; 0 is the start request), `times`: deliver it "
               "`times` times with the same idempotency key, back to back; with `after: M` the copies go out "
               "after external event `M`, with `at: POINT` while a worker is held there (late duplicates)")
    masked = True
    columns = ("duplicate_delivery",)
    subjects = ("pack", "target")
    target_summary = ("`event`: `start` or `answer`, the first start request or human answer delivered twice at "
                      "once by two live processes (old spelling `duplicate: start`)")

    def normalize(self, fault: Fault) -> Fault:
        if isinstance(fault.get("event"), str):  # a target's request: twice, at once
            return {**fault, "times": 2}
        return dict(fault)

    def check_target(self, fault: Fault) -> None:
        if fault.get("event") not in TARGET_REQUESTS:
            raise FaultError(f"a target's duplicate delivers one of {', '.join(TARGET_REQUESTS)} twice at once, got "
                             f"{fault.get('event')!r}", ("event",))
        if "at" in fault or "after" in fault:
            raise FaultError("a target's duplicate is delivered at once, beside the first (no at or after)",
                             ("at" if "at" in fault else "after",))

    def inject(self, fault: Fault, into: Injection) -> None:
        if not isinstance(fault.get("event"), str):
            super().inject(fault, into)
        if fault["event"] not in into.duplicates:
            into.duplicates.append(fault["event"])

    def apply(self, fault: Fault, plan: Plan) -> None:
        n = fault["event"] % len(plan.external)
        ev = plan.external[n]
        if ev["type"] not in REDELIVERABLE:
            return
        if ev.get("before_wait"):  # early decisions go out with the start request: step 0
            n = 0 if ev is plan.external[0] else n
        copy = {"type": "redeliver", "of": n, "deliveries": fault["times"] - 1}
        if "at" in fault:
            plan.faults.append({"kind": "hold", "at": fault["at"], "event": copy})
        elif "after" in fault:
            after = max(fault["after"] % len(plan.external), n)
            while after + 1 < len(plan.external) and plan.external[after + 1].get("before_wait"):
                after += 1  # early decisions stay right after the start request
            plan.external.insert(after + 1, copy)
        else:
            ev["deliveries"] = ev.get("deliveries", 1) + fault["times"] - 1

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        if space.subject == "target":
            requests = [r for r in TARGET_REQUESTS if r in space.requests]
            return st.builds(lambda r: {"kind": "duplicate", "event": r, "times": 2},
                             st.sampled_from(requests)) if requests else None
        events, times = st.integers(0, space.n_external - 1), st.integers(2, 3)
        return st.one_of(
            st.builds(lambda i, n: {"kind": "duplicate", "event": i, "times": n}, events, times),
            st.builds(lambda i, n, m: {"kind": "duplicate", "event": i, "times": n, "after": m}, events, times,
                      st.integers(0, space.n_external - 1)),
            st.builds(lambda i, n, p: {"kind": "duplicate", "event": i, "times": n, "at": p}, events, times,
                      st.sampled_from(space.points)))

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("duplicate_delivery", None)]

    def describe(self, fault: Fault) -> str:
        if isinstance(fault.get("event"), str):
            which = "start request" if fault["event"] == "start" else "human answer"
            return f"deliver the first {which} twice at once"
        if "at" in fault:
            return f"deliver external event {fault['event']} again x{fault['times'] - 1} while held at {fault['at']}"
        if "after" in fault:
            return f"deliver external event {fault['event']} again x{fault['times'] - 1} after external event " \
                   f"{fault['after']}"
        return f"deliver external event {fault['event']} x{fault['times']}"


def event_cells(events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Coverage cells of a case's events delivered more than once (back to back, or again later)."""
    return [("duplicate_delivery", None) for ev in events if ev.get("deliveries", 1) > 1 or ev["type"] == "redeliver"]
