"""``zombie``: a second live worker on the workflow while the first one is held at a crash point.

``{kind: zombie, at: POINT}``: the worker is held at ``POINT`` (mid-step: after an effect, before
its checkpoint) while a second worker process starts on the same files and runs until it exits;
then the first goes on. The first is a zombie, or a slow old worker a new one thinks is gone: an
engine that ignores its lease runs the step twice at once. A correct engine masks it (the second
worker leaves a workflow another live worker holds; issue 15, and the DBOS issue's "several
workers at once").
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Injection, Space, register

#: The event a hold of this kind delivers: the driver starts one more worker process meanwhile.
WORKER_EVENT = {"type": "worker"}


@register
class Zombie(FaultKind):
    """See the module docstring."""

    name = "zombie"
    order = 75
    summary = ("`at`: hold the worker at this crash point while a second worker process runs on the same "
               "files to its end (a zombie or slow old worker next to a new one), then let the first go on")
    masked = True
    injected = True
    columns = ("second_worker",)

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        return st.builds(lambda at: {"kind": "zombie", "at": at}, st.sampled_from(space.points))

    def describe(self, fault: Fault) -> str:
        return f"a second worker runs while the first is held at {fault['at']}"

    def inject(self, fault: Fault, into: Injection) -> None:
        into.holds.setdefault(fault["at"], []).append(dict(WORKER_EVENT))

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("second_worker", fault["at"])]
