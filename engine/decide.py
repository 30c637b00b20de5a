"""The pure core: what a step's outcome means for the workflow, as a typed transition.

No I/O, no clock: every input is passed in, the output is a
:mod:`crashpoint.engine.transitions` value that the engine applies in one checkpoint
transaction. Keeping this pure is what makes the engine's decisions replayable
(after Temporal's deterministic workflow code, with the I/O in activities).
"""

from __future__ import annotations

from typing import Any

from crashpoint.engine.definition import AGENT_OK, Phase, Task, WorkflowDefinition
from crashpoint.engine.transitions import Compensate, Complete, Continue, Fail, Retry, StepResult


def next_position(definition: WorkflowDefinition, st: dict[str, Any], now: float) -> dict[str, Any]:
    """The cursor patch after the current task: the next task, this phase's gate, the next phase, or done.

    Returns a dict with some of ``phase``, ``task``, ``stage`` (``task`` | ``gate`` | ``done``) and
    ``phase_started_at`` (seconds).
    """
    phase = definition.phases[st["phase"]]
    if st["stage"] == "task" and st["task"] + 1 < len(phase.tasks):
        return {"task": st["task"] + 1, "stage": "task"}
    if st["stage"] == "task" and phase.human_gate and phase.human_gate.approval_id not in st["approvals"]:
        return {"stage": "gate"}
    if st["phase"] + 1 < len(definition.phases):
        return {"phase": st["phase"] + 1, "task": 0, "stage": "task", "phase_started_at": now}
    return {"stage": "done"}


def step_name(definition: WorkflowDefinition, patch: dict[str, Any], st: dict[str, Any]) -> str | None:
    """The id of the step a cursor patch points at (a task id or ``PHASE.human_gate``), or ``None`` when done."""
    where = {**st, **patch}
    if where["stage"] == "done":
        return None
    phase = definition.phases[where["phase"]]
    return f"{phase.id}.human_gate" if where["stage"] == "gate" else phase.tasks[where["task"]].id


def compensable(st: dict[str, Any]) -> bool:
    """``True`` when some executed side effect has a compensation."""
    return any(e["status"] == "executed" and e["compensation"] for e in st["side_effects"])


def past_pivot(definition: WorkflowDefinition, st: dict[str, Any]) -> str | None:
    """The irreversible task whose effect was executed (the saga's pivot), or ``None``.

    After its pivot a saga can only complete forward: a cancellation can no longer be honoured by
    compensation (Garcia-Molina & Salem, "Sagas", SIGMOD 1987, and the pivot transactions of
    flexible transactions).
    """
    irreversible = {t.id for _, _, t in definition.tasks if t.irreversible}
    return next((e["task"] for e in st["side_effects"] if e["status"] == "executed" and e["task"] in irreversible),
                None)


def agent_verdict(result: Any) -> str:
    """The verdict of an agent step's answer: ``result["verdict"]`` as a string, or ``"none"`` when the
    answer has no verdict (which escalates like ``uncertain``)."""
    verdict = result.get("verdict") if isinstance(result, dict) else None
    return verdict if isinstance(verdict, str) and verdict else "none"


def retry_budget(phase: Phase, task: Task) -> int:
    """Retries (count) a retryable failure of ``task`` gets: its own ``retries``, plus the phase's
    ``retries`` when the phase's ``on_error`` is ``retry`` (the phase's budget, given to each task)."""
    return task.retries + (phase.retries if phase.on_error == "retry" else 0)


def progress(definition: WorkflowDefinition, st: dict[str, Any], now: float) -> dict[str, Any]:
    """How far a workflow is: ``{"percent", "phases_done", "phases_total", "tasks_done", "tasks_total",
    "eta_s"}``.

    ``tasks_done`` counts finished (or skipped) tasks, including those a revision sent back (the work
    was done; ``tasks_total`` grows by the same count, so ``percent`` only drops when a revision adds
    work). ``phases_done`` counts phases left behind (a phase waiting at its gate is not done).
    ``eta_s`` is virtual seconds left, estimated from the virtual time spent per finished task since
    the run started (``None`` before the first task finished). ``percent`` has one decimal.
    """
    redone = int(st.get("tasks_redone", 0))
    total = len(definition.tasks) + redone
    done = len(st["results"]) + len(st["skipped"]) + redone
    phases_total = len(definition.phases)
    phases_done = phases_total if st["stage"] == "done" else st["phase"]
    started = st.get("started_at")
    eta = None
    if started is not None and done:
        eta = round(max(0.0, now - started) / done * (total - done), 1)
    return {"percent": round(100.0 * done / total, 1) if total else 100.0, "phases_done": phases_done,
            "phases_total": phases_total, "tasks_done": done, "tasks_total": total, "eta_s": eta}


def _done_or_continue(definition: WorkflowDefinition, st: dict[str, Any], now: float,
                      patch: dict[str, Any]) -> StepResult:
    patch = {**patch, **next_position(definition, st, now), "attempt": 0, "retry_at": None}
    nxt = step_name(definition, patch, st)
    if nxt is None:
        done = len(st["results"]) + ("result" in patch)
        skipped = len(st["skipped"]) + ("skip" in patch)
        return Complete(output={"tasks_done": done, "skipped": skipped}, patch=patch)
    return Continue(next_step=nxt, patch=patch)


def decide_task(definition: WorkflowDefinition, st: dict[str, Any], phase: Phase, task: Task, *, now: float,
                result: Any = None, error: str | None = None, retryable: bool = False,
                attempt: int | None = None, maybe_applied: bool = False, key: str | None = None,
                wait_s: float | None = None) -> StepResult:
    """The transition after ``task`` returned ``result`` or failed with ``error``.

    A ``Continue``/``Complete`` patch carries the cursor move plus ``result: (task_id, value)``
    or ``skip: task_id``.

    Rules: success continues (or completes), except that an agent step (``task.agent``) whose
    answer's verdict is not ``confident`` escalates, naming the task and the verdict; a retryable
    error within :func:`retry_budget` retries after ``backoff_s * 2**(attempt-1)`` seconds, or after ``wait_s``
    when the tool said how long to wait (a rate limit's ``retry_after``) and that is longer; a
    non-critical task or an ``on_error: skip`` phase skips; ``on_error: escalate`` escalates; after
    an irreversible task took effect (the saga's pivot, :func:`past_pivot`) the run escalates rather
    than compensating what came before it; otherwise the executed effects are compensated (saga)
    when there are any, and the workflow fails. A side effect whose last attempt may have
    been applied (``maybe_applied``: its answer was lost) when the retries run out is neither
    compensated nor skipped: its outcome is unknown, so the run escalates to an operator, naming
    the idempotency key that settles it.
    """
    if error is None:
        verdict = agent_verdict(result) if task.agent else AGENT_OK
        if verdict != AGENT_OK:
            why = result.get("reason") if isinstance(result, dict) else None
            return Fail(reason=f"escalated: agent step {task.id!r} answered {verdict}" + (f": {why}" if why else ""),
                        status="escalated")
        return _done_or_continue(definition, st, now, {"result": (task.id, result)})
    if retryable and attempt is not None and attempt <= retry_budget(phase, task):
        return Retry(reason=error, retry_after_s=max(task.backoff_s * 2 ** (attempt - 1), wait_s or 0.0),
                     attempt=attempt)
    if maybe_applied and task.side_effect:
        return Fail(reason=f"escalated: the outcome of task {task.id!r} is unknown after {attempt} attempt(s): "
                           f"{error} (idempotency key {key})", status="escalated")
    if not task.critical or phase.on_error == "skip":
        return _done_or_continue(definition, st, now, {"skip": task.id})
    reason = f"task {task.id!r} failed: {error}"
    if phase.on_error == "escalate":
        return Fail(reason=f"escalated: {reason}", status="escalated")
    pivot = past_pivot(definition, st)
    if pivot is not None:  # after its pivot a saga cannot go back: an operator finishes it forward
        return Fail(reason=f"escalated: {reason}; irreversible task {pivot!r} already took effect, so nothing is "
                           "compensated", status="escalated")
    if compensable(st):
        return Compensate(reason=reason, then="failed")
    return Fail(reason=reason)
