"""Fault schedules as data: a list of faults with their positions, applied to a case.

A fault schedule is what the generator (:mod:`crashpoint.harness.faults.generate`) draws and
shrinks, and what a repro case file records. Each fault is a JSON-able dict with a
``kind``:

=============  ==========================================================================
kind           fields and meaning
=============  ==========================================================================
``kill``       ``at``: SIGKILL the worker at this crash point id; a second kill fires
               during the recovery from the first (crash during recovery); ``twice``: kill
               again when the recovering worker passes the same point (``A`` then ``A#2``)
``hold``       ``at``, ``event``: hold the worker at this crash point and deliver ``event``
               (``cancel``, ``approval_granted``, ``approval_denied``, ``advance_clock``)
               while the step is in flight: a cancellation or an approval at any point
``duplicate``  ``event`` (index among the external events; 0 is the start request),
               ``times``: deliver it ``times`` times with the same idempotency key
``reorder``    ``event``: swap external events ``event`` and ``event + 1`` (never the start)
``insert``     ``after``, ``event``: a new external event after external event ``after``:
               an approval granted or denied (a second one has its own idempotency key),
               granted before the wait (``before_wait``), timed out, granted after its
               timeout, a cancellation, a clock jump, a new definition version, a restart
``tool``       ``tool``, ``call`` (1-based call number of that tool), ``outcome``
               (``retryable``, ``fatal``, ``timeout``, ``lost_response``, ``slow``),
               ``times``, ``seconds`` (``slow`` only): a tool fault of the case's ``faults``
=============  ==========================================================================

Indices are taken modulo the current number of external events, and faults apply in
order, so every schedule is valid for every case (a fault that cannot apply, such as a
reorder with one event, is a no-op). The result of :func:`apply` is an ordinary case:
kills, holds and tool faults become its ``faults`` field, everything else its ``events``.

Faults the engine must **mask** (kills, duplicate deliveries, restarts: :data:`MASKED`, and
transient tool faults within the task's retry budget: see :func:`is_masked`) keep the case's expectations and add ``like_fault_free`` (the run must end like the same
case without its faults). Any other fault changes the story (a cancellation, a denial, a
fatal error), so the case keeps only the invariants every run must satisfy: the side-effect
and trace oracles, which need no expectation.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import zlib
from typing import Any, Sequence

from crashpoint.fakes.data import generated_input
from crashpoint.harness.run.driver import TOOL_EVENTS
from crashpoint.harness.load.loader import Case, Pack, first_gate

KINDS = ("kill", "hold", "duplicate", "reorder", "insert", "tool")
#: Fault kinds a correct engine hides completely: the run must end as without them.
MASKED = frozenset({"kill", "duplicate"})
#: External event types that carry ``deliveries``.
REDELIVERABLE = frozenset({"start", "approval_granted", "approval_denied", "cancel"})
TOOL_OUTCOMES = ("retryable", "fatal", "timeout", "lost_response", "slow")

Fault = dict[str, Any]


#: Tool fault outcomes a retry hides: nothing applied, or applied with the answer lost (same key).
RETRY_MASKED = frozenset({"retryable", "timeout", "lost_response"})


def is_masked(schedule: Sequence[Fault], case: Case | None = None, pack: Pack | None = None) -> bool:
    """``True`` when every fault of ``schedule`` is one a correct engine must hide (see :data:`MASKED`):
    kills, duplicate deliveries, inserted restarts, and (given ``case`` and ``pack``) transient tool
    faults within the retry budget: a ``retryable``, ``timeout`` or ``lost_response`` fault on a task's
    tool, ``times`` at most the task's ``retries``, when the case scripts no failure of that tool itself."""
    def masked(f: Fault) -> bool:
        if f["kind"] in MASKED or (f["kind"] == "insert" and f["event"]["type"] == "restart"):
            return True
        if f["kind"] != "tool" or f["outcome"] not in RETRY_MASKED or case is None or pack is None:
            return False
        tasks = [t for p in pack.workflows[case.workflow]["phases"] for t in p["tasks"] if t["tool"] == f["tool"]]
        scripted = any(e.get("tool") == f["tool"] and e["type"] != "tool_success" for e in case.events)
        # every tool fault of the schedule on this tool counts against the one retry budget
        total = sum(g.get("times", 1) for g in schedule if g["kind"] == "tool" and g["tool"] == f["tool"])
        return bool(tasks) and not scripted and total <= min(t.get("retries", 0) for t in tasks)
    return all(masked(f) for f in schedule)


def next_pass(point: str) -> str:
    """The id of the next pass of a crash point: ``A`` -> ``A#2``, ``A#2`` -> ``A#3``."""
    name, _, n = point.partition("#")
    return f"{name}#{int(n or 1) + 1}"


def schedule_id(schedule: Sequence[Fault]) -> str:
    """A short stable id of a schedule (8 hex digits of the SHA-256 of its JSON)."""
    return hashlib.sha256(json.dumps(list(schedule), sort_keys=True).encode()).hexdigest()[:8]


def describe(fault: Fault) -> str:
    """One fault as a short phrase: ``kill at after_checkpoint:refund_draft``."""
    kind = fault["kind"]
    if kind == "kill":
        return f"kill at {fault['at']}" + (f", then at {next_pass(fault['at'])}" if fault.get("twice") else "")
    if kind == "hold":
        return f"{fault['event']['type']} while held at {fault['at']}"
    if kind == "duplicate":
        return f"deliver external event {fault['event']} x{fault['times']}"
    if kind == "reorder":
        return f"swap external events {fault['event']} and {fault['event'] + 1}"
    if kind == "insert":
        extra = " before the wait" if fault["event"].get("before_wait") else ""
        return f"insert {fault['event']['type']}{extra} after external event {fault['after']}"
    return f"{fault['tool']} call {fault['call']}: {fault['outcome']} x{fault.get('times', 1)}"


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
    runs with written out (a generated input included); its ``path`` stays the base case's.

    Raises:
        ValueError: a fault of unknown ``kind`` or ``outcome``.
    """
    tools, external = _split(case)
    faults: list[dict[str, Any]] = []
    wf = pack.workflows[case.workflow]
    gate = first_gate(wf)
    for fault in schedule:
        kind = fault["kind"]
        if kind == "kill":
            faults.append({"kill": fault["at"]})
            if fault.get("twice"):  # and again when the recovering worker passes the same point
                faults.append({"kill": next_pass(fault["at"])})
        elif kind == "hold":
            faults.append({"at": fault["at"], "event": _with_approval_id(dict(fault["event"]), gate)})
        elif kind == "duplicate":
            ev = external[fault["event"] % len(external)]
            if ev["type"] in REDELIVERABLE:
                ev["deliveries"] = ev.get("deliveries", 1) + fault["times"] - 1
        elif kind == "reorder":
            if len(external) >= 3:
                i = 1 + fault["event"] % (len(external) - 2)
                if not (external[i].get("before_wait") or external[i + 1].get("before_wait")):
                    external[i], external[i + 1] = external[i + 1], external[i]
        elif kind == "insert":
            ev = _with_approval_id(dict(fault["event"]), gate)
            if ev.get("before_wait"):
                if gate is None:
                    continue
                external.insert(1, ev)
            else:
                after = fault["after"] % len(external)
                while after + 1 < len(external) and external[after + 1].get("before_wait"):
                    after += 1  # early decisions stay right after the start request
                if ev["type"] == "deploy":
                    ev["version"] = max([wf["version"]] + [e["version"] for e in external
                                                            if e["type"] == "deploy"]) + 1
                    later = [e for e in external[after + 1:] if e["type"] == "deploy"]
                    if later:  # versions must grow along the case: put it after the last deploy
                        after = external.index(later[-1])
                external.insert(after + 1, ev)
        elif kind == "tool":
            if fault["outcome"] not in TOOL_OUTCOMES:
                raise ValueError(f"unknown tool outcome {fault['outcome']!r}; known: {', '.join(TOOL_OUTCOMES)}")
            faults.append({k: v for k, v in fault.items() if k != "kind"})
        else:
            raise ValueError(f"unknown fault kind {kind!r}; known: {', '.join(KINDS)}")
    if len(external) == 1 and external[0] == {"type": "start", "deliveries": 1}:
        external = []  # the implicit start stays implicit
    masked = is_masked(schedule, case, pack)
    expected = dict(case.expected) if masked else {}
    expected.pop("like_fault_free", None)
    if masked and faults:
        expected["like_fault_free"] = True
    events = external[:1] + tools + external[1:] if external else tools
    workflow_input = case.input or generated_input(case.workflow, seed=zlib.crc32(case.case_id.encode()))
    return dataclasses.replace(
        case, case_id=case_id or case.case_id, events=events, input=workflow_input,
        faults=faults, expected=expected, tags=tuple(dict.fromkeys((*case.tags, "generated"))),
        line_of={})


def _with_approval_id(ev: dict[str, Any], gate: dict[str, Any] | None) -> dict[str, Any]:
    if ev["type"] in ("approval_granted", "approval_denied", "approval_timeout") and "approval_id" not in ev:
        ev["approval_id"] = gate["approval_id"] if gate else "approval"
    return ev


def case_data(case: Case, *, schedule: Sequence[Fault] = (), note: str = "") -> dict[str, Any]:
    """The case as data for a case file (the keys of ``case.schema.json``), with the schedule that
    made it in ``description``."""
    description = note or case.description
    if schedule:
        description = (description + "\n" if description else "") + "Fault schedule: " + \
            "; ".join(describe(f) for f in schedule)
    data: dict[str, Any] = {"case_id": case.case_id, "description": description, "workflow": case.workflow,
                            "initial_step": case.initial_step, "input": case.input, "tags": list(case.tags),
                            "events": case.events}
    if case.faults:
        data["faults"] = case.faults
    data["expected"] = {k: v for k, v in case.expected.items() if v is not False or k.startswith("must_not_")}
    return data
