"""Deliberately broken engines: each subclass of the reference engine has exactly one bug.

They exist so that ``tests/quality/test_quality.py`` can show that the harness's oracles catch real
bugs (the ``quality/`` idea of Hypothesis's test tree). Each docstring says what the bug is,
which failure mode of the durable-workflows seed ("Modos de falla") it models, and which
oracle is expected to catch it. Worker processes import them as ``variants.engines:NAME``
(``tests/`` is put on ``PYTHONPATH`` by ``tests/conftest.py``).

Test code only: never use these engines for anything else.
"""

from __future__ import annotations

import json
import os
import sqlite3
import uuid
from dataclasses import replace
from typing import Any

from crashpoint.engine.decide import next_position
from crashpoint.engine.definition import APPROVAL_TOOL, Phase, WorkflowDefinition
from crashpoint.engine.engine import Engine, resolve_args
from crashpoint.engine.states import TERMINAL, Status
from crashpoint.protocols import ToolError

S = Status


class EffectBeforeCheckpointNoKey(Engine):
    """Bug: every tool call gets a fresh idempotency key (``<wid>/<task>@<uuid4>``).

    The key is still planned and traced, but it is minted anew on every attempt instead of
    being reused from the durable state, so a worker killed after the effect and before its
    checkpoint repeats the effect on resume: the ledger sees a new key, i.e. a new effect.
    A fault-free run looks perfect.

    Seed failure mode: "side-effect steps are retried without idempotency".
    Caught by: ``side_effects`` (effect applied twice) and ``differential`` (extra effects),
    only in crashed runs.
    """

    def _run_step(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        if st["stage"] != "gate":
            task = definition.phases[st["phase"]].tasks[st["task"]]
            st["keys"][task.id] = f"{wid}/{task.id}@{uuid.uuid4().hex}"  # the bug: never reused
        super()._run_step(wid, status, st, definition)


class ApprovalInMemory(Engine):
    """Bug: a human's approval decision lives only in this process's memory.

    The decision is consumed from the inbox and the workflow moves on, but it is dropped from
    the durable ``st["approvals"]`` and kept in ``self._granted``; the irreversible-task check
    reads that dict. In one process everything works; after a kill between the decision
    and the irreversible step, the resumed worker has no grant and refuses to issue the refund.

    Seed failure mode: "approval state is kept only in the chat history and disappears after
    a restart".
    Caught by: ``differential`` and ``final_status`` (golden succeeded, the crashed run
    fails), only in crashed runs.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._granted: dict[tuple[str, str], bool] = {}  # (trace id, approval id) -> granted
        self._deciding = False

    def _check_approval(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition) -> bool:
        self._deciding = True
        try:
            return super()._check_approval(wid, st, definition)
        finally:
            self._deciding = False

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        if self._deciding:
            for approval_id, decision in st["approvals"].items():
                self._granted[(st["trace_id"], approval_id)] = bool(decision["granted"])
            st["approvals"] = {}  # the bug: the decision never reaches the durable state
        super()._commit(name, wid, st, moves, **kwargs)

    def _gate_granted(self, st: dict[str, Any], definition: WorkflowDefinition) -> bool:
        gates = [p.human_gate.approval_id for p in definition.phases[:st["phase"]] if p.human_gate]
        return bool(gates) and all(self._granted.get((st["trace_id"], g)) for g in gates)


class NoCompensationOnCancel(Engine):
    """Bug: cancellation goes straight to ``cancelled`` without compensating executed effects.

    A cancel while waiting for approval leaves the refund draft open in the refund service.

    Seed failure mode: "compensation is missing for partially completed external actions"
    (and "cancellation stops the UI but not the underlying tool").
    Caught by: ``side_effects`` (cancelled after draft_refund, its compensation never ran),
    already in the golden run.
    """

    def _cancel(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        messages = self.store.pending_inbox(wid, "cancel")
        reason = json.loads(messages[0]["payload"])["reason"]
        moves = [S.RETRYING, S.RUNNING] if status is S.RETRYING else [status]
        st["pending_approval"] = None
        self._commit("cancel", wid, st, moves + [S.CANCELLED],
                     events=[("cancel_requested", {"reason": reason, "while": status.value})],
                     consume=[m["seq"] for m in messages], stop_reason=f"cancelled: {reason}")


class TerminalWithoutStopReason(Engine):
    """Bug: terminal states are written with an empty stop reason.

    ``_commit`` is reimplemented without the base class's guard, and every terminal move is
    saved (and reported in ``workflow_finished``) with ``stop_reason=""``.

    Seed failure mode: "traces show the final output but not ..." -- the seed's evaluation
    item "every final result has a stop reason and a side-effect audit" fails.
    Caught by: ``trace`` ("terminal status ... has no stop reason"), already in the golden run.
    """

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], *,
                events: list[tuple[str, dict[str, Any]]] = (), effect: tuple | None = None,
                effect2: tuple | None = None, consume: list[int] = (), stop_reason: str | None = None,
                after: list[tuple[str, dict[str, Any]]] = ()) -> None:
        now = self.clock.now()
        final = moves[-1]
        st["last_checkpoint"] = name
        if final in TERMINAL:
            stop_reason = ""  # the bug (and no guard to stop it)

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
            if final in TERMINAL:
                self.store.append(conn, wid, now, "workflow_finished", status=final.value, stop_reason=stop_reason,
                                  side_effects=st["side_effects"])

        self.store.checkpoint(name, wid, now, write)


class IllegalTransition(Engine):
    """Bug: a granted approval moves ``waiting_approval -> checkpointed -> running``.

    ``_moves`` no longer checks the transition table, and the approval decision journals a
    ``waiting_approval -> checkpointed`` move the table forbids (the seed's map has
    ``WaitingApproval --> Running: approved``). The end state and the effects are right; only
    the trace shows the state machine was not followed.

    Seed failure mode: a violation of the seed's transition map ("use this map to check that
    every transition has a durable checkpoint, a trace event and an owner").
    Caught by: ``trace`` ("illegal transition waiting_approval -> checkpointed"), already in
    the golden run.
    """

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        if moves[:2] == [S.WAITING_APPROVAL, S.RUNNING]:
            moves = [S.WAITING_APPROVAL, S.CHECKPOINTED, *moves[1:]]  # the bug
        super()._commit(name, wid, st, moves, **kwargs)

    def _moves(self, conn: sqlite3.Connection, wid: str, now: float, moves: list[Status]) -> None:
        for src, dst in zip(moves, moves[1:]):  # no check_transition
            self.store.append(conn, wid, now, "transition", **{"from": src.value, "to": dst.value})


class IssueWithoutApproval(Engine):
    """Bug: the human gate is skipped; the workflow moves on as if the approval had been granted.

    ``_request_approval`` asks nobody and waits for no decision: it writes a grant nobody gave
    into the durable state (so the irreversible-task check passes) and goes straight to the
    next phase, where the irreversible refund is issued. The end state looks like a success.

    Seed failure mode: "an irreversible action runs without the human approval that gates it".
    Caught by: ``side_effects`` ("issue_refund applied without a granted approval ... before
    it"), already in the golden run.
    """

    def _request_approval(self, wid: str, st: dict[str, Any], phase: Phase) -> None:
        gate = phase.human_gate
        assert gate is not None
        row = self.store.workflow(wid)
        definition = self._definition(row["definition"], row["version"])
        st["approvals"][gate.approval_id] = {"granted": True, "by": "nobody (never asked)",  # the bug
                                             "at": self.clock.now()}
        st.update(next_position(definition, st, self.clock.now()))
        self._commit(gate.checkpoint, wid, st, [S.RUNNING, S.CHECKPOINTED, S.RUNNING],
                     events=[("step_result", {"task": f"{phase.id}.human_gate", "transition": "continue"})])


class ReasksApprovalOnResume(Engine):
    """Bug: a worker that resumes a workflow waiting for approval asks the human again, with a fresh key.

    The first request is made and checkpointed correctly. But every new worker process that
    finds the workflow ``waiting_approval`` sends the approval request once more, keyed with
    its own process id (``<wid>/approval/<id>#pid<N>``) instead of the durable key, so the
    approvals service sees a new request each time and the human is asked again after every
    restart. The re-request is traced and checkpointed like the first one.

    Seed failure mode: "approval state is kept only in the chat history and disappears after
    a restart" (the engine forgets it already asked).
    Caught by: ``side_effects`` ("approval ... was requested from a human N times"), in any
    run where a worker resumes a waiting workflow (the golden run of a case with a restart).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._resumed_waiting: set[str] = set()

    def advance(self, workflow_id: str) -> str:
        if workflow_id not in self._seen:
            row = self.store.workflow(workflow_id)
            if row is not None and row["status"] == S.WAITING_APPROVAL.value:
                self._resumed_waiting.add(workflow_id)
        return super().advance(workflow_id)

    def _check_approval(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition) -> bool:
        if wid in self._resumed_waiting:
            self._resumed_waiting.discard(wid)
            self._ask_again(wid, st, definition)
        return super()._check_approval(wid, st, definition)

    def _ask_again(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        phase = definition.phases[st["phase"]]
        gate = phase.human_gate
        assert gate is not None
        now = self.clock.now()
        key = f"{wid}/approval/{gate.approval_id}#pid{os.getpid()}"  # the bug: a fresh key per process
        step = f"{phase.id}.human_gate"
        args = {"workflow_id": wid, "approval_id": gate.approval_id, "timeout_s": gate.timeout_s}
        with self.store.transaction() as conn:
            self.store.append(conn, wid, now, "step_started", task=step, phase=phase.id, attempt=1,
                              step_kind="approval")
            self.store.append(conn, wid, now, "tool_call", task=step, tool=APPROVAL_TOOL, idempotency_key=key,
                              attempt=1, args=args, side_effect=True)
            self.store.record_effect(conn, key, wid, step, APPROVAL_TOOL, "planned", now)
        result = self.tools.call(APPROVAL_TOOL, args, key)
        pending = st["pending_approval"]
        self._commit(gate.checkpoint, wid, st, [S.WAITING_APPROVAL],
                     events=[("tool_result", {"task": step, "tool": APPROVAL_TOOL, "ok": True, "result": result,
                                              "idempotency_key": key}),
                             ("approval_requested", {"approval_id": pending["approval_id"],
                                                     "deadline": pending["deadline"], "timeout_s": gate.timeout_s})],
                     effect=(key, step, APPROVAL_TOOL, "executed", result))


class NoCheckpointAfterEffect(Engine):
    """Bug: the draft's result is saved in a plain transaction, not a checkpoint.

    After ``refunds.draftRefundRequest`` returns, the tool result, the state and the move to
    the next step are written in one transaction as usual, but through
    ``Store.transaction`` instead of ``Store.checkpoint``: no ``checkpoint`` trace event is
    written (and the ``before_checkpoint``/``after_checkpoint`` crash points are not passed).
    The durable state is right; the trace cannot show where the run may resume from.

    Seed failure mode: "traces show the final output but not ..." -- the seed's check "every
    transition has a durable checkpoint, a trace event and an owner" fails for the draft.
    Caught by: ``trace`` ("no checkpoint after refunds.draftRefundRequest before the next
    step"), already in the golden run.
    """

    UNCHECKPOINTED = "refund_draft"

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        if name != self.UNCHECKPOINTED:
            super()._commit(name, wid, st, moves, **kwargs)
            return
        store = self.store

        def plain(_name: str, _wid: str, _at: float, write: Any, then: Any = None) -> None:
            with store.transaction() as conn:  # the bug: no checkpoint event
                write(conn)
                if then is not None:
                    then(conn)

        store.checkpoint = plain  # type: ignore[method-assign]
        try:
            super()._commit(name, wid, st, moves, **kwargs)
        finally:
            del store.checkpoint


class NoCheckpointAfterApprovalRequest(NoCheckpointAfterEffect):
    """Bug: the approval request is recorded without a checkpoint (see :class:`NoCheckpointAfterEffect`).

    Caught by: ``trace`` ("no checkpoint after approval refund_approval"), even in cases whose
    next commit (a cancel, a decision, a timeout) writes a checkpoint of its own.
    """

    UNCHECKPOINTED = "approval_request"


# Three bugs found by the adversarial review: each passed every oracle before the oracles
# learnt to check the order of effects, their arguments, and steps re-run after a checkpoint.

class NotifyBeforeIssue(Engine):
    """Bug: runs the ``issue`` phase's tasks in reverse, so the customer is told before the refund exists.

    Caught by: ``side_effects`` ("effect notify_customer was applied before effect issue_refund"),
    from the pack's ``after`` ordering, already in the golden run.
    """

    def _definition(self, name: str, version: int) -> Any:
        # built past the definition check, which refuses a task reading a later task's result
        definition = super()._definition(name, version)
        return replace(definition, phases=tuple(replace(p, tasks=tuple(reversed(p.tasks))) if p.id == "issue" else p
                                                for p in definition.phases))


class LostArgOnResume(Engine):
    """Bug: the refund id passed to the notification lives in process memory; after a kill between
    issuing and notifying, the resumed worker e-mails the customer with ``refund_id: null``.

    Seed failure mode: "workflow state kept apart from model context" -- here it is not.
    Caught by: ``differential`` (same effect, same key, other arguments than the golden run).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._issued: set[str] = set()

    def _run_step(self, wid: str, status: Status, st: dict[str, Any], definition: Any) -> None:
        phase = definition.phases[st["phase"]]
        task = phase.tasks[st["task"]] if st["stage"] == "task" else None
        if task is not None and task.id == "issue_refund":
            self._issued.add(wid)
        if task is not None and task.id == "notify_customer" and wid not in self._issued:
            st["results"]["issue_refund"] = {}
        super()._run_step(wid, status, st, definition)


class ReplayFromStart(Engine):
    """Bug: a resumed worker ignores the durable cursor and replays the workflow from its first task.

    The tools' idempotency keys hide the repeated effects (the ledger records ``duplicate``),
    so only "resumed without losing its place" shows it. Seed failure mode: "the workflow cannot
    resume because the current step is implicit". Caught by: ``trace`` ("ran again after its
    result was checkpointed") and ``side_effects`` (more repeated calls than kills).
    """

    def advance(self, wid: str) -> str:
        if wid not in self._seen:
            row = self.store.workflow(wid)
            if row is not None and row["status"] in ("running", "retrying"):
                st = self.store.load_state(wid)
                st.update(phase=0, task=0, stage="task", attempt=0, retry_at=None, results={}, side_effects=[])
                with self.store.transaction() as conn:
                    self.store.save_state(conn, wid, row["status"], st, self.clock.now())
        return super().advance(wid)


class NoLease(Engine):
    """Bug: no per-workflow lease, so two recovering workers run the same workflow at once.

    Caught by: ``tests/integration/test_recovery.py`` (the ledger shows the same step called by both workers).
    """

    def run_until_quiescent(self) -> dict[str, str]:
        live = [s.value for s in Status if s not in TERMINAL]
        for workflow_id in self.store.workflow_ids(live):
            self.advance(workflow_id)
        return {wid: self.store.workflow(wid)["status"] for wid in self.store.workflow_ids()}


# Bugs that only the fault kinds of the fault model expose (tool_timeout, tool_lost_response,
# tool_slow, early approvals, deploys): a fault-free run, and a plain retryable failure, look fine.

class NewKeyOnRetry(Engine):
    """Bug: the idempotency key includes the attempt number (``<wid>/<task>#attempt<N>`` from the second try on).

    The key is durable and stable across crashes (the attempt count is checkpointed), so kills
    alone do not show it, and neither do failures that applied nothing (a 503, a timeout). When
    the effect was applied and only the answer was lost, the retry's new key is a new effect.

    Seed failure mode: "side-effect steps are retried without idempotency".
    Caught by: ``side_effects`` ("effect draft_refund ... applied 2 times") on a ``tool_lost_response``
    case, already in the golden run.
    """

    def _run_step(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        if st["stage"] != "gate" and st["attempt"] > 0:
            task = definition.phases[st["phase"]].tasks[st["task"]]
            st["keys"][task.id] = f"{wid}/{task.id}#attempt{st['attempt'] + 1}"  # the bug: a key per attempt
        super()._run_step(wid, status, st, definition)


class NewKeyAfterTimeout(Engine):
    """Bug: a call that timed out is taken for one that never reached the service, so its retry gets a
    new idempotency key (``<key>~after-timeout<N>``).

    A timeout only says that no answer came in time: the request may have landed after the caller
    gave up. A plain ``timeout`` fault (nothing applied) and a ``lost_response`` (a connection reset,
    retried under the same key) both pass, and so do kills; only a tool that answers after its timeout
    (fault kind ``late_answer``) applies the effect twice.

    Seed failure mode: "side-effect steps are retried without idempotency".
    Caught by: ``side_effects`` ("effect draft_refund ... applied 2 times") on a ``late_answer`` fault,
    already in the golden run.
    """

    def _task_failed(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition, phase: Phase, task: Any,
                     moves: list[Status], error: str, *, retryable: bool, **kwargs: Any) -> None:
        if retryable and "timeout" in error and task.side_effect:
            key = st["keys"].get(task.id) or f"{wid}/{task.id}"
            st["keys"][task.id] = f"{key.split('~')[0]}~after-timeout{st['attempt'] + 1}"  # the bug
        super()._task_failed(wid, st, definition, phase, task, moves, error, retryable=retryable, **kwargs)


class TimeoutNotRetried(Engine):
    """Bug: a tool error that says ``timeout`` is treated as fatal, although it is retryable.

    Seed failure mode: a transient fault ends the workflow ("retries" that never happen).
    Caught by: ``final_status`` ("expected final status succeeded, got failed") on a
    ``tool_timeout`` case, already in the golden run; a 503 is still retried.
    """

    def _task_failed(self, wid: str, st: dict[str, Any], definition: WorkflowDefinition, phase: Phase, task: Any,
                     moves: list[Status], error: str, *, retryable: bool, **kwargs: Any) -> None:
        if "timeout" in error:
            retryable = False  # the bug
        super()._task_failed(wid, st, definition, phase, task, moves, error, retryable=retryable, **kwargs)


class PhaseTimeoutPerTask(Engine):
    """Bug: the phase's timer restarts at every task, so a phase's ``timeout_s`` bounds each task, not the phase.

    Only a phase whose tasks together take longer than its timeout shows it: a ``tool_slow`` call
    that eats the issue phase's hour, after which the notification goes out anyway.

    Seed failure mode: a deadline that is never enforced ("the workflow runs past its time budget").
    Caught by: ``side_effects`` ("expected effect notify_customer applied 0 time(s), got 1") and
    ``trace`` (``task_skipped`` missing) on a ``tool_slow`` case, already in the golden run.
    """

    def _run_step(self, wid: str, status: Status, st: dict[str, Any], definition: WorkflowDefinition) -> None:
        if st["stage"] == "task" and status is S.RUNNING:
            st["phase_started_at"] = self.clock.now()  # the bug
        super()._run_step(wid, status, st, definition)


class IgnoresEarlyApproval(Engine):
    """Bug: when the workflow starts waiting for an approval it discards the decisions already in its inbox.

    A decision that arrives before the wait is registered (the human was quick, or the message
    overtook the request) is consumed as stale, in the approval request's checkpoint; the workflow
    then waits for an answer that already came, and escalates when the deadline passes.

    Seed failure mode: "approval arrives before the wait is registered" (a lost signal).
    Caught by: ``final_status`` ("expected final status succeeded, got escalated") on a case with an
    approval ``before_wait: true``, already in the golden run.
    """

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        if moves[0] is S.RUNNING and moves[-1] is S.WAITING_APPROVAL:
            stale = [m["seq"] for m in self.store.pending_inbox(wid, "approval")]  # the bug: dropped
            kwargs["consume"] = [*kwargs.get("consume", ()), *stale]
            kwargs["events"] = [("event_ignored", {"event": "approval", "inbox_seq": s,
                                                   "why": "arrived before the wait"}) for s in stale] + \
                list(kwargs.get("events", ()))
        super()._commit(name, wid, st, moves, **kwargs)


class RunsLatestVersion(Engine):
    """Bug: a worker runs every workflow on the latest deployed definition instead of the version it is pinned to.

    While nothing is deployed mid-run this is invisible. After a ``deploy`` of version 2 (which
    renames the draft task, and so where the issue task reads the draft id from), a resumed run
    reads its version-1 state with version-2 code: the refund is issued for no draft, fails, and the
    draft is compensated.

    Seed failure mode: "workflow definitions change under running instances" (no versioning).
    Caught by: ``trace`` ("changed definition version mid-run") and ``final_status`` ("expected final
    status succeeded, got failed"), already in the golden run.
    """

    def _definition(self, name: str, version: int) -> WorkflowDefinition:
        latest = self.store.definition(name)
        return super()._definition(name, latest[0] if latest else version)  # the bug: ignores the pinned version


class DuplicateStartForks(Engine):
    """A start request the engine does not recognise as a duplicate starts a second run.

    Models "duplicated events" of the seed: a retried start request forks the workflow, so
    the refund is drafted twice under two keys. Found by duplicate delivery of the start
    request; caught by ``side_effects`` (an effect applied twice).
    """

    def start(self, workflow_id: str, workflow: str, input: dict[str, Any] | None = None, **kw: Any) -> bool:
        if super().start(workflow_id, workflow, input, **kw):
            return True
        n = len(self.store.workflow_ids()) + 1
        kw["idempotency_key"] = f"{kw.get('idempotency_key') or workflow_id}#{n}"
        return super().start(f"{workflow_id}-{n}", workflow, input, **kw)


class CancelIgnoresInFlight(Engine):
    """A cancel is honoured in the middle of a step, before the step's call has settled.

    Models a cancellation racing a step: the cancel that arrives while a refund is being
    issued compensates the draft though the refund (the saga's pivot) went out. Found by a
    cancellation held at a crash point inside the step; caught by ``side_effects``.
    """

    @staticmethod
    def _cancel_must_wait(st: dict[str, Any]) -> bool:
        return False


class RetriesOffByOne(Engine):
    """``retries: N`` allows N attempts instead of N retries (N + 1 attempts).

    Models a retry budget computed wrong. Kills alone do not show it, nor do failures the case
    scripts itself beyond the budget; a transient fault within the budget (which a correct
    engine must hide) makes the run fail. Found by generated tool faults (``retryable`` x3 on a
    task with ``retries: 3``); caught by ``final_status`` / ``differential``.
    """

    def _task_failed(self, wid, st, definition, phase, task, moves, error, *, retryable, attempt=None, **kw):
        if retryable and attempt is not None and attempt >= task.retries:
            retryable = False  # the bug: the last allowed retry is never made
        super()._task_failed(wid, st, definition, phase, task, moves, error, retryable=retryable, attempt=attempt,
                             **kw)


class FatalRetried(Engine):
    """A non-retryable (fatal) tool error is retried like a transient one.

    Models retry loops that ignore the error class: the tool keeps refusing (a fatal refusal is
    sticky for its key), the engine keeps asking. Found by a generated ``fatal`` tool fault;
    caught by ``trace`` ("retried after a non-retryable error").
    """

    def _task_failed(self, wid, st, definition, phase, task, moves, error, *, retryable, attempt=None, **kw):
        super()._task_failed(wid, st, definition, phase, task, moves, error, retryable=attempt is not None,
                             attempt=attempt, **kw)


class DeadlineResetOnResume(Engine):
    """Each new worker process restarts the approval's deadline from its own start time.

    Models a deadline kept as "time left" in memory instead of an absolute time in the store:
    after a clock jump across a restart, the approval never times out and a late grant is
    honoured. Found by a generated clock jump; caught by ``side_effects`` (an expired request
    honoured) or ``trace`` (still waiting past the deadline).
    """

    def _check_approval(self, wid, st, definition):
        seen = self.__dict__.setdefault("_reset", set())
        pending = st.get("pending_approval")
        if pending and wid not in seen:
            seen.add(wid)
            gate = definition.phases[st["phase"]].human_gate
            pending["deadline"] = self.clock.now() + gate.timeout_s  # the bug: relative to this process
        return super()._check_approval(wid, st, definition)


class SecondRecoveryNewKey(Engine):
    """A recovery that finds the previous recovery of the same step interrupted gives up on the
    step's idempotency key and calls the tool under a new one.

    Models "crash during recovery": one kill is handled (same key, the tool deduplicates), a
    second kill during that recovery makes the engine assume the first call never landed. Found
    only by two kills (``A >> B``); caught by ``side_effects`` (an effect applied twice, when the
    first call landed) or ``differential`` (the effect went out under another key).
    """

    def _run_step(self, wid, status, st, definition):
        if st["stage"] != "gate":
            task = definition.phases[st["phase"]].tasks[st["task"]]
            if st.get("in_flight") == task.id:
                if st.get("recovering") == task.id:
                    st["keys"][task.id] = f"{wid}/{task.id}/recovered"  # the bug
                else:
                    st["recovering"] = task.id  # saved with the step's plan
        super()._run_step(wid, status, st, definition)


class IgnoresAgentVerdict(Engine):
    """Bug: an agent step's verdict is ignored; an ``uncertain`` or ``evidence_missing`` answer is
    taken as a result and the workflow goes on (every task's ``agent`` flag is dropped).

    Seed failure mode: the agent "returns an uncertain result" and the workflow acts on it; the
    durable-workflows seed asks that such an answer escalate and never let the run report success.
    Caught by: ``agent`` (the ledger holds an unsure answer of an agent tool, yet the run succeeded)
    and ``final_status``, already in the golden run of the ads-audit pack's escalation cases.
    """

    def _definition(self, name: str, version: int) -> WorkflowDefinition:
        definition = super()._definition(name, version)
        return replace(definition, phases=tuple(
            replace(p, tasks=tuple(replace(t, agent=False) for t in p.tasks)) for p in definition.phases))


# Bugs of issue 15 ("catch what slips through"): each passed every oracle and every pack before the rule
# or fault kind named in its docstring existed. Written to the issue's descriptions, not to one case.

def _resumed_mid_step(engine: Engine, wid: str) -> tuple[Any, dict[str, Any]] | None:
    """``(row, state)`` when this process has not seen ``wid`` yet and finds it mid-step (``running`` or
    ``retrying``: a worker died there), else ``None``."""
    if wid in engine._seen:
        return None
    row = engine.store.workflow(wid)
    if row is None or row["status"] not in (S.RUNNING.value, S.RETRYING.value):
        return None
    return row, engine.store.load_state(wid, row)


class AttemptsResetOnRestart(Engine):
    """Bug: the attempt count of a retried task lives in the worker's memory; a new worker process that
    resumes a retrying task starts counting at attempt 1 again.

    A task with ``retries: 3`` allows 4 attempts; an outage longer than that, with a kill between two
    failed attempts, makes 4 more calls after the kill (attempt numbers 1, 2, 1, 2, 3, 4). The run still
    fails with the right reason, each call carries the right key, the effects are right.

    Seed failure mode: "retries without a budget" (a retry policy that a restart resets).
    Caught by: ``side_effects.retry_budget`` (calls of one key, counted across workers, past the
    budget plus one per kill) and ``trace.attempts_monotonic`` (attempt numbers went back), in crashed
    runs of an outage case.
    """

    def advance(self, workflow_id: str) -> str:
        found = _resumed_mid_step(self, workflow_id)
        if found is not None and found[1].get("attempt"):
            row, st = found
            st["attempt"] = 0  # the bug: this process counts from scratch
            with self.store.transaction() as conn:
                self.store.save_state(conn, workflow_id, row["status"], st, self.clock.now())
        return super().advance(workflow_id)


class LateDuplicateStartForks(Engine):
    """Bug: a start request is deduplicated only while the first one waits for a worker.

    The engine's dedup window covers requests that no worker has picked up yet (``accepted``); a start
    request with the same idempotency key that arrives after the run began is taken as a new one and
    starts a second run under a derived workflow id. Back-to-back duplicates (the packs' duplicate-start
    cases) are recognised.

    Seed failure mode: "duplicated events" (a retried start request, late).
    Caught by: ``side_effects`` (the draft applied twice, under two keys) once a duplicate start is
    delivered after the first worker ran (a ``duplicate`` event, or one delivered at a crash point).
    """

    def start(self, workflow_id: str, workflow: str, input: dict[str, Any] | None = None, **kw: Any) -> bool:
        row = self.store.workflow(workflow_id)
        if row is None or row["status"] == S.ACCEPTED.value:
            return super().start(workflow_id, workflow, input, **kw)
        n = len(self.store.workflow_ids()) + 1  # the bug: outside the window, a "new" request
        kw["idempotency_key"] = f"{kw.get('idempotency_key') or workflow_id}#{n}"
        return super().start(f"{workflow_id}-{n}", workflow, input, **kw)


class ReconfirmsLastEffectOnResume(Engine):
    """Bug: a worker that resumes a workflow a dead worker left mid-run calls the tool of the last
    executed side effect again, under its key, "to confirm it landed", though its checkpoint had
    committed the result.

    The tool deduplicates the key (the ledger records a ``duplicate``), so the effects are right, and
    one repeated call per kill is within the old allowance. The repeat is audited (``tool_call``) but
    starts no step.

    Seed failure mode: "the workflow cannot resume because the current step is implicit" (the resumed
    worker does not trust its own checkpoint).
    Caught by: ``side_effects.no_rerun_after_checkpoint`` after a kill at ``after_checkpoint:X`` of a
    successful step X.
    """

    def advance(self, workflow_id: str) -> str:
        found = _resumed_mid_step(self, workflow_id)
        done = [e for e in found[1]["side_effects"] if e["status"] == "executed"] if found else []
        if found is not None and done:
            row, st = found
            task = self._definition(row["definition"], row["version"]).task(done[-1]["task"])
            args, key = resolve_args(task.args, st), done[-1]["idempotency_key"]
            with self.store.transaction() as conn:
                self.store.append(conn, workflow_id, self.clock.now(), "tool_call", task=task.id, tool=task.tool,
                                  idempotency_key=key, attempt=1, args=args, side_effect=task.side_effect)
            try:
                self.tools.call(task.tool, args, key)  # the bug: a committed step called again
            except ToolError:
                pass
        return super().advance(workflow_id)


class RecoveryClaimNeverExpires(Engine):
    """Bug: a worker that resumes a workflow a dead worker left mid-step claims it in the durable state
    (``recovering_by``) until its next checkpoint; a worker that finds another worker's claim leaves the
    workflow to that worker, without checking that it is alive (a claim with no liveness, no expiry).

    One kill is recovered (the claim is cleared at the recovery's first checkpoint). A second kill during
    the recovery leaves the claim of a dead worker, and every later worker skips the workflow: it stays
    ``running`` for ever.

    Seed failure mode: "the workflow cannot resume" (a crash during recovery).
    Caught by: ``final_status`` and ``differential`` (left ``running``), only in runs with a kill during
    the recovery from a kill (``A >> B``).
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._me = uuid.uuid4().hex

    def advance(self, workflow_id: str) -> str:
        found = _resumed_mid_step(self, workflow_id)
        if found is not None:
            row, st = found
            if st.get("recovering_by") not in (None, self._me):
                self._seen.add(workflow_id)
                return row["status"]  # the bug: another worker's claim is trusted, alive or not
            st["recovering_by"] = self._me
            with self.store.transaction() as conn:
                self.store.save_state(conn, workflow_id, row["status"], st, self.clock.now())
        return super().advance(workflow_id)

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        st.pop("recovering_by", None)
        super()._commit(name, wid, st, moves, **kwargs)


class _RekeyRepeats:
    """Tools seen through an engine that calls a repeated compensation under a new key."""

    def __init__(self, tools: Any) -> None:
        self.tools = tools
        self.seen: dict[str, int] = {}

    def call(self, tool: str, args: Any, idempotency_key: str) -> Any:
        if idempotency_key.endswith("/compensate"):
            n = self.seen[idempotency_key] = self.seen.get(idempotency_key, 0) + 1
            if n > 1:
                idempotency_key = f"{idempotency_key}#retry{n}"  # the bug
        return self.tools.call(tool, args, idempotency_key)


class CompensationNewKeyOnRetry(Engine):
    """Bug: a compensation that failed retryably is retried under a new idempotency key.

    Tasks keep their keys across retries; the compensation loop does not. A compensation that failed and
    applied nothing (a 503) is retried harmlessly; one whose answer was lost (the draft was cancelled,
    the reply never came) is applied a second time.

    Seed failure mode: "side-effect steps are retried without idempotency" (in the saga's undo path).
    Caught by: ``side_effects`` (the compensation applied twice) on a case that loses a compensation's
    answer, already in the golden run.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.tools = _RekeyRepeats(self.tools)


class RunsLatestVersionTracesPinned(RunsLatestVersion):
    """Bug: as :class:`RunsLatestVersion` (every worker runs the latest deployed definition), but the
    trace names the version the run is pinned to, so a check of the trace's version numbers passes.

    Seed failure mode: "workflow definitions change under running instances".
    Caught by: ``versions.pinned`` (a step of the new version ran, which the run's version lacks), read
    from the definitions the harness deployed; and ``final_status`` where the new version breaks the run.
    """

    def _definition(self, name: str, version: int) -> WorkflowDefinition:
        return replace(super()._definition(name, version), version=version)  # the bug: claims the pinned one


class DecisionConsumedBeforeApplied(Engine):
    """Bug: a human decision is taken out of the inbox in its own transaction, before the checkpoint that
    applies it; a kill between the two loses the decision, and the workflow waits for an answer that
    already came.

    Seed failure mode: "approval state is kept only in the chat history and disappears after a restart".
    Caught by: ``final_status`` ("expected final status succeeded, got waiting_approval") and
    ``differential`` after a kill at ``before_checkpoint:approval_decision``; the message names the
    delivery and the kill after which the run stopped moving.
    """

    def _commit(self, name: str, wid: str, st: dict[str, Any], moves: list[Status], **kwargs: Any) -> None:
        if name == "approval_decision" and kwargs.get("consume"):
            with self.store.transaction() as conn:  # the bug: not the decision's own checkpoint
                for seq in kwargs["consume"]:
                    conn.execute("UPDATE inbox SET consumed=1 WHERE seq=?", (seq,))
            kwargs = {**kwargs, "consume": []}
        super()._commit(name, wid, st, moves, **kwargs)


class TrustsAnyAnswer(Engine):
    """Bug: whatever a tool call returns is taken for its answer: an empty body (``{}``) or a proxy's error page after
    the provider acted is recorded as the step's result and the run goes on with it.

    Seed failure mode: "tool outputs are trusted without validation".
    Caught by: ``final_status`` on a ``{kind: tool, outcome: empty_answer}`` fault of the draft (the issue that reads
    the draft's id from ``{}`` is refused: expected succeeded), already in the golden run.
    """

    def _is_answer(self, result: Any) -> bool:
        return True  # the bug
