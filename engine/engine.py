"""The reference durable workflow engine.

Every status move is checked against :data:`crashpoint.engine.states.TRANSITIONS` and
journaled as a ``transition`` trace event. Every side effect is planned in the store
(with its idempotency key) before the tool is called and marked executed in the
checkpoint transaction after it, so a process killed anywhere resumes from its last
durable checkpoint and calls the tool again with the *same* key (at-least-once calls,
effectively-once effects when the tool honours keys).

Source: the protocol of the durable-workflows seed ("receive with an idempotency key;
load state; run a bounded step; checkpoint; decide the next transition; resume from
the last durable checkpoint; record final result, stop reason, side effects").
"""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from crashpoint.engine.decide import compensable, decide_task, next_position, past_pivot, progress
from crashpoint.engine.definition import APPROVAL_TOOL, DefinitionError, Phase, Task, WorkflowDefinition
from crashpoint.engine.lease import Leases
from crashpoint.engine.states import TERMINAL, Status, check_transition
from crashpoint.engine.store import Store
from crashpoint.engine.transitions import (Compensate, Complete, Continue, Fail, Retry, StepResult,
                                           WaitForApproval)
from crashpoint.errors import CrashpointError
from crashpoint.protocols import Clock, Probe, ToolError, ToolPort, no_probe

S = Status
#: The seed's names of the typed transitions, as written in ``step_result`` trace events.
TRANSITION_NAMES = {Continue: "continue", WaitForApproval: "wait_for_approval", Retry: "retry",
                    Compensate: "compensate", Complete: "complete", Fail: "fail"}


def answered(result: Any) -> bool:
    """Whether a tool call's return value is an answer: a non-empty JSON object (:class:`~crashpoint.protocols.ToolPort`
    returns a dict). An empty one or anything else (a provider's garbled body) is not, and the call may still have been
    applied: the engine calls again with the same idempotency key, which the provider answers with the real answer."""
    return isinstance(result, dict) and bool(result)


def _has_task(definition: WorkflowDefinition, effect: dict[str, Any]) -> bool:
    """``True`` when the effect's task is in ``definition`` (a migrated run may have renamed it)."""
    return any(task.id == effect["task"] for _, _, task in definition.tasks)


class UnknownWorkflow(CrashpointError, KeyError):
    """An event or query named a workflow id the store does not hold."""


@dataclass(frozen=True)
class WorkflowStatus:
    """A read-only view of one workflow.

    Attributes:
        workflow_id: the run's id.
        definition: definition name; ``version`` the definition version the run is pinned to.
        status: a :class:`~crashpoint.engine.states.Status` value.
        stop_reason: why a terminal run stopped (``None`` while it runs).
        pending_approval: ``{"approval_id", "deadline", "requested_at"}`` (virtual seconds) or ``None``.
        progress: ``{"tasks_done", "tasks_total", "percent", "phases_done", "phases_total", "eta_s"}``
            (see :func:`crashpoint.engine.decide.progress`; ``eta_s`` in virtual seconds or ``None``).
        last_checkpoint: name of the last durable checkpoint, or ``None``.
    """

    workflow_id: str
    definition: str
    version: int
    status: str
    stop_reason: str | None
    pending_approval: dict[str, Any] | None
    progress: dict[str, Any]
    last_checkpoint: str | None

    @property
    def terminal(self) -> bool:
        """``True`` in a status the workflow never leaves."""
        return Status(self.status) in TERMINAL


class Engine:
    """Runs versioned workflow definitions durably.

    Args:
        db_path: the engine's SQLite file (created when absent).
        tools: the only door to the outside world.
        clock: time source (seconds); backoff sleeps and approval deadlines use it.
        probe: crash-point hook; see :class:`~crashpoint.engine.store.Store` and the
            ``approval_request:ID`` point called before an approval is asked for.
        worker_id: a name written into ``workflow_resumed`` trace events.
        synchronous: the store's SQLite ``synchronous`` setting (see :class:`~crashpoint.engine.store.Store`).

    Raises:
        crashpoint.engine.store.StoreError: the database is unusable.
    """

    def __init__(self, db_path: str | Path, tools: ToolPort, clock: Clock, probe: Probe = no_probe,
                 worker_id: str = "worker", synchronous: str = "NORMAL") -> None:
        self.store = Store(db_path, probe, synchronous)
        self.leases = Leases(db_path)
        self.tools = tools
        self.clock = clock
        self.probe = probe
        self.worker_id = worker_id
        self._seen: set[str] = set()
        self._definitions: dict[tuple[str, int], WorkflowDefinition] = {}

    def close(self) -> None:
        """Release leases and close the store."""
        self.leases.release_all()
        self.store.close()

    # ------------------------------------------------------------------ client API
    def deploy(self, definition: WorkflowDefinition) -> bool:
        """Store ``definition`` under ``(name, version)``; ``False`` if already deployed identically.

        Raises:
            DefinitionError: that version is deployed with a different body (bump the version).
        """
        body = json.dumps(definition.to_dict(), sort_keys=True)
        with self.store.transaction() as conn:
            row = conn.execute("SELECT body FROM definitions WHERE name=? AND version=?",
                               (definition.name, definition.version)).fetchone()
            if row is not None:
                if row["body"] != body:
                    raise DefinitionError(f"{definition.name} v{definition.version} is already deployed with a "
                                          "different body; deploy it as a new version")
                return False
            conn.execute("INSERT INTO definitions VALUES (?, ?, ?, ?)",
                         (definition.name, definition.version, body, self.clock.now()))
        return True

    def start(self, workflow_id: str, workflow: str, input: dict[str, Any] | None = None, *,
              version: int | None = None, initial_step: str | None = None,
              idempotency_key: str | None = None) -> bool:
        """Accept a start request; ``False`` when it is a duplicate (same key or same workflow id).

        The run is pinned to ``version`` (default: the latest deployed). ``initial_step`` is a
        task id to start at (default: the first task).

        Raises:
            DefinitionError: no such definition or step.
        """
        key = idempotency_key or f"start:{workflow_id}"
        now = self.clock.now()
        with self.store.transaction() as conn:
            inserted = conn.execute(
                "INSERT OR IGNORE INTO inbox (workflow_id, kind, payload, idempotency_key, received_at, consumed) "
                "VALUES (?, 'start', ?, ?, ?, 1)", (workflow_id, json.dumps(input or {}), key, now)).rowcount
            exists = conn.execute("SELECT 1 FROM workflows WHERE workflow_id=?", (workflow_id,)).fetchone()
            if not inserted or exists:  # before the definition is read: a duplicate arriving after a deploy
                # that renamed its initial step is still a duplicate of the run pinned to the old version
                self.store.append(conn, workflow_id, now, "event_duplicate", event="start", idempotency_key=key)
                return False
            found = self.store.definition(workflow, version)
            if found is None:  # raised inside the transaction: the inbox row is rolled back
                raise DefinitionError(f"no deployed definition {workflow!r}" + (f" v{version}" if version else ""))
            ver, body = found
            definition = self._definition(workflow, ver)
            phase, task = definition.locate(initial_step) if initial_step else (0, 0)
            state = {"input": input or {}, "phase": phase, "task": task, "stage": "task", "attempt": 0,
                     "phase_started_at": now, "results": {}, "skipped": [], "keys": {}, "side_effects": [],
                     "approvals": {}, "pending_approval": None, "retry_at": None, "compensation": None,
                     "last_checkpoint": None, "trace_id": f"trace-{workflow_id}", "started_at": now}
            self.store.insert_workflow(conn, workflow_id, workflow, ver, S.ACCEPTED.value, state, now)
            self.store.append(conn, workflow_id, now, "workflow_accepted", definition=workflow, version=ver,
                              idempotency_key=key, initial_step=initial_step, trace_id=state["trace_id"])
        return True

    def approve(self, workflow_id: str, approval_id: str, *, granted: bool, by: str = "human",
                idempotency_key: str | None = None) -> bool:
        """Deliver a human decision; ``False`` when this key was already delivered (a duplicate).

        Raises:
            UnknownWorkflow: no such workflow.
        """
        payload = {"approval_id": approval_id, "granted": bool(granted), "by": by}
        key = idempotency_key or f"approval:{workflow_id}:{approval_id}:{'grant' if granted else 'deny'}"
        return self._deliver(workflow_id, "approval", payload, key)

    def cancel(self, workflow_id: str, reason: str = "cancelled by operator", *,
               idempotency_key: str | None = None) -> bool:
        """Request cancellation; it takes effect at the workflow's next step boundary.

        Returns ``False`` for a duplicate delivery. Raises :class:`UnknownWorkflow`.
        """
        return self._deliver(workflow_id, "cancel", {"reason": reason}, idempotency_key or f"cancel:{workflow_id}")

    def _deliver(self, workflow_id: str, kind: str, payload: dict[str, Any], key: str) -> bool:
        now = self.clock.now()
        with self.store.transaction() as conn:
            if conn.execute("SELECT 1 FROM workflows WHERE workflow_id=?", (workflow_id,)).fetchone() is None:
                raise UnknownWorkflow(workflow_id)
            inserted = conn.execute(
                "INSERT OR IGNORE INTO inbox (workflow_id, kind, payload, idempotency_key, received_at) "
                "VALUES (?, ?, ?, ?, ?)", (workflow_id, kind, json.dumps(payload), key, now)).rowcount
            self.store.append(conn, workflow_id, now, "event_received" if inserted else "event_duplicate",
                              event=kind, idempotency_key=key, **payload)
        return bool(inserted)

    def status(self, workflow_id: str) -> WorkflowStatus:
        """The workflow's current durable status. Raises :class:`UnknownWorkflow`."""
        row = self.store.workflow(workflow_id)
        if row is None:
            raise UnknownWorkflow(workflow_id)
        st = self.store.load_state(workflow_id, row)
        definition = self._definition(row["definition"], row["version"])
        return WorkflowStatus(workflow_id, row["definition"], row["version"], row["status"], row["stop_reason"],
                              st["pending_approval"], progress(definition, st, self.clock.now()),
                              st["last_checkpoint"])

    def trace(self, workflow_id: str) -> list[dict[str, Any]]:
        """The workflow's journal: ``[{"seq", "at", "kind", ...}]``."""
        return self.store.journal(workflow_id)

    # ------------------------------------------------------------------ the worker loop
    def run_until_quiescent(self) -> dict[str, str]:
        """Resume every non-terminal workflow from its last durable checkpoint and drive it
        until it ends or waits for a human. A workflow whose lease another live worker holds is
        left to that worker. Returns ``{workflow_id: status}`` (``"leased elsewhere"`` for those)."""
        live = [s.value for s in Status if s not in TERMINAL]
        skipped = {}
        for workflow_id in self.store.workflow_ids(live):
            if not self.leases.try_acquire(workflow_id):
                skipped[workflow_id] = "leased elsewhere"
                continue
            try:
                self.advance(workflow_id)
            finally:
                self.leases.release(workflow_id)
        return {wid: self.store.workflow(wid)["status"] for wid in self.store.workflow_ids()} | skipped

    def advance(self, workflow_id: str) -> str:
        """Drive one workflow until it is terminal or blocked on a human; returns its status."""
        while True:
            row = self.store.workflow(workflow_id)
            status, st = Status(row["status"]), self.store.load_state(workflow_id, row)
            definition = self._definition(row["definition"], row["version"])
            if workflow_id not in self._seen:
                self._seen.add(workflow_id)
                if status not in TERMINAL and status is not S.ACCEPTED:
                    with self.store.transaction() as conn:
                        self.store.append(conn, workflow_id, self.clock.now(), "workflow_resumed",
                                          status=status.value, from_checkpoint=st["last_checkpoint"],
                                          worker=self.worker_id, version=definition.version)
            if status in TERMINAL:
                return status.value
            # a cancel waits for the step boundary: a call planned before a crash, or retried after an
            # error that may hide an applied effect, is settled first (with its idempotency key) so that
            # compensation knows every effect, and so that a pivot that took effect is never cancelled
            if status is not S.COMPENSATING and not self._cancel_must_wait(st) and \
                    self.store.pending_inbox(workflow_id, "cancel"):
                self._cancel(workflow_id, status, st, definition)
            elif status is S.ACCEPTED:
                self._commit("workflow_started", workflow_id, st, [S.ACCEPTED, S.RUNNING],
                             events=[("workflow_started", {"definition": definition.name,
                                                           "version": definition.version})])
            elif status in (S.RUNNING, S.RETRYING):
                self._run_step(workflow_id, status, st, definition)
            elif status is S.WAITING_APPROVAL:
                if not self._check_approval(workflow_id, st, definition):
                    return status.value
            elif status is S.COMPENSATING:
                self._compensate(workflow_id, st, definition)
            else:  # checkpointed is never left durable: every checkpoint moves on in the same transaction
                raise CrashpointError(f"{workflow_id}: unexpected durable status {status.value}")

    # ------------------------------------------------------------------ steps
    def _run_step(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        phase = definition.phases[st["phase"]]
        if st["stage"] == "gate":
            self._request_approval(wid, st, phase)
            return
        task = phase.tasks[st["task"]]
        now = self.clock.now()
        if status is S.RETRYING and st["retry_at"] is not None and now < st["retry_at"]:
            self.clock.sleep(st["retry_at"] - now)
            now = self.clock.now()
        moves = [S.RETRYING, S.RUNNING] if status is S.RETRYING else [S.RUNNING]
        # A step whose call was planned before a crash, or failed with an error that may hide an applied
        # effect, may have had its effect already: it is called again with its key (which reconciles it)
        # rather than failed by a timeout that ran out meanwhile.
        in_flight = task.id in (st.get("in_flight"), st.get("unsettled"))
        if phase.timeout_s is not None and now - st["phase_started_at"] > phase.timeout_s and not in_flight:
            self._task_failed(wid, st, definition, phase, task, moves,
                              f"phase {phase.id!r} exceeded its timeout of {phase.timeout_s} s", retryable=False)
            return
        if task.irreversible and not self._gate_granted(st, definition):
            self._task_failed(wid, st, definition, phase, task, moves,
                              f"irreversible task {task.id!r} refused: no granted approval", retryable=False)
            return
        # st["attempt"] counts recorded failures: an attempt cut short by a crash is not charged
        # to the retry budget (its outcome was never made durable, so it is run again).
        attempt = st["attempt"] + 1
        key = st["keys"].get(task.id) or f"{wid}/{task.id}"
        args = resolve_args(task.args, st)
        st["keys"][task.id] = key
        st["in_flight"] = task.id  # durable with the plan; cleared by the checkpoint of the step's outcome

        def plan(conn: sqlite3.Connection) -> None:
            self._moves(conn, wid, now, moves)
            self.store.append(conn, wid, now, "step_started", task=task.id, phase=phase.id, attempt=attempt)
            self.store.append(conn, wid, now, "tool_call", task=task.id, tool=task.tool, idempotency_key=key,
                              attempt=attempt, args=args, side_effect=task.side_effect)
            if task.side_effect:
                self.store.record_effect(conn, key, wid, task.id, task.tool, "planned", now)
            self.store.save_state(conn, wid, S.RUNNING.value, st, now)

        with self.store.transaction() as conn:
            plan(conn)
        try:
            result = self.tools.call(task.tool, args, key)
        except ToolError as exc:
            self._task_failed(wid, st, definition, phase, task, [S.RUNNING], str(exc), retryable=exc.retryable,
                              attempt=attempt, key=key, maybe_applied=getattr(exc, "maybe_applied", False),
                              wait_s=getattr(exc, "retry_after", None))
            return
        except Exception as exc:  # a tool that breaks its contract is a fatal failure of the step
            self._task_failed(wid, st, definition, phase, task, [S.RUNNING], f"{type(exc).__name__}: {exc}",
                              retryable=False, attempt=attempt, key=key)
            return
        if not self._is_answer(result):  # an empty or garbled answer: the call may have been applied, ask again (same key)
            self._task_failed(wid, st, definition, phase, task, [S.RUNNING],
                              f"{task.tool}: the answer is not an answer ({str(result)[:60]!r}); the call may have "
                              "been applied", retryable=True, attempt=attempt, key=key, maybe_applied=True)
            return
        if task.side_effect:
            st["side_effects"].append({"task": task.id, "tool": task.tool, "idempotency_key": key,
                                       "compensation": task.compensation, "status": "executed"})
        events = [("tool_result", {"task": task.id, "tool": task.tool, "ok": True, "result": result,
                                   "idempotency_key": key, "attempt": attempt})]
        effect = (key, task.id, task.tool, "executed", result) if task.side_effect else None
        outcome = decide_task(definition, st, phase, task, now=self.clock.now(), result=result)
        self._apply(wid, st, task, outcome, events, [S.RUNNING, S.CHECKPOINTED], effect, definition=definition)

    def _is_answer(self, result: Any) -> bool:
        """Whether a task's tool call returned an answer (:func:`answered`)."""
        return answered(result)

    def _task_failed(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition, phase: Phase, task: Task,
                     moves: list[Status], error: str, *, retryable: bool, attempt: int | None = None,
                     key: str | None = None, maybe_applied: bool = False, wait_s: float | None = None) -> None:
        events: list[tuple[str, dict[str, Any]]] = []
        if attempt is not None:
            events.append(("tool_result", {"task": task.id, "tool": task.tool, "ok": False, "error": error,
                                           "retryable": retryable, "idempotency_key": key, "attempt": attempt}))
        outcome = decide_task(definition, st, phase, task, now=self.clock.now(), error=error, retryable=retryable,
                              attempt=attempt, maybe_applied=maybe_applied, key=key, wait_s=wait_s)
        self._apply(wid, st, task, outcome, events, moves + [S.CHECKPOINTED], None, error=error,
                    definition=definition)

    def _apply(self, wid: str, st: dict[str, Any], task: Task, outcome: StepResult,
               events: list[tuple[str, dict[str, Any]]], moves: list[Status], effect: tuple | None,
               error: str | None = None, definition: WorkflowDefinition | None = None) -> None:
        """Apply a step's typed transition in one checkpoint transaction named after the task's checkpoint.

        ``error`` is why the step failed (a tool error, a phase timeout), written into ``task_skipped``.
        A task that is done or skipped is followed by a ``progress`` event (after the checkpoint event,
        in its transaction) when ``definition`` is given.
        """
        now = self.clock.now()
        st.pop("in_flight", None)
        if isinstance(outcome, Retry) and task.side_effect:
            st["unsettled"] = task.id  # a retryable failure may hide an applied effect (a lost answer)
        else:
            st.pop("unsettled", None)
        events = events + [("step_result", {"task": task.id, "transition": TRANSITION_NAMES[type(outcome)]})]
        if isinstance(outcome, (Continue, Complete)):
            patch = dict(outcome.patch)
            done, skipped = patch.pop("result", None), patch.pop("skip", None)
            if done is not None:
                st["results"][done[0]] = done[1]
            if skipped is not None:
                st["skipped"].append(skipped)
                events.insert(-1, ("task_skipped", {"task": skipped, "critical": task.critical, "error": error}))
            st.update(patch)
            after = [] if definition is None else [("progress", {"task": task.id, **progress(definition, st, now)})]
            if isinstance(outcome, Complete):
                reason = f"completed: {len(st['results'])} tasks done, {len(st['skipped'])} skipped"
                self._commit(task.checkpoint, wid, st, moves + [S.SUCCEEDED], events=events, effect=effect,
                             stop_reason=reason, after=after)
            else:
                self._commit(task.checkpoint, wid, st, moves + [S.RUNNING], events=events, effect=effect,
                             after=after)
        elif isinstance(outcome, Retry):
            st.update(attempt=outcome.attempt, retry_at=now + outcome.retry_after_s)
            events.append(("retry_scheduled", {"task": task.id, "attempt": outcome.attempt,
                                               "next_attempt": outcome.attempt + 1, "delay_s": outcome.retry_after_s,
                                               "retry_at": st["retry_at"], "error": outcome.reason}))
            self._commit(task.checkpoint, wid, st, moves + [S.RETRYING], events=events, effect=effect)
        elif isinstance(outcome, Compensate):
            st["compensation"] = {"reason": outcome.reason, "then": outcome.then, "skip": False}
            events.append(("compensation_required", {"reason": outcome.reason}))
            self._commit(task.checkpoint, wid, st, moves + [S.COMPENSATING], events=events, effect=effect)
        elif isinstance(outcome, Fail):
            self._commit(task.checkpoint, wid, st, moves + [Status(outcome.status)], events=events, effect=effect,
                         stop_reason=outcome.reason)
        else:  # WaitForApproval comes from the gate step, never from a task
            raise CrashpointError(f"{wid}: task {task.id!r} returned {outcome!r}")

    # ------------------------------------------------------------------ approvals
    def _request_approval(self, wid: str, st: dict[str, Any], phase: Phase) -> None:
        gate = phase.human_gate
        assert gate is not None
        self.probe(f"approval_request:{gate.approval_id}")
        now = self.clock.now()
        # after a revision the request is a new one: its own key, and its revision number in the record
        revision = st.get("revisions", {}).get(gate.approval_id, 0)
        numbered = {"revision": revision} if revision else {}
        key = f"{wid}/approval/{gate.approval_id}" + (f"/r{revision}" if revision else "")
        step = f"{phase.id}.human_gate"
        args = {"workflow_id": wid, "approval_id": gate.approval_id, "timeout_s": gate.timeout_s, **numbered}
        with self.store.transaction() as conn:
            self.store.append(conn, wid, now, "step_started", task=step, phase=phase.id, attempt=1, step_kind="approval")
            self.store.append(conn, wid, now, "tool_call", task=step, tool=APPROVAL_TOOL, idempotency_key=key,
                              attempt=1, args=args, side_effect=True)
            self.store.record_effect(conn, key, wid, step, APPROVAL_TOOL, "planned", now)
        try:
            result = self.tools.call(APPROVAL_TOOL, args, key)
        except Exception as exc:  # nobody can be asked: hand the run to an operator
            self._commit(gate.checkpoint, wid, st, [S.RUNNING, S.CHECKPOINTED, S.ESCALATED],
                         events=[("tool_result", {"task": step, "tool": APPROVAL_TOOL, "ok": False,
                                                  "error": str(exc), "idempotency_key": key})],
                         stop_reason=f"escalated: approval {gate.approval_id!r} could not be requested: {exc}")
            return
        now = self.clock.now()
        wait = WaitForApproval(approval_id=gate.approval_id, deadline=now + gate.timeout_s)
        st["pending_approval"] = {"approval_id": wait.approval_id, "requested_at": now, "deadline": wait.deadline,
                                  **numbered}
        self._commit(gate.checkpoint, wid, st, [S.RUNNING, S.CHECKPOINTED, S.WAITING_APPROVAL],
                     events=[("tool_result", {"task": step, "tool": APPROVAL_TOOL, "ok": True, "result": result,
                                              "idempotency_key": key}),
                             ("step_result", {"task": step, "transition": TRANSITION_NAMES[WaitForApproval]}),
                             ("approval_requested", {"approval_id": wait.approval_id, "deadline": wait.deadline,
                                                     "timeout_s": gate.timeout_s, **numbered})],
                     effect=(key, step, APPROVAL_TOOL, "executed", result))

    def _check_approval(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition) -> bool:
        """Apply a decision or a timeout; ``False`` while the workflow must keep waiting."""
        pending = st["pending_approval"]
        gate = definition.phases[st["phase"]].human_gate
        assert pending is not None and gate is not None
        # a decision that arrived after the deadline answers an expired request: the timeout wins
        messages = [m for m in self.store.pending_inbox(wid, "approval")
                    if json.loads(m["payload"])["approval_id"] == pending["approval_id"]
                    and m["received_at"] <= pending["deadline"]]
        now = self.clock.now()
        if messages:
            decision = json.loads(messages[0]["payload"])
            consumed = [m["seq"] for m in messages]
            waited = now - pending["requested_at"]
            st["approvals"][pending["approval_id"]] = {"granted": decision["granted"], "by": decision["by"], "at": now}
            st["pending_approval"] = None
            extra = [("event_ignored", {"event": "approval", "inbox_seq": s, "why": "approval already decided"})
                     for s in consumed[1:]]
            if decision["granted"]:
                st.update(next_position(definition, st, now))  # the gate is granted: the next phase, or done
                events = [("approval_granted", {"approval_id": pending["approval_id"], "by": decision["by"],
                                                "waited_s": waited})] + extra
                moves = [S.WAITING_APPROVAL, S.RUNNING]
                if st["stage"] == "done":
                    self._commit("approval_decision", wid, st, moves + [S.CHECKPOINTED, S.SUCCEEDED], events=events,
                                 consume=consumed, stop_reason="completed: approved, nothing left to run")
                else:
                    self._commit("approval_decision", wid, st, moves, events=events, consume=consumed)
            else:
                reason = f"approval {pending['approval_id']!r} denied by {decision['by']}"
                events = [("approval_denied", {"approval_id": pending["approval_id"], "by": decision["by"],
                                               "waited_s": waited})] + extra
                revisions = st.get("revisions", {}).get(gate.approval_id, 0)
                if gate.on_deny == "revise" and revisions < gate.max_revisions:
                    self._revise(wid, st, definition, decision["by"], events, consumed)
                    return True
                if gate.on_deny == "revise":
                    reason += f" after {revisions} revision(s) (max_revisions {gate.max_revisions})"
                st["compensation"] = {"reason": reason, "then": S.FAILED.value, "skip": gate.on_deny == "fail"}
                self._commit("approval_decision", wid, st, [S.WAITING_APPROVAL, S.COMPENSATING], events=events,
                             consume=consumed)
            return True
        if now >= pending["deadline"]:
            reason = f"approval {pending['approval_id']!r} timed out after {gate.timeout_s} s"
            st["pending_approval"] = None
            events = [("approval_timeout", {"approval_id": pending["approval_id"], "deadline": pending["deadline"],
                                            "waited_s": now - pending["requested_at"]})]
            if gate.on_timeout == "escalate":
                self._commit("approval_timeout", wid, st, [S.WAITING_APPROVAL, S.ESCALATED], events=events,
                             stop_reason=f"escalated: {reason}")
            else:
                st["compensation"] = {"reason": reason, "then": S.FAILED.value, "skip": gate.on_timeout == "fail"}
                self._commit("approval_timeout", wid, st, [S.WAITING_APPROVAL, S.COMPENSATING], events=events)
            return True
        return False

    def _revise(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition, denied_by: str,
                events: list[tuple[str, dict[str, Any]]], consumed: list[int]) -> None:
        """A denial of a ``revise`` gate: go back to the first task of its ``revise_from`` phase.

        The revised tasks' results are dropped and each gets a new idempotency key (``WID/TASK/rN`` for
        revision ``N``), so the tools see new requests; the gate's next request is ``.../approval/ID/rN``.
        The work already done stays counted in ``tasks_redone`` (see :func:`~crashpoint.engine.decide.progress`).
        One checkpoint (``approval_decision``) with a ``revision_started`` event naming the steps run again.
        """
        now = self.clock.now()
        phase = definition.phases[st["phase"]]
        gate = phase.human_gate
        assert gate is not None
        revision = st.setdefault("revisions", {}).get(gate.approval_id, 0) + 1
        st["revisions"][gate.approval_id] = revision
        st["approvals"].pop(gate.approval_id, None)  # asked again after the revision
        steps = [t.id for p in definition.revised_span(st["phase"]) for t in p.tasks]
        st["tasks_redone"] = st.get("tasks_redone", 0) + sum(
            1 for t in steps if t in st["results"] or t in st["skipped"])
        for task_id in steps:
            st["results"].pop(task_id, None)
            st["keys"][task_id] = f"{wid}/{task_id}/r{revision}"
        st["skipped"] = [t for t in st["skipped"] if t not in steps]
        start = next(i for i, p in enumerate(definition.phases) if p.id == gate.revise_from)
        st.update(phase=start, task=0, stage="task", phase_started_at=now, attempt=0, retry_at=None)
        events = events + [("revision_started", {"approval_id": gate.approval_id, "revision": revision,
                                                 "max_revisions": gate.max_revisions, "from_phase": gate.revise_from,
                                                 "denied_by": denied_by,
                                                 "steps": steps + [f"{phase.id}.human_gate"]})]
        self._commit("approval_decision", wid, st, [S.WAITING_APPROVAL, S.RUNNING], events=events, consume=consumed)

    def _gate_granted(self, st: dict[str, Any], definition: WorkflowDefinition) -> bool:
        gates = [p.human_gate.approval_id for p in definition.phases[:st["phase"]] if p.human_gate]
        return bool(gates) and all(st["approvals"].get(g, {}).get("granted") for g in gates)

    # ------------------------------------------------------------------ cancellation and compensation
    @staticmethod
    def _cancel_must_wait(st: dict[str, Any]) -> bool:
        """``True`` while a step's call is unsettled (planned before a crash, or retried after an error
        that may hide an applied effect): a cancel takes effect only at a step boundary."""
        return bool(st.get("in_flight") or st.get("unsettled"))

    def _cancel(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        messages = self.store.pending_inbox(wid, "cancel")
        reason = json.loads(messages[0]["payload"])["reason"]
        consumed = [m["seq"] for m in messages]
        pivot = past_pivot(definition, st)
        if pivot is not None:  # a saga completes forward once its pivot took effect (Garcia-Molina & Salem 1987)
            why = f"cancel refused: irreversible task {pivot!r} already took effect; the workflow completes forward"
            self._commit("cancel_refused", wid, st, [status], consume=consumed,
                         events=[("event_ignored", {"event": "cancel", "inbox_seq": s, "reason": reason, "why": why})
                                 for s in consumed])
            return
        events = [("cancel_requested", {"reason": reason, "while": status.value})]
        moves = [S.RETRYING, S.RUNNING] if status is S.RETRYING else [status]
        st["pending_approval"] = None
        if status is not S.ACCEPTED and compensable(st):
            st["compensation"] = {"reason": f"cancelled: {reason}", "then": S.CANCELLED.value, "skip": False}
            if moves[-1] is S.RUNNING:
                moves.append(S.CHECKPOINTED)
            self._commit("cancel", wid, st, moves + [S.COMPENSATING], events=events, consume=consumed)
        else:
            self._commit("cancel", wid, st, moves + [S.CANCELLED], events=events, consume=consumed,
                         stop_reason=f"cancelled: {reason}")

    def _compensate(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        """Undo executed effects in reverse order (saga), one checkpoint each, then stop."""
        comp = st["compensation"]
        todo = [] if comp["skip"] else [e for e in st["side_effects"]
                                        if e["status"] == "executed" and e["compensation"]]
        for effect in reversed(todo):
            key = f"{effect['idempotency_key']}/compensate"
            args = {"idempotency_key_of_effect": effect["idempotency_key"], "task": effect["task"],
                    "result": st["results"].get(effect["task"])}
            now = self.clock.now()
            with self.store.transaction() as conn:
                self.store.append(conn, wid, now, "compensation_started", task=effect["task"],
                                  tool=effect["compensation"], idempotency_key=key)
                self.store.append(conn, wid, now, "tool_call", task=f"{effect['task']}.compensation",
                                  tool=effect["compensation"], idempotency_key=key, attempt=1, args=args,
                                  side_effect=True)
                self.store.record_effect(conn, key, wid, f"{effect['task']}.compensation", effect["compensation"],
                                         "planned", now)
            error, retryable = None, False
            budget = definition.task(effect["task"]).compensation_retries if _has_task(definition, effect) else 3
            for attempt in range(1, budget + 2):  # the first attempt, then its own retries
                try:
                    result = self.tools.call(effect["compensation"], args, key)
                    error = None
                    break
                except ToolError as exc:
                    error, retryable = str(exc), exc.retryable
                    if not exc.retryable or attempt > budget:
                        break
                    self.clock.sleep(max(2.0 ** attempt, getattr(exc, "retry_after", None) or 0.0))
            if error is not None:
                failed = [("compensation_result", {"task": effect["task"], "ok": False, "error": error,
                                                   "retryable": retryable, "idempotency_key": key})]
                if retryable:  # the budget is spent and the effect is still in place: an operator must undo it
                    self._commit(f"compensate:{effect['task']}", wid, st, [S.COMPENSATING, S.ESCALATED], events=failed,
                                 stop_reason=f"escalated: {comp['reason']}; effect {effect['task']!r} (key "
                                             f"{effect['idempotency_key']}) was not compensated: {effect['compensation']} "
                                             f"failed {budget + 1} time(s) (compensation_retries {budget}): {error}")
                    return
                self._commit(f"compensate:{effect['task']}", wid, st, [S.COMPENSATING, S.FAILED], events=failed,
                             stop_reason=f"{comp['reason']}; compensation of {effect['task']!r} failed: {error}")
                return
            effect["status"] = "compensated"
            self._commit(f"compensate:{effect['task']}", wid, st, [S.COMPENSATING],
                         events=[("tool_result", {"task": f"{effect['task']}.compensation",
                                                  "tool": effect["compensation"], "ok": True, "result": result,
                                                  "idempotency_key": key}),
                                 ("compensation_result", {"task": effect["task"], "ok": True})],
                         effect=(effect["idempotency_key"], effect["task"], effect["tool"], "compensated", None),
                         effect2=(key, f"{effect['task']}.compensation", effect["compensation"], "executed", result))
        done = [e["task"] for e in st["side_effects"] if e["status"] == "compensated"]
        suffix = "; not compensated (policy: fail)" if comp["skip"] else (
            f"; compensated: {', '.join(done)}" if done else "")
        self._commit("compensated", wid, st, [S.COMPENSATING, Status(comp["then"])],
                     stop_reason=f"{comp['reason']}{suffix}")

    # ------------------------------------------------------------------ the checkpoint transaction
    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], *,
                events: list[tuple[str, dict[str, Any]]] = (), effect: tuple | None = None,
                effect2: tuple | None = None, consume: list[int] = (), stop_reason: str | None = None,
                after: list[tuple[str, dict[str, Any]]] = ()) -> None:
        """One checkpoint transaction: transitions, trace events, effect audit, state, inbox consumption;
        ``after`` are trace events written after the ``checkpoint`` event (before ``workflow_finished``)."""
        now = self.clock.now()
        final = moves[-1]
        st["last_checkpoint"] = name
        if final in TERMINAL and not stop_reason:
            raise CrashpointError(f"{wid}: terminal status {final.value} needs a stop reason")

        def write(conn: sqlite3.Connection) -> None:
            for kind, data in events:
                self.store.append(conn, wid, now, kind, **data)
            self._moves(conn, wid, now, moves)
            for rec in (effect, effect2):
                if rec is not None:
                    key, task_id, tool, status, result = rec
                    self.store.record_effect(conn, key, wid, task_id, tool, status, now, result)
            for seq in consume:
                conn.execute("UPDATE inbox SET consumed=1 WHERE seq=?", (seq,))
            self.store.save_state(conn, wid, final.value, st, now, stop_reason)

        def finish(conn: sqlite3.Connection) -> None:
            for kind, data in after:
                self.store.append(conn, wid, now, kind, **data)
            if final in TERMINAL:
                self.store.append(conn, wid, now, "workflow_finished", status=final.value, stop_reason=stop_reason,
                                  side_effects=st["side_effects"])

        self.store.checkpoint(name, wid, now, write, finish if final in TERMINAL or after else None)

    def _moves(self, conn: sqlite3.Connection, wid: str, now: float, moves: list[Status]) -> None:
        for src, dst in zip(moves, moves[1:]):
            check_transition(src, dst)
            self.store.append(conn, wid, now, "transition", **{"from": src.value, "to": dst.value})

    def _definition(self, name: str, version: int) -> WorkflowDefinition:
        if (name, version) not in self._definitions:
            found = self.store.definition(name, version)
            if found is None:
                raise DefinitionError(f"definition {name!r} v{version} is not deployed in {self.store.path}")
            self._definitions[(name, version)] = WorkflowDefinition.from_dict(found[1])
        return self._definitions[(name, version)]


def resolve_args(args: dict[str, Any], st: dict[str, Any]) -> dict[str, Any]:
    """Resolve ``$input.a.b`` and ``$result.task.field`` references in a task's arguments.

    A reference to a missing value resolves to ``None``; other values pass through.
    """
    def get(value: Any) -> Any:
        if not isinstance(value, str) or not value.startswith(("$input.", "$result.")):
            return value
        root, *path = value[1:].split(".")
        node: Any = st["input"] if root == "input" else st["results"]
        for part in path:
            node = node.get(part) if isinstance(node, dict) else None
        return node
    return {k: get(v) for k, v in args.items()}

