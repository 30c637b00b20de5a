"""Fault schedules as data: a list of faults with their positions, applied to a case.

A fault schedule is what the generator (:mod:`crashpoint.harness.run.schedule_search`) draws and
shrinks, and what a repro case file records. Each fault is a JSON-able dict with a ``kind``,
one of the registered fault kinds of :mod:`crashpoint.harness.faults.kinds` (one module each:
``kill``, ``hold``, ``duplicate``, ``reorder``, ``insert``, ``tool``, ...; README's "Fault kinds"
table lists them with their fields), spelled the same in a case file's ``faults``.

Indices are taken modulo the current number of external events, and faults apply in
order, so every schedule is valid for every case (a fault that cannot apply, such as a
reorder with one event, is a no-op). The result of :func:`apply` is an ordinary case:
the faults the driver injects (kills, holds, tool faults: kinds with ``injected``) are added
after the case's own ``faults`` (a case's own hold-cancel is still delivered when a generated
kill lands before it), the others rewrite its ``events``.

Faults the engine must **mask** (kills, duplicate deliveries, restarts, transient tool faults
within the task's retry budget: each kind's ``is_masked``) keep the case's expectations, which
were written for the case with its own faults. When the case's own faults are masked too (or it
has none), the result also gets ``like_fault_free`` (the run must end like the same case without
any faults); a case with a fault of its own that changes the story (a held cancel) does not, since
without its faults it would end differently. Any other generated fault changes the story (a
cancellation, a denial, a fatal error), so the case keeps only the invariants every run must
satisfy: the side-effect and trace oracles, which need no expectation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from typing import Any, Sequence

from crashpoint.harness.faults import kinds as registry
from crashpoint.harness.faults.kinds import Fault, Plan
from crashpoint.harness.faults.kinds.duplicate import REDELIVERABLE
from crashpoint.harness.faults.kinds.kill import next_pass
from crashpoint.harness.faults.kinds.tool import OUTCOMES as TOOL_OUTCOMES, RETRY_MASKED, TOOL_EVENTS
from crashpoint.harness.load.loader import Case, Pack, first_gate

#: The registered fault kinds, in order.
KINDS = registry.names()
#: Fault kinds a correct engine hides completely: the run must end as without them.
MASKED = frozenset(k.name for k in registry.all_kinds() if k.masked)

__all__ = ["KINDS", "MASKED", "REDELIVERABLE", "RETRY_MASKED", "TOOL_OUTCOMES", "apply", "case_data", "describe",
           "is_masked", "next_pass", "schedule_id"]


def is_masked(schedule: Sequence[Fault], case: Case | None = None, pack: Pack | None = None) -> bool:
    """``True`` when every fault of ``schedule`` is one a correct engine must hide (each kind's
    ``is_masked``): kills, duplicate deliveries, inserted restarts, and (given ``case`` and ``pack``)
    transient tool faults within the retry budget."""
    return all(registry.of(f).is_masked(f, schedule, case, pack) for f in schedule)


def schedule_id(schedule: Sequence[Fault]) -> str:
    """A short stable id of a schedule (8 hex digits of the SHA-256 of its JSON)."""
    return hashlib.sha256(json.dumps(list(schedule), sort_keys=True).encode()).hexdigest()[:8]


def describe(fault: Fault) -> str:
    """One fault as a short phrase: ``kill at after_checkpoint:refund_draft``."""
    return registry.describe(fault)


def _split(case: Case) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools = [dict(e) for e in case.events if e["type"] in TOOL_EVENTS]
    external = [dict(e) for e in case.events if e["type"] not in TOOL_EVENTS]
    if not external or external[0]["type"] != "start":
        external.insert(0, {"type": "start", "deliveries": 1})
    return tools, external


def apply(case: Case, pack: Pack, schedule: Sequence[Fault], *, case_id: str | None = None) -> Case:
    """The case ``case`` with ``schedule`` applied (see the module docstring).

    Returns a new :class:`Case` (``case`` is not changed), tagged ``generated``, with the same
    ``case_id`` (so the same workflow id) unless ``case_id`` is given, and the input the base case
    runs with written out (a generated input included); its ``path`` stays the base case's. Its
    ``faults`` are the case's own, then the injected ones of ``schedule``.

    Raises:
        ValueError: a fault of unknown ``kind`` or ``outcome``.
    """
    tools, external = _split(case)
    wf = pack.workflows[case.workflow]
    plan = Plan(tools, external, [dict(f) for f in case.faults], wf, first_gate(wf))
    for fault in schedule:
        registry.of(fault).apply(fault, plan)
    faults = plan.faults
    if len(external) == 1 and external[0] == {"type": "start", "deliveries": 1}:
        external = []  # the implicit start stays implicit
    masked = is_masked(schedule, case, pack)
    expected = dict(case.expected) if masked else {}
    expected.pop("like_fault_free", None)
    if masked and faults and is_masked(case.faults, case, pack):
        expected["like_fault_free"] = True
    events = external[:1] + tools + external[1:] if external else tools
    workflow_input = case.input or pack.workflow_input(case.workflow, seed=zlib.crc32(case.case_id.encode()))
    return dataclasses.replace(
        case, case_id=case_id or case.case_id, events=events, input=workflow_input,
        faults=faults, expected=expected, tags=tuple(dict.fromkeys((*case.tags, "generated"))),
        line_of={})


def case_data(case: Case, *, schedule: Sequence[Fault] = (), note: str = "") -> dict[str, Any]:
    """The case as data for a case file (:meth:`~crashpoint.harness.load.loader.Case.to_data`), with
    ``note`` as its description (default: its own) and the schedule that made it appended to it."""
    description = note or case.description
    if schedule:
        description = (description + "\n" if description else "") + "Fault schedule: " + \
            "; ".join(describe(f) for f in schedule)
    return dataclasses.replace(case, description=description).to_data()
