"""Workflow definitions as data: a workflow is phases, a phase is tasks.

Source: the long-horizon-workflows seed (``WorkflowPhase``/``WorkflowTask``: checkpoint,
humanGate, timeout, onError; retries, critical) extended with the durable-workflows
seed's side-effect fields (idempotent side effects, compensation, irreversible actions
behind an approval).

A definition is versioned: ``(name, version)`` identifies it, and a run keeps the
version it started with for its whole life.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

from crashpoint.errors import CrashpointError

ON_ERROR = ("retry", "skip", "abort", "escalate")
ON_TIMEOUT = ("escalate", "compensate", "fail")
ON_DENY = ("compensate", "fail", "revise")
#: The one verdict of an agent step that lets the workflow go on; any other (``uncertain``,
#: ``evidence_missing``, a missing or unknown verdict) escalates the run.
AGENT_OK = "confident"

#: A task argument that refers to an earlier task's result: ``$result.TASK.field``.
_REF = re.compile(r"^\$result\.([^.]+)\.")
#: The tool the engine calls to ask a human for an approval (a side effect with its own key).
APPROVAL_TOOL = "approvals.request"


class DefinitionError(CrashpointError, ValueError):
    """A workflow definition is inconsistent (unknown field values, irreversible task without a gate...).

    Args:
        message: what is wrong and how to fix it.
        path: where, in the definition's data form (``("phases", 1, "tasks", 0, "irreversible")``;
            ``()`` when the whole definition is at fault): the loader turns it into a file, line and field.
        first: for a duplicate, the path of the first occurrence.
    """

    def __init__(self, message: str, path: tuple[str | int, ...] = (), first: tuple[str | int, ...] | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.first = first


@dataclass(frozen=True)
class Task:
    """One step that calls one tool.

    Attributes:
        id: unique within the workflow.
        tool: the tool name passed to :class:`~crashpoint.protocols.ToolPort`.
        args: arguments; string values ``$input.k`` and ``$result.task.k`` are resolved at run time.
        retries: extra attempts after the first (count).
        backoff_s: base of the exponential backoff, seconds: attempt ``n`` waits ``backoff_s * 2**(n-1)``.
        critical: a failure of a non-critical task is skipped, not fatal.
        side_effect: the call changes the world; it gets an idempotency key and an audit record.
        irreversible: may only run after a granted human gate earlier in the workflow.
        compensation: tool that undoes this task's effect (saga), or ``None``.
        compensation_retries: extra attempts at the compensation after a retryable failure (count; its
            own budget, apart from ``retries``). Once spent, the run stops ``escalated`` naming the effect
            and the idempotency key left in place: an operator must undo it.
        checkpoint: name of the checkpoint written after this task.
        agent: an agent step (an analysis by a model): its tool answers ``{"verdict", ...}``, and any
            verdict but :data:`AGENT_OK` (``uncertain``, ``evidence_missing``, none) escalates the run,
            whether the task is critical or not, so an unsure answer never reaches a success.
    """

    id: str
    tool: str
    args: Mapping[str, Any] = field(default_factory=dict)
    retries: int = 0
    backoff_s: float = 1.0
    critical: bool = True
    side_effect: bool = False
    irreversible: bool = False
    compensation: str | None = None
    checkpoint: str = ""
    agent: bool = False
    compensation_retries: int = 3


@dataclass(frozen=True)
class HumanGate:
    """An approval asked for after a phase's tasks (seed: "Human gates pause execution").

    Attributes:
        approval_id: the approval's name, stable across restarts.
        checkpoint: name of the checkpoint written once the request is made.
        timeout_s: seconds (virtual) the workflow waits for a decision.
        on_timeout: ``escalate`` | ``compensate`` | ``fail``.
        on_deny: ``compensate`` | ``fail`` | ``revise``: a denial sends the workflow back to the first
            task of phase ``revise_from`` (the analysis is revised, then the approval asked again) at
            most ``max_revisions`` times; a denial after that compensates, then fails.
        revise_from: id of the phase a ``revise`` denial goes back to (this phase or an earlier one).
        max_revisions: how many denials may send the workflow back (count, >= 1 with ``revise``).
    """

    approval_id: str
    timeout_s: float
    checkpoint: str = "approval_request"
    on_timeout: str = "escalate"
    on_deny: str = "compensate"
    revise_from: str | None = None
    max_revisions: int = 0


@dataclass(frozen=True)
class Phase:
    """A group of tasks with one error policy, an optional timeout (seconds) and an optional gate.

    ``on_error`` decides what a failed critical task does once its own ``retries`` are spent:
    ``retry``: a retryable failure gets ``retries`` more attempts (the phase's budget, added to each
    task's own; same backoff growth), then the phase aborts; ``skip``: the task is skipped;
    ``abort``: executed effects are compensated and the run fails; ``escalate``: the run stops
    ``escalated`` for an operator.
    """

    id: str
    tasks: tuple[Task, ...]
    checkpoint: bool = True
    timeout_s: float | None = None
    on_error: str = "abort"
    human_gate: HumanGate | None = None
    retries: int = 0


@dataclass(frozen=True)
class WorkflowDefinition:
    """A versioned workflow: ``name``, ``version`` (int) and ordered ``phases``."""

    name: str
    version: int
    phases: tuple[Phase, ...]
    description: str = ""

    @functools.cached_property
    def tasks(self) -> tuple[tuple[int, int, Task], ...]:
        """Every task as ``(phase_index, task_index, task)`` in execution order.

        Made once per definition (the phases are a tuple of frozen phases): the engine asks for it at every
        step, and on a workflow of N tasks a new list each time made a run's cost grow as N squared."""
        return tuple((p, t, task) for p, phase in enumerate(self.phases) for t, task in enumerate(phase.tasks))

    def locate(self, task_id: str) -> tuple[int, int]:
        """``(phase_index, task_index)`` of ``task_id``; raises :class:`DefinitionError`."""
        for p, t, task in self.tasks:
            if task.id == task_id:
                return p, t
        raise DefinitionError(f"workflow {self.name!r} v{self.version} has no task {task_id!r}")

    def task(self, task_id: str) -> Task:
        """The task named ``task_id``; raises :class:`DefinitionError`."""
        p, t = self.locate(task_id)
        return self.phases[p].tasks[t]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "WorkflowDefinition":
        """Build and check a definition from its data form (the workflow YAML, parsed).

        Raises:
            DefinitionError: a missing or wrong field, a duplicate id, an irreversible task
                with no human gate before it, a compensation on a task without a side effect.
        """
        try:
            phases = []
            for pd in data["phases"]:
                gate = pd.get("human_gate") or None
                tasks = tuple(
                    Task(id=td["id"], tool=td["tool"], args=dict(td.get("args") or {}),
                         retries=int(td.get("retries", 0)), backoff_s=float(td.get("backoff_s", 1.0)),
                         critical=bool(td.get("critical", True)), side_effect=bool(td.get("side_effect", False)),
                         irreversible=bool(td.get("irreversible", False)), compensation=td.get("compensation"),
                         checkpoint=td.get("checkpoint") or td["id"], agent=bool(td.get("agent", False)),
                         compensation_retries=int(td.get("compensation_retries", 3)))
                    for td in pd["tasks"])
                phases.append(Phase(
                    id=pd["id"], tasks=tasks, checkpoint=bool(pd.get("checkpoint", True)),
                    timeout_s=pd.get("timeout_s"), on_error=pd.get("on_error", "abort"),
                    retries=int(pd.get("retries", 0)),
                    human_gate=HumanGate(approval_id=gate["approval_id"], timeout_s=float(gate["timeout_s"]),
                                         checkpoint=gate.get("checkpoint", "approval_request"),
                                         on_timeout=gate.get("on_timeout", "escalate"),
                                         on_deny=gate.get("on_deny", "compensate"),
                                         revise_from=gate.get("revise_from"),
                                         max_revisions=int(gate.get("max_revisions", 0))) if gate else None))
            definition = cls(name=data["workflow"], version=int(data["version"]), phases=tuple(phases),
                             description=data.get("description", ""))
        except (KeyError, TypeError, ValueError) as exc:
            raise DefinitionError(f"malformed workflow definition: {exc!r}") from exc
        definition.check()
        return definition

    def check(self) -> None:
        """Raise :class:`DefinitionError` if the definition cannot run safely: the one check of a
        workflow's rules (the loader maps its ``path`` to a file and line).

        Phase and task ids share one namespace; two human gates never share an approval id (one grant
        would answer both); an irreversible task needs a human gate in an earlier phase; a compensation
        needs a side effect; ``$result.TASK.`` arguments name an earlier task; enumerations and budgets
        are in range; a ``revise`` gate names this phase or an earlier one and re-runs no side effect.
        """
        ids: dict[str, tuple[str | int, ...]] = {}
        approvals: dict[str, tuple[str | int, ...]] = {}
        earlier: set[str] = set()
        gated = False
        for index, phase in enumerate(self.phases):
            at: tuple[str | int, ...] = ("phases", index)
            if phase.id in ids:
                raise DefinitionError(f"duplicate id {phase.id!r}", at + ("id",), ids[phase.id])
            ids[phase.id] = at + ("id",)
            if phase.on_error not in ON_ERROR:
                raise DefinitionError(f"phase {phase.id!r}: on_error must be one of {ON_ERROR}", at + ("on_error",))
            if phase.retries < 0:
                raise DefinitionError(f"phase {phase.id!r}: retries must be >= 0", at + ("retries",))
            for t, task in enumerate(phase.tasks):
                where = at + ("tasks", t)
                if task.id in ids:
                    raise DefinitionError(f"duplicate id {task.id!r}", where + ("id",), ids[task.id])
                for name, value in task.args.items():
                    ref = _REF.match(value) if isinstance(value, str) else None
                    if ref and ref.group(1) not in earlier:
                        raise DefinitionError(f"{value!r} refers to {ref.group(1)!r}, which is not an earlier task",
                                              where + ("args", name))
                ids[task.id] = where + ("id",)
                earlier.add(task.id)
                if task.irreversible and not gated:
                    raise DefinitionError(f"irreversible task {task.id!r} needs a human_gate in an earlier phase",
                                          where + ("irreversible",))
                if task.compensation and not task.side_effect:
                    raise DefinitionError(f"task {task.id!r} has a compensation but no side_effect; set "
                                          "side_effect: true or drop the compensation", where + ("compensation",))
                for field_name in ("retries", "compensation_retries", "backoff_s"):
                    if getattr(task, field_name) < 0:
                        raise DefinitionError(f"task {task.id!r}: {field_name} must be >= 0", where + (field_name,))
            if phase.human_gate:
                g = phase.human_gate
                gate_at = at + ("human_gate",)
                if g.approval_id in approvals:  # one grant would answer both gates
                    raise DefinitionError(f"duplicate human_gate approval_id {g.approval_id!r}",
                                          gate_at + ("approval_id",), approvals[g.approval_id])
                approvals[g.approval_id] = gate_at + ("approval_id",)
                if g.on_timeout not in ON_TIMEOUT or g.on_deny not in ON_DENY or g.timeout_s <= 0:
                    raise DefinitionError(f"phase {phase.id!r}: bad human_gate {g}", gate_at)
                self._check_revise(index, g)
                gated = True

    def revised_span(self, phase_index: int) -> tuple[Phase, ...]:
        """The phases a ``revise`` denial of phase ``phase_index``'s gate runs again, in order
        (from ``revise_from`` to that phase); ``()`` when its gate does not revise."""
        gate = self.phases[phase_index].human_gate
        if gate is None or gate.on_deny != "revise":
            return ()
        start = next(i for i, p in enumerate(self.phases) if p.id == gate.revise_from)
        return self.phases[start:phase_index + 1]

    def _check_revise(self, index: int, gate: HumanGate) -> None:
        """Raise :class:`DefinitionError` unless a ``revise`` gate names an earlier-or-same phase, allows
        at least one revision, and re-runs no side effect (a revision would apply it again)."""
        at: tuple[str | int, ...] = ("phases", index, "human_gate")
        if gate.on_deny != "revise":
            if gate.revise_from is not None or gate.max_revisions:
                raise DefinitionError(f"gate {gate.approval_id!r}: revise_from and max_revisions need on_deny: revise",
                                      at + ("revise_from" if gate.revise_from is not None else "max_revisions",))
            return
        earlier = [p.id for p in self.phases[:index + 1]]
        if gate.revise_from not in earlier:
            raise DefinitionError(f"gate {gate.approval_id!r}: on_deny revise needs revise_from, this phase or an "
                                  f"earlier one; phases: {', '.join(earlier)}",
                                  at + ("revise_from" if gate.revise_from is not None else "on_deny",))
        if gate.max_revisions < 1:
            raise DefinitionError(f"gate {gate.approval_id!r}: on_deny revise needs max_revisions >= 1",
                                  at + ("max_revisions",))
        for phase in self.revised_span(index):
            for task in phase.tasks:
                if task.side_effect:
                    raise DefinitionError(f"gate {gate.approval_id!r}: a revision re-runs phase {phase.id!r}, whose "
                                          f"task {task.id!r} has a side effect (it would be applied again); move it "
                                          "out of the revised phases", at + ("revise_from",))

    def to_dict(self) -> dict[str, Any]:
        """The data form, as accepted by :meth:`from_dict` (stored in the engine database).

        Fields added after the first version (``agent``, phase ``retries``, ``revise_from``,
        ``max_revisions``) appear only when set, so a definition that does not use them keeps the
        body it was deployed with."""
        data = {
            "workflow": self.name, "version": self.version, "description": self.description,
            "phases": [{
                "id": p.id, "checkpoint": p.checkpoint, "timeout_s": p.timeout_s, "on_error": p.on_error,
                "human_gate": (None if p.human_gate is None else {
                    "approval_id": p.human_gate.approval_id, "timeout_s": p.human_gate.timeout_s,
                    "checkpoint": p.human_gate.checkpoint, "on_timeout": p.human_gate.on_timeout,
                    "on_deny": p.human_gate.on_deny}),
                "tasks": [{"id": t.id, "tool": t.tool, "args": dict(t.args), "retries": t.retries,
                           "backoff_s": t.backoff_s, "critical": t.critical, "side_effect": t.side_effect,
                           "irreversible": t.irreversible, "compensation": t.compensation,
                           "checkpoint": t.checkpoint} for t in p.tasks],
            } for p in self.phases],
        }
        for phase, pd in zip(self.phases, data["phases"]):
            if phase.retries:
                pd["retries"] = phase.retries
            if phase.human_gate is not None and phase.human_gate.on_deny == "revise":
                pd["human_gate"].update(revise_from=phase.human_gate.revise_from,
                                        max_revisions=phase.human_gate.max_revisions)
            for task, td in zip(phase.tasks, pd["tasks"]):
                if task.agent:
                    td["agent"] = True
                if task.compensation and task.compensation_retries != 3:
                    td["compensation_retries"] = task.compensation_retries
        return data
