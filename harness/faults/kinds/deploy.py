"""``deploy``: a new version of the code (or of the workflow definition) while workflows run.

On a target, ``{kind: deploy, version: NAME}`` (the target file's older ``deploy: NAME``): once the run first comes
to rest with a workflow still running (waiting for a human), every later worker runs version ``NAME`` of the code (a
name in the target's ``versions``, or where its engine keeps versions), as a deploy while workflows wait does. It
changes the code, so a correct engine does not mask it: a compatible version resumes the waiting workflows, an
incompatible one may not. ``{kind: deploy, version: NAME, at: POINT}`` deploys at a crash point instead: the worker
of the old code is SIGKILLed when it passes ``POINT`` (a kill, verified as any other, before the kills a sweep adds)
and the next worker runs ``NAME``; ``at: timer_fired:WF`` is a deploy while ``WF`` sleeps on a durable timer of any
length (the old code's worker is gone when the timer fires, so the new code's takes the task and replays).

On a pack, ``{kind: deploy, after: N}``: a new definition version of the case's workflow (its version the next one)
deployed after external event ``N``, the same fault as an ``insert`` of a ``deploy`` event (which the generator
draws; this kind draws nothing for packs, so seeds keep their schedules).
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultError, FaultKind, Injection, Plan, Space, get, register


@register
class Deploy(FaultKind):
    """See the module docstring."""

    name = "deploy"
    order = 85
    summary = ("`after`: a new definition version of the case's workflow deployed after external event `after` "
               "(an `insert` of a `deploy` event)")
    target_summary = ("`version`: once workflows wait, every later worker runs this version of the code (a name in "
                      "`versions`; old spelling `deploy: NAME`)")
    columns = ("deploy",)
    subjects = ("pack", "target")

    def check_target(self, fault: Fault) -> None:
        if not isinstance(fault.get("version"), str) or not fault["version"]:
            raise FaultError(f"a target's deploy names a version of the code, got {fault.get('version')!r}",
                             ("version",))
        if "at" in fault and (not isinstance(fault["at"], str) or ":" not in fault["at"]):
            raise FaultError(f"a deploy's at names a crash point (KIND:SUBJECT), got {fault['at']!r}", ("at",))

    def apply(self, fault: Fault, plan: Plan) -> None:
        get("insert").apply({"kind": "insert", "after": int(fault.get("after", 0)),
                             "event": {"type": "deploy", "version": 0, "rename_tasks": dict(fault.get("rename_tasks")
                                                                                           or {})}}, plan)

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        if space.subject != "target" or not space.versions or not space.waits:
            return None  # a pack's deploys are drawn by insert; a target's happen only while a workflow waits
        return st.builds(lambda v: {"kind": "deploy", "version": v}, st.sampled_from(sorted(space.versions)))

    def describe(self, fault: Fault) -> str:
        if "version" in fault and fault.get("at"):
            return f"deploy version {fault['version']} at {fault['at']} (the old code's worker stopped there)"
        if "version" in fault:
            return f"deploy version {fault['version']} once workflows wait"
        return f"deploy a new definition version after external event {fault.get('after', 0)}"

    def inject(self, fault: Fault, into: Injection) -> None:
        if "version" not in fault:
            super().inject(fault, into)
        if into.deploy not in (None, fault["version"]):
            raise ValueError(f"two deploys in one case ({into.deploy}, {fault['version']}): one at most")
        into.deploy = fault["version"]
        if fault.get("at"):
            into.deploy_at = fault["at"]
            into.kills.append(fault["at"])

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("deploy", None)]
