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

It follows the reference engine's rules (``crashpoint.engine.decide``) for what it implements:
retries with exponential backoff on the virtual clock (a call's ``not_before``), the phase's retry
budget (``on_error: retry``), ``on_error`` ``skip`` / ``abort`` / ``escalate``, phase timeouts (a call's
``deadline``, checked by the step runner before the call), agent verdicts, irreversible tasks (the
saga's pivot: no compensation after it), ``on_deny`` ``compensate`` / ``fail`` / ``revise``, ``on_timeout``
``escalate`` / ``compensate`` / ``fail``, cancellation while waiting (refused past the pivot), and
compensation retried under its own budget (``compensation_retries``), then ``escalated``. What it
does not implement is listed in :data:`FEATURES` by omission: :func:`features_used` names what a
definition uses, and an adapter reports a case needing more as ``unsupported``, never ``failed``.

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
    """Resolve ``$input.A.B`` and ``$result.TASK.FIELD`` references (dotted paths, any depth) in task args,
    as the reference engine does; a missing value resolves to ``None``."""
    if isinstance(value, dict):
        return {k: resolve(v, input, results) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve(v, input, results) for v in value]
    if isinstance(value, str) and value.startswith(("$input.", "$result.")):
        root, *path = value[1:].split(".")
        node: Any = input if root == "input" else results
        for part in path:
            node = node.get(part) if isinstance(node, Mapping) else None
        return node
    return value


#: Definition features (see :func:`features_used`) the interpreter implements.
FEATURES = frozenset({
    "phase.id", "phase.tasks", "phase.checkpoint", "phase.timeout_s", "phase.retries", "phase.human_gate",
    "phase.on_error: retry", "phase.on_error: skip", "phase.on_error: abort", "phase.on_error: escalate",
    "human_gate.approval_id", "human_gate.checkpoint", "human_gate.timeout_s",
    "human_gate.on_timeout: escalate", "human_gate.on_timeout: compensate", "human_gate.on_timeout: fail",
    "human_gate.on_deny: compensate", "human_gate.on_deny: fail", "human_gate.on_deny: revise",
    "human_gate.revise_from", "human_gate.max_revisions",
    "task.id", "task.tool", "task.args", "task.retries", "task.backoff_s", "task.critical", "task.side_effect",
    "task.irreversible", "task.compensation", "task.compensation_retries", "task.checkpoint", "task.agent",
    # events delivered while a worker is held mid-step: approvals and clock moves wait in the inbox for the
    # next gate; a cancel at a step boundary is not implemented ("hold: cancel" is unsupported)
    "hold: approval_granted", "hold: approval_denied", "hold: advance_clock",
})
#: Trace event kinds the interpreter (with :mod:`crashpoint.harness.adapters.runtime`) writes.
TRACE_KINDS = frozenset({
    "workflow_accepted", "workflow_started", "workflow_resumed", "workflow_finished", "transition", "checkpoint",
    "step_started", "tool_call", "tool_result", "step_result", "retry_scheduled", "task_skipped", "progress",
    "approval_requested", "approval_granted", "approval_denied", "approval_timeout", "revision_started",
    "event_received", "event_duplicate", "event_ignored", "cancel_requested", "compensation_required",
    "compensation_started", "compensation_result",
})
#: Enumerated fields: a feature is ``"SCOPE.FIELD: VALUE"`` for these, ``"SCOPE.FIELD"`` for the others.
_ENUMS = {("phase", "on_error"), ("human_gate", "on_timeout"), ("human_gate", "on_deny")}
#: The agent verdict that lets a workflow go on (``crashpoint.engine.definition.AGENT_OK``).
AGENT_OK = "confident"


def features_used(definition: Mapping[str, Any]) -> set[str]:
    """The features a workflow definition uses: ``"phase.FIELD"``, ``"human_gate.FIELD"``, ``"task.FIELD"`` for
    each field given (``"SCOPE.FIELD: VALUE"`` for the enumerated ``on_error``, ``on_timeout``, ``on_deny``).
    A field nobody listed in :data:`FEATURES` shows up as a feature too, so a new one is never ignored."""
    used: set[str] = set()

    def add(scope: str, data: Mapping[str, Any]) -> None:
        for name, value in data.items():
            used.add(f"{scope}.{name}: {value}" if (scope, name) in _ENUMS else f"{scope}.{name}")

    for phase in definition.get("phases") or ():
        add("phase", phase)
        if phase.get("human_gate"):
            add("human_gate", phase["human_gate"])
        for task in phase.get("tasks") or ():
            add("task", task)
    return used


class _Run:
    """Mutable bookkeeping of one interpretation (status for transitions, results, effects, time)."""

    def __init__(self, workflow_id: str, definition: Mapping[str, Any], input: Mapping[str, Any]) -> None:
        self.wid = workflow_id
        self.definition = definition
        self.input = dict(input)
        self.status = "accepted"
        self.results: dict[str, Any] = {}
        #: applied effects in order: {"task", "tool", "key", "compensation", "irreversible", "retries"}
        self.effects: list[dict[str, Any]] = []
        self.skipped: list[str] = []
        self.granted: set[str] = set()
        self.revisions: dict[str, int] = {}
        self.keys: dict[str, str] = {}
        self.now: float | None = None  # virtual time of the last answer, s
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

    def task_key(self, task_id: str) -> str:
        """The task's idempotency key: ``WID/TASK``, or ``WID/TASK/rN`` once revision ``N`` sent it back."""
        return self.keys.get(task_id) or self.key(task_id)

    def heard(self, answer: Mapping[str, Any]) -> None:
        if answer.get("now") is not None:
            self.now = float(answer["now"])

    def progress(self, task: str) -> Event:
        total = sum(len(p.get("tasks", ())) for p in self.definition.get("phases", ()))
        return {"kind": "progress", "task": task, "tasks_done": len(self.results) + len(self.skipped),
                "tasks_total": total}

    def pivot(self) -> str | None:
        """The irreversible task whose effect was applied (the saga's pivot), or ``None``."""
        return next((e["task"] for e in self.effects if e["irreversible"]), None)


REVISE = object()  # what _gate returns when a denial sends the workflow back


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
    run.heard((yield Step("start", [])))
    yield run.commit("workflow_started", [{"kind": "workflow_started", "definition": definition.get("workflow"),
                                           "version": definition.get("version")}] + run.move("running")
                     + [{"kind": "checkpoint", "name": "workflow_started"}])
    phases = list(definition.get("phases", ()))
    started = initial_step is None
    index = 0
    while index < len(phases):
        phase = phases[index]
        clock = {"started": None}  # the phase's start on the virtual clock, from its first step's answer
        for task in phase.get("tasks", ()):
            started = started or task["id"] == initial_step
            if not started:
                continue
            outcome = yield from _task(run, phase, task, clock)
            if outcome is not None:
                return outcome
        gate = phase.get("human_gate")
        if gate and started:
            outcome = yield from _gate(run, phase, gate, last=index == len(phases) - 1)
            if outcome is REVISE:
                index = next(i for i, p in enumerate(phases) if p["id"] == gate["revise_from"])
                continue
            if outcome is not None:
                return outcome
        index += 1
    return (yield from _finish(run, "succeeded",
                               f"completed: {len(run.results)} tasks done, {len(run.skipped)} skipped"))


def _task(run: _Run, phase: Mapping[str, Any], task: Mapping[str, Any],
          clock: dict[str, Any]) -> Generator[Request, Any, Any]:
    """Run one task with its retries; ``None`` to go on, or the workflow's final outcome."""
    name = task.get("checkpoint") or task["id"]
    budget = int(task.get("retries", 0)) + (int(phase.get("retries", 0)) if phase.get("on_error") == "retry" else 0)
    backoff_s = float(task.get("backoff_s", 1.0))
    attempt, not_before = 1, None
    while True:
        key = run.task_key(task["id"])
        call = {"tool": task["tool"], "args": resolve(task.get("args", {}), run.input, run.results),
                "key": key, "task": task["id"], "attempt": attempt,
                "side_effect": bool(task.get("side_effect", False))}
        if not_before is not None:
            call["not_before"] = not_before
        if phase.get("timeout_s") is not None and clock["started"] is not None:
            call["deadline"] = clock["started"] + float(phase["timeout_s"])
            call["deadline_error"] = f"phase {phase['id']!r} exceeded its timeout of {phase['timeout_s']} s"
        refused = task.get("irreversible") and not _gated(run, phase)
        answer = yield Step(f"{task['id']}#{attempt}", run.enter("running") + [
            {"kind": "step_started", "task": task["id"], "phase": phase["id"], "attempt": attempt}],
            None if refused else call)
        run.heard(answer)
        if clock["started"] is None:
            clock["started"] = float(answer.get("began", answer.get("now") or 0.0))
        if refused:
            answer = {"ok": False, "error": f"irreversible task {task['id']!r} refused: no granted approval",
                      "retryable": False, "skipped_call": True}
        result = [] if answer.get("skipped_call") else [result_event(call, answer)]
        if answer["ok"]:
            value = answer.get("result") or {}
            if task.get("agent"):
                verdict = value.get("verdict") if isinstance(value, dict) else None
                verdict = verdict if isinstance(verdict, str) and verdict else "none"
                if verdict != AGENT_OK:
                    why = value.get("reason") if isinstance(value, dict) else None
                    yield run.commit(name, result + [{"kind": "step_result", "task": task["id"], "transition": "fail"}]
                                     + run.move("checkpointed") + [{"kind": "checkpoint", "name": name}])
                    return (yield from _finish(run, "escalated", f"escalated: agent step {task['id']!r} answered "
                                                                 f"{verdict}" + (f": {why}" if why else "")))
            run.results[task["id"]] = value
            if task.get("side_effect"):
                run.effects.append({"task": task["id"], "tool": task["tool"], "key": key,
                                    "compensation": task.get("compensation") or "",
                                    "irreversible": bool(task.get("irreversible")),
                                    "retries": int(task.get("compensation_retries", 3))})
            yield run.commit(name, result + [{"kind": "step_result", "task": task["id"], "transition": "continue"}]
                             + run.move("checkpointed") + [{"kind": "checkpoint", "name": name},
                                                           run.progress(task["id"])])
            return None
        error = answer.get("error")
        if answer.get("retryable") and not answer.get("skipped_call") and attempt <= budget:
            delay_s = backoff_s * 2 ** (attempt - 1)
            not_before = float(answer.get("now") or 0.0) + delay_s
            yield run.commit(f"retry:{task['id']}", result + [
                {"kind": "step_result", "task": task["id"], "transition": "retry"},
                {"kind": "retry_scheduled", "task": task["id"], "attempt": attempt, "next_attempt": attempt + 1,
                 "delay_s": delay_s, "retry_at": not_before, "error": error}]
                + run.move("checkpointed") + run.move("retrying")
                + [{"kind": "checkpoint", "name": f"retry:{task['id']}"}])
            attempt += 1
            continue
        if answer.get("maybe_applied") and task.get("side_effect"):
            yield run.commit(f"failed:{task['id']}", result + [
                {"kind": "step_result", "task": task["id"], "transition": "fail"}]
                + run.move("checkpointed") + [{"kind": "checkpoint", "name": f"failed:{task['id']}"}])
            return (yield from _finish(run, "escalated", f"escalated: the outcome of task {task['id']!r} is unknown "
                                                         f"after {attempt} attempt(s): {error} (idempotency key {key})"))
        if not task.get("critical", True) or phase.get("on_error") == "skip":
            run.skipped.append(task["id"])
            yield run.commit(name, result + [
                {"kind": "task_skipped", "task": task["id"], "critical": bool(task.get("critical", True)),
                 "error": error}, {"kind": "step_result", "task": task["id"], "transition": "continue"}]
                + run.move("checkpointed") + [{"kind": "checkpoint", "name": name}, run.progress(task["id"])])
            return None
        reason = f"task {task['id']!r} failed: {error}"
        failed = result + [{"kind": "step_result", "task": task["id"], "transition": "fail"}]
        pivot = run.pivot()
        if phase.get("on_error") == "escalate" or pivot is not None:
            yield run.commit(f"failed:{task['id']}", failed + run.move("checkpointed")
                             + [{"kind": "checkpoint", "name": f"failed:{task['id']}"}])
            if pivot is not None and phase.get("on_error") != "escalate":
                reason += f"; irreversible task {pivot!r} already took effect, so nothing is compensated"
            return (yield from _finish(run, "escalated", f"escalated: {reason}"))
        if _compensable(run):
            yield run.commit(f"failed:{task['id']}", failed + [{"kind": "compensation_required", "reason": reason}]
                             + run.move("checkpointed") + run.move("compensating")
                             + [{"kind": "checkpoint", "name": f"failed:{task['id']}"}])
            return (yield from _compensate(run, "failed", reason))
        yield run.commit(f"failed:{task['id']}", failed + run.move("checkpointed")
                         + [{"kind": "checkpoint", "name": f"failed:{task['id']}"}])
        return (yield from _finish(run, "failed", reason))


def _gated(run: _Run, phase: Mapping[str, Any]) -> bool:
    """``True`` when every human gate of the phases before ``phase`` was granted."""
    gates = []
    for p in run.definition.get("phases", ()):
        if p["id"] == phase["id"]:
            break
        if p.get("human_gate"):
            gates.append(p["human_gate"]["approval_id"])
    return bool(gates) and all(g in run.granted for g in gates)


def _compensable(run: _Run) -> bool:
    return any(e["compensation"] for e in run.effects)


def _gate(run: _Run, phase: Mapping[str, Any], gate: Mapping[str, Any], *, last: bool) -> Generator[Request, Any, Any]:
    """Ask a human, wait durably, act on the answer; ``None`` to go on, :data:`REVISE` to go back to the
    gate's ``revise_from`` phase, or the final outcome."""
    approval_id = gate["approval_id"]
    timeout_s = float(gate.get("timeout_s", 86400))
    revision = run.revisions.get(approval_id, 0)
    numbered = {"revision": revision} if revision else {}
    task = f"{phase['id']}.human_gate"
    call = {"tool": "approvals.request", "key": run.key(f"approval/{approval_id}") + (f"/r{revision}" if revision else ""),
            "task": task, "args": {"approval_id": approval_id, "timeout_s": timeout_s, "workflow_id": run.wid,
                                   **numbered}, "attempt": 1, "side_effect": True}
    answer = yield Step(f"gate:{approval_id}" + (f"/r{revision}" if revision else ""), run.enter("running") + [
        {"kind": "step_started", "task": task, "phase": phase["id"], "step_kind": "approval", "attempt": 1}],
        call, probe=f"approval_request:{approval_id}")
    run.heard(answer)
    checkpoint = gate.get("checkpoint") or "approval_request"
    result = [result_event(call, answer)]
    if not answer["ok"]:  # nobody can be asked: hand the run to an operator
        yield run.commit(checkpoint, result + run.move("checkpointed") + [{"kind": "checkpoint", "name": checkpoint}])
        return (yield from _finish(run, "escalated", f"escalated: approval {approval_id!r} could not be requested: "
                                                     f"{answer.get('error')}"))
    requested = float(answer["now"])
    deadline = requested + timeout_s
    yield run.commit(checkpoint, result + [
        {"kind": "step_result", "task": task, "transition": "wait_for_approval"},
        {"kind": "approval_requested", "approval_id": approval_id, "deadline": deadline, "timeout_s": timeout_s,
         **numbered}] + run.move("checkpointed") + run.move("waiting_approval")
        + [{"kind": "checkpoint", "name": checkpoint}])
    while True:
        message = yield Receive(approval_id, deadline)
        kind = message.get("kind")
        received = {"kind": "event_received", "event": kind, "idempotency_key": message.get("key")}
        if kind != "cancel":
            break
        pivot = run.pivot()
        if pivot is None:
            undo = _compensable(run)
            yield run.commit("cancel", [received, {"kind": "cancel_requested", "reason": message.get("reason"),
                                                   "while": run.status}] + (run.move("compensating") if undo else [])
                             + [{"kind": "checkpoint", "name": "cancel"}])
            reason = f"cancelled: {message.get('reason')}"
            if not undo:  # nothing to undo: waiting -> cancelled directly
                return (yield from _finish(run, "cancelled", reason))
            return (yield from _compensate(run, "cancelled", reason))
        yield run.commit("cancel_refused", [received, {
            "kind": "event_ignored", "event": "cancel", "reason": message.get("reason"),
            "why": f"cancel refused: irreversible task {pivot!r} already took effect; the workflow completes forward"},
            {"kind": "checkpoint", "name": "cancel_refused"}])
    if kind == "approval" and message.get("granted"):
        run.granted.add(approval_id)
        events = [received, {"kind": "approval_granted", "approval_id": approval_id, "by": message.get("by")}]
        if last:
            yield run.commit("approval_decision", events + run.move("running") + run.move("checkpointed")
                             + [{"kind": "checkpoint", "name": "approval_decision"}])
            return (yield from _finish(run, "succeeded", "completed: approved, nothing left to run"))
        yield run.commit("approval_decision", events + run.move("running")
                         + [{"kind": "checkpoint", "name": "approval_decision"}])
        return None
    if kind == "approval":
        by = message.get("by")
        reason = f"approval {approval_id!r} denied by {by}"
        events = [received, {"kind": "approval_denied", "approval_id": approval_id, "by": by}]
        on_deny = gate.get("on_deny", "compensate")
        if on_deny == "revise" and revision < int(gate.get("max_revisions", 0)):
            yield from _revise(run, phase, gate, events, by)
            return REVISE
        if on_deny == "revise":
            reason += f" after {revision} revision(s) (max_revisions {gate.get('max_revisions', 0)})"
        yield run.commit("approval_decision", events + run.move("compensating")
                         + [{"kind": "checkpoint", "name": "approval_decision"}])
        return (yield from _compensate(run, "failed", reason, skip=on_deny == "fail"))
    # a timeout
    events = [received, {"kind": "approval_timeout", "approval_id": approval_id, "deadline": deadline}]
    reason = f"approval {approval_id!r} timed out after {timeout_s} s"
    on_timeout = gate.get("on_timeout", "escalate")
    if on_timeout == "escalate":
        yield run.commit("approval_timeout", events + [{"kind": "checkpoint", "name": "approval_timeout"}])
        return (yield from _finish(run, "escalated", f"escalated: {reason}"))
    yield run.commit("approval_timeout", events + run.move("compensating")
                     + [{"kind": "checkpoint", "name": "approval_timeout"}])
    return (yield from _compensate(run, "failed", reason, skip=on_timeout == "fail"))


def _revise(run: _Run, phase: Mapping[str, Any], gate: Mapping[str, Any], events: list[Event],
            by: Any) -> Generator[Request, Any, None]:
    """A ``revise`` denial: the tasks of the phases from ``revise_from`` to this one run again with new keys
    (``WID/TASK/rN``), their results dropped; one commit with ``revision_started``."""
    approval_id = gate["approval_id"]
    revision = run.revisions.get(approval_id, 0) + 1
    run.revisions[approval_id] = revision
    run.granted.discard(approval_id)
    phases = list(run.definition.get("phases", ()))
    start = next(i for i, p in enumerate(phases) if p["id"] == gate["revise_from"])
    end = next(i for i, p in enumerate(phases) if p["id"] == phase["id"])
    steps = [t["id"] for p in phases[start:end + 1] for t in p.get("tasks", ())]
    for task_id in steps:
        run.results.pop(task_id, None)
        run.keys[task_id] = run.key(f"{task_id}/r{revision}")
    run.skipped = [t for t in run.skipped if t not in steps]
    yield run.commit("approval_decision", events + [
        {"kind": "revision_started", "approval_id": approval_id, "revision": revision,
         "max_revisions": gate.get("max_revisions"), "from_phase": gate["revise_from"], "denied_by": by,
         "steps": steps + [f"{phase['id']}.human_gate"]}] + run.move("running")
        + [{"kind": "checkpoint", "name": "approval_decision"}])


def _compensate(run: _Run, final: str, reason: str, *, skip: bool = False) -> Generator[Request, Any, Any]:
    """Undo applied effects in reverse order, each retried under its own budget, then finish with ``final``
    (``escalated`` naming the effect and key when a compensation kept failing retryably). The status is
    already ``compensating`` when it is called with something to undo."""
    todo = [] if skip else [e for e in reversed(run.effects) if e["compensation"]]
    done: list[str] = []
    for effect in todo:
        task = effect["task"]
        key = f"{effect['key']}/compensate"
        args = {"idempotency_key_of_effect": effect["key"], "task": task, "result": run.results.get(task)}
        attempt, not_before = 1, None
        while True:
            call = {"tool": effect["compensation"], "args": args, "key": key, "task": f"{task}.compensation",
                    "attempt": attempt, "side_effect": True}
            if not_before is not None:
                call["not_before"] = not_before
            started = [{"kind": "compensation_started", "task": task, "tool": effect["compensation"],
                        "idempotency_key": key}] if attempt == 1 else []
            answer = yield Step(f"compensate:{task}#{attempt}", run.enter("compensating") + started, call)
            run.heard(answer)
            if answer["ok"] or not answer.get("retryable") or attempt > effect["retries"]:
                break
            not_before = float(answer.get("now") or 0.0) + 2.0 ** attempt
            yield run.commit(f"compensate:{task}", [result_event(call, answer),
                                                    {"kind": "checkpoint", "name": f"compensate:{task}"}])
            attempt += 1
        outcome = {"kind": "compensation_result", "task": task, "ok": bool(answer["ok"]), "idempotency_key": key}
        if not answer["ok"]:
            outcome.update(error=answer.get("error"), retryable=bool(answer.get("retryable")))
        yield run.commit(f"compensate:{task}", [result_event(call, answer), outcome,
                                                {"kind": "checkpoint", "name": f"compensate:{task}"}])
        if answer["ok"]:
            done.append(task)
            continue
        if answer.get("retryable"):
            return (yield from _finish(run, "escalated", f"escalated: {reason}; effect {task!r} (key {effect['key']}) "
                                                         f"was not compensated: {effect['compensation']} failed "
                                                         f"{attempt} time(s) (compensation_retries "
                                                         f"{effect['retries']}): {answer.get('error')}"))
        return (yield from _finish(run, "failed", f"{reason}; compensation of {task!r} failed: {answer.get('error')}"))
    suffix = "; not compensated (policy: fail)" if skip else (f"; compensated: {', '.join(done)}" if done else "")
    return (yield from _finish(run, final, reason + suffix))


def _finish(run: _Run, status: str, reason: str,
            prelude: list[Event] | None = None) -> Generator[Request, Any, dict[str, Any]]:
    """The terminal transition, its checkpoint and ``workflow_finished`` (``prelude``: events to trace first)."""
    yield Step("finish", list(prelude or []))  # no step_started: "finish" is no task of the definition
    yield run.commit("finished", run.move(status) + [{"kind": "checkpoint", "name": "finished"},
                                                     {"kind": "workflow_finished", "status": status,
                                                      "stop_reason": reason}])
    return {"status": status, "stop_reason": reason}
