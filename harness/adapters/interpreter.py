"""A generic interpreter of a pack's workflow definition, for adapters of engines nobody here wrote.

The pack's workflows are data (phases of tasks, human gates, retries, compensations). An
adapter for a real engine (DBOS, LangGraph, Temporal...) runs them with this interpreter: a
deterministic generator that *asks* the engine for durable work and is *sent* the results:

* :class:`Step` -- run once, durably: write its trace events, call one tool (or none) with an
  idempotency key derived from the workflow id and task id (stable across retries and resumes),
  and send back ``{"ok", "result" | "error", "retryable", "now"}``. The engine records the answer
  (a DBOS step, a LangGraph node, a Temporal activity).
* :class:`Commit` -- follows every ``Step`` and every ``Receive``: the engine has made the preceding
  answer durable; write ``events`` (transitions, ``checkpoint NAME``) only then. Send back ``None``.
* :class:`Receive` -- wait durably for the next external message (``{"kind": "approval", "granted",
  "by", "key"}``, ``{"kind": "cancel", "reason", "key"}`` or ``{"kind": "timeout", "key"}``) and send it.

The generator returns ``{"status", "stop_reason"}``. Because it is a pure function of the
definition, the input and the answers, an engine that replays (DBOS, Temporal) or stores the list
of answers (LangGraph) resumes it exactly where it was. Trace events use the shapes of
:mod:`crashpoint.harness.adapters.protocol`; statuses follow the state table of the seed.

Nothing here imports an engine, the fakes or the harness's other modules.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generator, Mapping

Event = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """Durable work: ``events`` to trace, then ``call`` (``{"tool", "args", "key", "task", "side_effect",
    "attempt"}``) or nothing. ``name`` is unique and deterministic within the run; ``probe`` is a crash
    point name to pass just before the call (``approval_request:ID``), or ``None``."""

    name: str
    events: list[Event] = field(default_factory=list)
    call: dict[str, Any] | None = None
    probe: str | None = None


@dataclass(frozen=True)
class Commit:
    """The preceding answer is durable: trace ``events`` now. ``name`` is the checkpoint name
    (crash points ``before_checkpoint:NAME`` / ``after_checkpoint:NAME`` surround it)."""

    name: str
    events: list[Event] = field(default_factory=list)


@dataclass(frozen=True)
class Receive:
    """Wait for the next external message for approval ``approval_id`` (deadline on the virtual clock, s)."""

    approval_id: str
    deadline: float


Request = Step | Commit | Receive


def result_event(call: Mapping[str, Any], answer: Mapping[str, Any]) -> Event:
    """The ``tool_result`` trace event of a step's answer (it opens the step's commit)."""
    event = {"kind": "tool_result", "task": call["task"], "tool": call["tool"], "idempotency_key": call["key"],
             "attempt": call.get("attempt", 1), "ok": bool(answer["ok"])}
    if answer["ok"]:
        event["result"] = answer.get("result")
    else:
        event.update(error=answer.get("error"), retryable=bool(answer.get("retryable")))
    return event
Program = Generator[Request, Any, dict[str, Any]]


def resolve(value: Any, input: Mapping[str, Any], results: Mapping[str, Any]) -> Any:
    """Resolve ``$input.FIELD`` and ``$result.TASK.FIELD`` references in task args (missing -> ``None``)."""
    if isinstance(value, dict):
        return {k: resolve(v, input, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, input, results) for v in value]
    if isinstance(value, str) and value.startswith("$input."):
        return input.get(value[len("$input."):])
    if isinstance(value, str) and value.startswith("$result."):
        task, _, name = value[len("$result."):].partition(".")
        return (results.get(task) or {}).get(name)
    return value


class _Run:
    """Mutable bookkeeping of one interpretation (status for transitions, results, effects)."""

    def __init__(self, workflow_id: str, definition: Mapping[str, Any], input: Mapping[str, Any]) -> None:
        self.wid = workflow_id
        self.definition = definition
        self.input = dict(input)
        self.status = "accepted"
        self.results: dict[str, Any] = {}
        self.effects: list[tuple[str, str]] = []  # (task, compensation tool) of applied effects, in order
        self.done = 0
        self.skipped = 0
        self.last_commit: list[Event] | None = None

    def enter(self, to: str) -> list[Event]:
        """Move to ``to`` as a step begins: the transition joins the events of the last commit (a driver
        writes a commit only after asking for the next request), so the trace's transitions are only
        ever written with a durable commit. Before the first commit, the events are returned instead."""
        events = self.move(to)
        if self.last_commit is None:
            return events
        self.last_commit.extend(events)
        return []

    def commit(self, name: str, events: list[Event]) -> Commit:
        """A :class:`Commit` whose events later steps may still extend (see :meth:`enter`)."""
        self.last_commit = events
        return Commit(name, events)

    def move(self, to: str) -> list[Event]:
        """The transition events that bring the status to ``to`` (none when already there)."""
        if self.status == to:
            return []
        event = {"kind": "transition", "from": self.status, "to": to}
        self.status = to
        return [event]

    def key(self, suffix: str) -> str:
        return f"{self.wid}/{suffix}"


def interpret(workflow_id: str, definition: Mapping[str, Any], input: Mapping[str, Any],
              initial_step: str | None = None) -> Program:
    """The generator described in the module docstring, for one workflow run.

    Args:
        workflow_id: the run's id (the idempotency keys derive from it).
        definition: the workflow definition data (``workflow``, ``version``, ``phases``).
        input: the workflow input (``$input.`` references).
        initial_step: a task id to start from (earlier tasks are skipped), or ``None``.
    """
    run = _Run(workflow_id, definition, input)
    yield Step("start", [])
    yield run.commit("workflow_started", [{"kind": "workflow_started", "definition": definition.get("workflow"),
                                           "version": definition.get("version")}] + run.move("running")
                     + [{"kind": "checkpoint", "name": "workflow_started"}])
    started = initial_step is None
    for phase in definition.get("phases", ()):
        for task in phase.get("tasks", ()):
            started = started or task["id"] == initial_step
            if not started:
                continue
            outcome = yield from _task(run, phase, task)
            if outcome is not None:
                return outcome
        gate = phase.get("human_gate")
        if gate and started:
            outcome = yield from _gate(run, gate)
            if outcome is not None:
                return outcome
    return (yield from _finish(run, "succeeded", f"completed: {run.done} tasks done, {run.skipped} skipped"))


def _task(run: _Run, phase: Mapping[str, Any], task: Mapping[str, Any]) -> Generator[Request, Any, Any]:
    """Run one task with its retries; ``None`` to go on, or the workflow's final outcome."""
    name = task.get("checkpoint") or task["id"]
    retries = int(task.get("retries", 0))
    attempt = 1
    while True:
        call = {"tool": task["tool"], "args": resolve(task.get("args", {}), run.input, run.results),
                "key": run.key(task["id"]), "task": task["id"], "attempt": attempt,
                "side_effect": bool(task.get("side_effect", True))}
        answer = yield Step(f"{task['id']}#{attempt}", run.enter("running") + [
            {"kind": "step_started", "task": task["id"], "phase": phase["id"], "attempt": attempt}], call)
        result = [result_event(call, answer)]
        if answer["ok"]:
            run.results[task["id"]] = answer.get("result") or {}
            run.effects.append((task["id"], task.get("compensation") or ""))
            run.done += 1
            yield run.commit(name, result + [{"kind": "step_result", "task": task["id"], "transition": "continue"}]
                         + run.move("checkpointed") + [{"kind": "checkpoint", "name": name}])
            return None
        if answer.get("retryable") and attempt <= retries:
            yield run.commit(f"retry:{task['id']}", result + [
                {"kind": "retry_scheduled", "task": task["id"], "attempt": attempt + 1,
                 "backoff_s": task.get("backoff_s", 0), "error": answer.get("error")}]
                + run.move("checkpointed") + run.move("retrying")
                + [{"kind": "checkpoint", "name": f"retry:{task['id']}"}])
            attempt += 1
            continue
        if not task.get("critical", True):
            run.skipped += 1
            yield run.commit(name, result + [{"kind": "task_skipped", "task": task["id"], "reason": answer.get("error")}]
                         + run.move("checkpointed") + [{"kind": "checkpoint", "name": name}])
            return None
        yield run.commit(f"failed:{task['id']}", result + [{"kind": "step_result", "task": task["id"], "transition": "fail"}]
                     + run.move("checkpointed") + [{"kind": "checkpoint", "name": f"failed:{task['id']}"}])
        reason = f"task {task['id']} failed: {answer.get('error')}"
        if phase.get("on_error") == "escalate":
            return (yield from _finish(run, "escalated", reason))
        return (yield from _compensate(run, "failed", reason))


def _gate(run: _Run, gate: Mapping[str, Any]) -> Generator[Request, Any, Any]:
    """Ask a human, wait durably, act on the answer; ``None`` to go on, or the final outcome."""
    approval_id = gate["approval_id"]
    timeout_s = float(gate.get("timeout_s", 86400))
    call = {"tool": "approvals.request", "key": run.key(f"approval/{approval_id}"), "task": f"gate:{approval_id}",
            "args": {"approval_id": approval_id, "timeout_s": timeout_s, "workflow_id": run.wid},
            "attempt": 1, "side_effect": True}
    answer = yield Step(f"gate:{approval_id}", run.enter("running") + [
        {"kind": "step_started", "task": f"gate:{approval_id}", "step_kind": "approval", "attempt": 1}],
        call, probe=f"approval_request:{approval_id}")
    result = [result_event(call, answer)]
    if not answer["ok"]:
        yield run.commit(f"failed:gate:{approval_id}", result + run.move("checkpointed")
                     + [{"kind": "checkpoint", "name": f"failed:gate:{approval_id}"}])
        return (yield from _compensate(run, "failed", f"approval request failed: {answer.get('error')}"))
    deadline = float(answer["now"]) + timeout_s
    checkpoint = gate.get("checkpoint") or "approval_request"
    yield run.commit(checkpoint, result + [{"kind": "approval_requested", "approval_id": approval_id, "deadline": deadline,
                               "timeout_s": timeout_s}] + run.move("checkpointed") + run.move("waiting_approval")
                 + [{"kind": "checkpoint", "name": checkpoint}])
    message = yield Receive(approval_id, deadline)
    kind = message.get("kind")
    received = {"kind": "event_received", "event": kind, "idempotency_key": message.get("key")}
    if kind == "approval" and message.get("granted"):
        yield run.commit("approval_decision", [received, {"kind": "approval_granted", "approval_id": approval_id,
                                                      "by": message.get("by")}]
                     + run.move("running") + [{"kind": "checkpoint", "name": "approval_decision"}])
        return None
    if kind == "approval":
        yield run.commit("approval_decision", [received, {"kind": "approval_denied", "approval_id": approval_id,
                                                      "by": message.get("by")}]
                     + [{"kind": "checkpoint", "name": "approval_decision"}])
        reason = f"denied by {message.get('by')}"
        if gate.get("on_deny", "compensate") == "compensate":
            return (yield from _compensate(run, "failed", reason))
        return (yield from _finish(run, "failed", reason))
    if kind == "timeout":
        yield run.commit("approval_timeout", [received, {"kind": "approval_timeout", "approval_id": approval_id}]
                     + [{"kind": "checkpoint", "name": "approval_timeout"}])
        reason = f"approval {approval_id} timed out"
        if gate.get("on_timeout", "escalate") == "escalate":
            return (yield from _finish(run, "escalated", reason))
        return (yield from _compensate(run, "failed", reason))
    yield run.commit("cancel", [received] + [{"kind": "checkpoint", "name": "cancel"}])
    return (yield from _compensate(run, "cancelled", f"cancelled: {message.get('reason')}"))


def _compensate(run: _Run, final: str, reason: str) -> Generator[Request, Any, Any]:
    """Undo applied effects in reverse order, then finish with ``final``."""
    todo = [(task, tool) for task, tool in reversed(run.effects) if tool]
    if not todo and final == "cancelled" and run.status == "waiting_approval":
        return (yield from _finish(run, final, reason))  # nothing to undo: waiting -> cancelled directly
    if not todo:
        return (yield from _finish(run, final, reason, run.enter("compensating")))
    for task, tool in todo:
        args = {"idempotency_key_of_effect": run.key(task), "task": task, "result": run.results.get(task)}
        call = {"tool": tool, "args": args, "key": run.key(f"compensate/{task}"), "task": f"compensate:{task}",
                "attempt": 1, "side_effect": True}
        answer = yield Step(f"compensate:{task}", run.enter("compensating") + [
            {"kind": "compensation_required", "task": task}], call)
        yield run.commit(f"compensate:{task}", [result_event(call, answer), {"kind": "compensation_result", "task": task, "ok": answer["ok"],
                                             "error": answer.get("error")},
                                            {"kind": "checkpoint", "name": f"compensate:{task}"}])
    return (yield from _finish(run, final, reason))


def _finish(run: _Run, status: str, reason: str,
            prelude: list[Event] | None = None) -> Generator[Request, Any, dict[str, Any]]:
    """The terminal transition, its checkpoint and ``workflow_finished`` (``prelude``: events to trace first)."""
    yield Step("finish", (prelude or []) + [{"kind": "step_started", "task": "finish"}])
    yield run.commit("finished", run.move(status) + [{"kind": "checkpoint", "name": "finished"},
                                                 {"kind": "workflow_finished", "status": status,
                                                  "stop_reason": reason}])
    return {"status": status, "stop_reason": reason}
