"""``kill``: SIGKILL the worker when it passes a crash point; the recovering worker may be killed again.

``{kind: kill, at: POINT, twice?: true}``. Several kills of a case fire one after the other, each
during the recovery from the one before (a crash during recovery); ``twice`` kills again when the
recovering worker passes the same point (``A`` then ``A#2``). A correct engine masks every kill.

On a target the points are those its golden run passed (the engine's and the effects'); a case's kills fire before
the kill a sweep adds at each crash point (which then happens during the recovery from them).
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Injection, Space, register

#: The kind part of a crash point id (``after_checkpoint`` of ``after_checkpoint:refund_draft``)
#: that has a coverage column of its own.
POINT_KINDS = ("before_effect", "after_effect", "before_checkpoint", "after_checkpoint", "approval_request")


def next_pass(point: str) -> str:
    """The id of the next pass of a crash point: ``A`` -> ``A#2``, ``A#2`` -> ``A#3``."""
    name, _, n = point.partition("#")
    return f"{name}#{int(n or 1) + 1}"


def point_cells(points: list[str]) -> list[tuple[str, str | None]]:
    """Coverage cells of a crash schedule (the sweep's ``A`` or ``A >> B``): the first kill by the kind
    of its point, a second one as ``kill@during_recovery``."""
    if not points:
        return []
    out: list[tuple[str, str | None]] = [(f"kill@{points[0].split(':', 1)[0]}", points[0])]
    if len(points) > 1:
        out.append(("kill@during_recovery", points[1]))
    return out


@register
class Kill(FaultKind):
    """See the module docstring."""

    name = "kill"
    order = 10
    summary = ("`at`: SIGKILL the worker at this crash point; several kills fire in turn, each during the "
               "recovery from the one before; `twice`: kill again at the point's next pass (`A`, then `A#2`)")
    masked = True
    injected = True
    columns = tuple(f"kill@{k}" for k in POINT_KINDS) + ("kill@during_recovery",)
    subjects = ("pack", "target")

    def strategy(self, space: Space) -> Any:
        """A kill at one of ``space.points``; on a target, half the draws are at the points just after its effect
        calls (``after_effect``: applied, not yet recorded by the engine), where a repeated side effect comes from:
        drawn evenly over its 40-odd points, a 25-schedule search of the LangGraph example's unkeyed variant missed its
        double refund 1 time in 4; with half the draws around the calls (``before_effect`` too) it still missed in a
        CI run on two processes (the points' order, and so what a seed draws, varied with thread timing: a target's
        space lists them sorted since)."""
        from hypothesis import strategies as st

        points = st.sampled_from(space.points)
        around = [p for p in space.points if p.startswith("after_effect:")]
        if space.subject == "target" and around:
            points = st.one_of(st.sampled_from(around), points)
        return st.builds(lambda at, twice: {"kind": "kill", "at": at, **({"twice": True} if twice else {})},
                         points, st.booleans())

    def describe(self, fault: Fault) -> str:
        return f"kill at {fault['at']}" + (f", then at {next_pass(fault['at'])}" if fault.get("twice") else "")

    def inject(self, fault: Fault, into: Injection) -> None:
        into.kills.append(fault["at"])
        if fault.get("twice"):  # and again when the recovering worker passes the same point
            into.kills.append(next_pass(fault["at"]))

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return point_cells([fault["at"]] + ([next_pass(fault["at"])] if fault.get("twice") else []))
