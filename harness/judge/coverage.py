"""Vacuity guards and the durability-coverage matrix: did a sweep exercise what it claims to?

A test that injected nothing passes for the wrong reason. Two views answer that:

* :func:`vacuity`: per run, the faults scheduled that never fired and the work that never
  happened (a case whose golden run called no tool, a run where every tool call failed).
  A run that exercised nothing is an ``error``, never a pass.
* :func:`matrix`: workflow steps x fault kinds, each cell ``{"runs", "passed", "failed"}``
  (empty cells are uncovered). The idea follows the fault-coverage tables of Jepsen reports
  and of the FATE/DESTINI failure-testing work (Gunawi et al., NSDI 2011).
"""

from __future__ import annotations

from typing import Any, Iterable

from crashpoint.harness.faults import kinds as fault_kinds
from crashpoint.harness.faults.kinds.duplicate import event_cells as delivery_cells
from crashpoint.harness.faults.kinds.kill import point_cells
from crashpoint.harness.faults.kinds.tool import event_cells as tool_event_cells
from crashpoint.harness.process.crashpoints import parse, schedule
from crashpoint.harness.model.outcomes import RunOutcome, TargetOutcome

#: Columns of the matrix, in order: each registered fault kind's (:mod:`crashpoint.harness.faults.kinds`).
KINDS = fault_kinds.columns()


def vacuity(outcome: "RunOutcome | TargetOutcome", golden: bool) -> tuple[list[str], bool]:
    """``(findings, exercised_nothing)`` for one run, of a pack or of a target.

    Findings: scheduled tool faults that no call consumed, events that had nothing to act on,
    every tool (effect) call failing. ``exercised_nothing`` is ``True`` for a golden run that made no
    tool call at all (nothing a kill could interrupt).
    """
    findings = [n for n in outcome.notes if n.startswith(("tool script never used", "event "))]
    findings += [f"fault never fired: {f}" for f in outcome.faults_missed]
    calls = outcome.calls
    injected = {effect for effect, _, _ in parse(getattr(outcome, "crash_point", None)).faults}
    if calls and not any((c["outcome"] if isinstance(c, dict) else c.outcome) == "applied" for c in calls) \
            and not (injected and {getattr(c, "effect", None) for c in calls} <= injected):
        # (a run whose crash spec failed the only effects called, an effect-fault run, exercised what it claims)
        findings.append(f"every one of the {len(calls)} tool calls failed: no effect was exercised")
    return findings, golden and not calls


def step_of(point: str, workflow: dict[str, Any] | None) -> str:
    """The workflow step a crash point belongs to: for a pack's workflow (``workflow``, its definition) the task
    id, ``PHASE.human_gate``, or ``workflow``; for a target's (``workflow`` ``None``) the node, step or effect the
    point names (``node:order-1@approve`` -> ``approve``, ``after_effect:issue_refund#2`` -> ``issue_refund``), or
    the kind of durable write (``before_put:order-1@2`` -> ``checkpoint``)."""
    kind, _, name = point.partition(":")
    name = name.split("#", 1)[0]
    if workflow is None:
        if kind.endswith(("_put", "_writes")):
            return "checkpoint"
        return name.rsplit("@", 1)[-1] if "@" in name else (name or kind)
    for phase in workflow["phases"]:
        gate = phase.get("human_gate") or {}
        if gate and (name in (gate.get("approval_id"), gate.get("checkpoint")) or name == "approvals.request"):
            return f"{phase['id']}.human_gate"
        for task in phase["tasks"]:
            if name in (task["tool"], task.get("checkpoint"), task.get("compensation"), f"compensate:{task['id']}"):
                return task["id"]
    return "workflow"


def _kinds(result: dict[str, Any], case_events: list[dict[str, Any]],
           case_faults: Iterable[dict[str, Any]] = ()) -> list[tuple[str, str | None]]:
    """``(column, crash point or None)`` pairs a result exercised: the sweep's kill (its crash point),
    the case's own tool events and repeated deliveries, and each of the case's faults (its kind's cells)."""
    out = point_cells(schedule(None if result["crash_point"] == "none" else result["crash_point"]))
    out += tool_event_cells(case_events) + delivery_cells(case_events)
    for fault in case_faults:
        fault = fault_kinds.normalize(fault)
        out += fault_kinds.get(fault["kind"]).coverage(fault)
    return out


def matrix(results: Iterable[dict[str, Any]], events_by_case: dict[str, list[dict[str, Any]]],
           workflows_by_case: dict[str, dict[str, Any]],
           faults_by_case: dict[str, list[dict[str, Any]]] | None = None) -> dict[str, dict[str, dict[str, int]]]:
    """``{step: {column: {"runs", "passed", "failed"}}}`` over result dicts (JSON form).

    A cell placed at a crash point (a kill, a tool fault: ``tool:NAME``, a hold) is attributed to the
    step that point belongs to; a duplicate delivery to ``workflow``. ``failed`` counts every verdict
    other than ``passed``. ``faults_by_case`` gives each case's own ``faults`` (default: none).
    """
    cells: dict[str, dict[str, dict[str, int]]] = {}
    for r in results:
        workflow = workflows_by_case[r["case_id"]]
        faults = (faults_by_case or {}).get(r["case_id"], ())
        for kind, where in _kinds(r, events_by_case[r["case_id"]], faults):
            step = step_of(where, workflow) if where else "workflow"
            cell = cells.setdefault(step, {}).setdefault(kind, {"runs": 0, "passed": 0, "failed": 0})
            cell["runs"] += 1
            cell["passed" if r["verdict"] == "passed" else "failed"] += 1
    return cells
