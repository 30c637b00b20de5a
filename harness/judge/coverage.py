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

from crashpoint.harness.run.crashpoints import schedule
from crashpoint.harness.run.driver import RunOutcome

#: Fault kinds of the matrix, in column order.
KINDS = ("kill@before_effect", "kill@after_effect", "kill@before_checkpoint", "kill@after_checkpoint",
         "kill@approval_request", "kill@during_recovery", "tool_failure", "tool_timeout", "tool_lost_response",
         "tool_slow", "duplicate_delivery")
_TOOL_FAULTS = {"tool_failure", "tool_timeout", "tool_lost_response", "tool_slow"}


def vacuity(outcome: RunOutcome, golden: bool) -> tuple[list[str], bool]:
    """``(findings, exercised_nothing)`` for one run.

    Findings: scheduled tool faults that no call consumed, events that had nothing to act on,
    every tool call failing. ``exercised_nothing`` is ``True`` for a golden run that made no
    tool call at all (nothing a kill could interrupt).
    """
    findings = [n for n in outcome.notes if n.startswith(("tool script never used", "event "))]
    findings += [f"fault never fired: {f}" for f in outcome.faults_missed]
    calls = outcome.calls
    if calls and not any(c["outcome"] == "applied" for c in calls):
        findings.append(f"every one of the {len(calls)} tool calls failed: no effect was exercised")
    return findings, golden and not calls


def step_of(point: str, workflow: dict[str, Any]) -> str:
    """The workflow step (task id, ``PHASE.human_gate``, or ``workflow``) a crash point belongs to."""
    kind, _, name = point.partition(":")
    name = name.split("#", 1)[0]
    for phase in workflow["phases"]:
        gate = phase.get("human_gate") or {}
        if gate and (name in (gate.get("approval_id"), gate.get("checkpoint")) or name == "approvals.request"):
            return f"{phase['id']}.human_gate"
        for task in phase["tasks"]:
            if name in (task["tool"], task.get("checkpoint"), task.get("compensation"), f"compensate:{task['id']}"):
                return task["id"]
    return "workflow"


def _kinds(result: dict[str, Any], case_events: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """``(fault kind, crash point or None)`` pairs a result exercised."""
    out: list[tuple[str, str | None]] = []
    points = schedule(None if result["crash_point"] == "none" else result["crash_point"])
    if points:
        kind = points[0].split(":", 1)[0]
        out.append((f"kill@{kind}", points[0]))
        if len(points) > 1:
            out.append(("kill@during_recovery", points[1]))
    for ev in case_events:
        if ev["type"] in _TOOL_FAULTS:
            out.append((ev["type"], ev["tool"]))
        elif ev.get("deliveries", 1) > 1:
            out.append(("duplicate_delivery", None))
    return out


def matrix(results: Iterable[dict[str, Any]], events_by_case: dict[str, list[dict[str, Any]]],
           workflows_by_case: dict[str, dict[str, Any]]) -> dict[str, dict[str, dict[str, int]]]:
    """``{step: {fault kind: {"runs", "passed", "failed"}}}`` over result dicts (JSON form).

    A tool fault is attributed to the step whose tool it names; a duplicate delivery to
    ``workflow``. ``failed`` counts every verdict other than ``passed``.
    """
    cells: dict[str, dict[str, dict[str, int]]] = {}
    for r in results:
        workflow = workflows_by_case[r["case_id"]]
        for kind, where in _kinds(r, events_by_case[r["case_id"]]):
            if kind.startswith("kill") or kind in _TOOL_FAULTS:
                step = step_of(where if kind.startswith("kill") else f"tool:{where}", workflow)
            else:
                step = "workflow"
            cell = cells.setdefault(step, {}).setdefault(kind, {"runs": 0, "passed": 0, "failed": 0})
            cell["runs"] += 1
            cell["passed" if r["verdict"] == "passed" else "failed"] += 1
    return cells
