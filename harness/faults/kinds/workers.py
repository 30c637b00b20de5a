"""``workers``: several worker processes recover at once after a kill.

``{kind: workers, count: N}`` (2-4): after every kill of the run, ``N`` workers start on the same
files at the same time instead of one (a deployment whose replicas all restart, or a supervisor
that starts a worker per host). Combined with kills, it is "several workers recovering at once".
A correct engine masks it: one of them runs each workflow, the others leave it alone.

On a target (the target file's older ``workers: K``), each of the K workers has an identity of its own (a DBOS
executor id) and they meet at a barrier; the case's ``recovery`` says how they recover the dead one's work. It needs
an engine whose workers have identities (:attr:`~crashpoint.harness.engines.base.Engine.worker_identities`).
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Injection, Space, register

#: Workers started at once at the most (each is a real process; the machine has few cores).
MAX_TOGETHER = 4


@register
class Workers(FaultKind):
    """See the module docstring."""

    name = "workers"
    order = 80
    summary = "`count` (2-4): after every kill of the run, `count` worker processes recover at once instead of one"
    masked = True
    injected = True
    columns = ("workers_at_once",)
    subjects = ("pack", "target")
    needs = ("worker_identities",)
    target_summary = ("each worker with its own identity, the case's `recovery` saying how (old spelling "
                      "`workers: K`); needs an engine whose workers have identities")

    def normalize(self, fault: Fault) -> Fault:
        return {**fault, "count": max(2, min(MAX_TOGETHER, int(fault.get("count", 2))))}

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        return st.builds(lambda n: {"kind": "workers", "count": n}, st.integers(2, 3))

    def describe(self, fault: Fault) -> str:
        return f"{fault['count']} workers recover at once after each kill"

    def inject(self, fault: Fault, into: Injection) -> None:
        into.together = max(into.together, fault["count"])

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("workers_at_once", None)]
