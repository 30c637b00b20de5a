"""Unit tests of the reference engine, in-process (no worker subprocess, no SIGKILL).

The engine runs on real files in ``tmp_path``: its SQLite store, plus the fake world's
ledger (tools and virtual clock). A crash is simulated by a probe that raises a
:class:`BaseException` at one crash point; a *new* Engine on the same files then resumes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from crashpoint.engine.definition import WorkflowDefinition
from crashpoint.engine.engine import Engine
from crashpoint.engine.states import IllegalTransition, check_transition
from crashpoint.engine.store import StoreError
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import EPOCH_S, Ledger
from crashpoint.fakes.tools import Toolbox
from crashpoint.protocols import Probe, no_probe

WORKFLOW_FILE = Path(__file__).resolve().parents[2] / "scenarios" / "refunds" / "workflows" / "refund.yaml"
WID = "wf-1"
APPROVAL = "refund_approval"
INPUT = {"order_id": "ord_1", "amount_cents": 1250, "reason": "damaged", "customer_email": "ana@example.com"}
DRAFT, ISSUE, NOTIFY = "refunds.draftRefundRequest", "refunds.issueRefund", "notify.sendCustomerEmail"
CANCEL_DRAFT, ASK = "refunds.cancelRefundDraft", "approvals.request"


class Crash(BaseException):
    """Raised by the probe to stop the engine mid-step, as a kill would (not an Exception)."""


class World:
    """One engine + fake world on files in a folder; ``engine()`` opens another Engine on them."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.ledger = Ledger(folder / "ledger.db")
        self.clock = VirtualClock(self.ledger)
        self.engines: list[Engine] = []

    def engine(self, probe: Probe = no_probe) -> Engine:
        engine = Engine(self.folder / "engine.db", Toolbox(self.ledger, self.clock, probe), self.clock, probe=probe)
        self.engines.append(engine)
        return engine

    def applied(self, tool: str) -> int:
        return len(self.ledger.applied(tool))

    def close(self) -> None:
        for engine in self.engines:
            engine.close()
        self.ledger.close()


@pytest.fixture(scope="module")
def definition() -> WorkflowDefinition:
    with open(WORKFLOW_FILE, encoding="utf-8") as fh:
        return WorkflowDefinition.from_dict(yaml.safe_load(fh))


@pytest.fixture()
def world(tmp_path: Path) -> Any:
    w = World(tmp_path)
    yield w
    w.close()


@pytest.fixture()
def engine(world: World, definition: WorkflowDefinition) -> Engine:
    """A deployed engine with workflow ``WID`` started and run up to its approval request."""
    eng = world.engine()
    assert eng.deploy(definition)
    assert eng.start(WID, "refund", INPUT)
    assert eng.run_until_quiescent() == {WID: "waiting_approval"}
    return eng


def kinds(engine: Engine) -> list[str]:
    return [e["kind"] for e in engine.trace(WID)]


def test_happy_path_succeeds_with_one_applied_call_per_tool(engine: Engine, world: World) -> None:
    pending = engine.status(WID).pending_approval
    assert pending["approval_id"] == APPROVAL
    assert engine.approve(WID, APPROVAL, granted=True, by="alice")
    assert engine.run_until_quiescent() == {WID: "succeeded"}
    status = engine.status(WID)
    assert status.terminal and status.stop_reason.startswith("completed")
    assert status.progress == {"tasks_done": 3, "tasks_total": 3, "percent": 100.0, "phases_done": 2,
                               "phases_total": 2, "eta_s": 0.0}
    assert {t: world.applied(t) for t in (DRAFT, ASK, ISSUE, NOTIFY, CANCEL_DRAFT)} == \
        {DRAFT: 1, ASK: 1, ISSUE: 1, NOTIFY: 1, CANCEL_DRAFT: 0}
    assert [c.outcome for c in world.ledger.calls()] == ["applied"] * 4
    assert kinds(engine)[-3:] == ["checkpoint", "progress", "workflow_finished"]


def test_duplicate_start_returns_false(engine: Engine) -> None:
    assert engine.start(WID, "refund", INPUT) is False
    assert engine.start(WID, "refund", INPUT, idempotency_key="another-key") is False
    assert kinds(engine).count("event_duplicate") == 2
    assert kinds(engine).count("workflow_accepted") == 1


def test_duplicate_approval_key_returns_false_and_refund_is_issued_once(engine: Engine, world: World) -> None:
    assert engine.approve(WID, APPROVAL, granted=True, idempotency_key="ap-key") is True
    assert engine.approve(WID, APPROVAL, granted=True, idempotency_key="ap-key") is False
    assert engine.run_until_quiescent() == {WID: "succeeded"}
    assert world.applied(ISSUE) == 1
    assert kinds(engine).count("approval_granted") == 1


def test_approval_timeout_escalates_with_a_stop_reason(engine: Engine, world: World) -> None:
    deadline = engine.status(WID).pending_approval["deadline"]
    assert deadline == pytest.approx(world.clock.now() + 86400)
    world.clock.set(deadline + 1)
    assert engine.run_until_quiescent() == {WID: "escalated"}
    status = engine.status(WID)
    assert status.stop_reason == f"escalated: approval {APPROVAL!r} timed out after 86400.0 s"
    assert status.pending_approval is None
    assert "approval_timeout" in kinds(engine)
    assert world.applied(ISSUE) == 0


def test_deny_compensates_the_draft(engine: Engine, world: World) -> None:
    assert engine.approve(WID, APPROVAL, granted=False, by="bob")
    assert engine.run_until_quiescent() == {WID: "failed"}
    assert engine.status(WID).stop_reason == f"approval {APPROVAL!r} denied by bob; compensated: draft_refund"
    assert (world.applied(ISSUE), world.applied(CANCEL_DRAFT)) == (0, 1)
    assert {"approval_denied", "compensation_started", "compensation_result"} <= set(kinds(engine))


def test_cancel_while_waiting_compensates_and_ends_cancelled(engine: Engine, world: World) -> None:
    assert engine.cancel(WID, "customer withdrew")
    assert engine.cancel(WID, "customer withdrew") is False
    assert engine.run_until_quiescent() == {WID: "cancelled"}
    assert engine.status(WID).stop_reason == "cancelled: customer withdrew; compensated: draft_refund"
    assert (world.applied(ISSUE), world.applied(CANCEL_DRAFT)) == (0, 1)
    moves = [(e["from"], e["to"]) for e in engine.trace(WID) if e["kind"] == "transition"]
    assert moves[-2:] == [("waiting_approval", "compensating"), ("compensating", "cancelled")]


def test_a_compensation_failing_retryably_three_times_is_retried_and_compensates(engine: Engine,
                                                                                  world: World) -> None:
    # issue 17: `pytest --chaos --chaos-seed 12345 scenarios/refunds` left the draft uncompensated and the run failed
    world.ledger.script(CANCEL_DRAFT, "retryable", "503 busy", times=3)
    assert engine.approve(WID, APPROVAL, granted=False, by="bob")
    assert engine.run_until_quiescent() == {WID: "failed"}
    assert engine.status(WID).stop_reason == f"approval {APPROVAL!r} denied by bob; compensated: draft_refund"
    assert [c.outcome for c in world.ledger.calls(CANCEL_DRAFT)] == ["failed"] * 3 + ["applied"]


def test_a_compensation_past_its_own_budget_escalates_naming_the_effect_and_key(engine: Engine,
                                                                               world: World) -> None:
    world.ledger.script(CANCEL_DRAFT, "retryable", "503 busy", times=10)
    assert engine.approve(WID, APPROVAL, granted=False, by="bob")
    assert engine.run_until_quiescent() == {WID: "escalated"}
    reason = engine.status(WID).stop_reason
    assert reason.startswith("escalated: ") and "'draft_refund'" in reason and f"key {WID}/draft_refund)" in reason
    assert "not compensated" in reason and "4 time(s)" in reason
    assert (world.applied(CANCEL_DRAFT), len(world.ledger.calls(CANCEL_DRAFT))) == (0, 4)
    moves = [(e["from"], e["to"]) for e in engine.trace(WID) if e["kind"] == "transition"]
    assert moves[-1] == ("compensating", "escalated")


def test_a_compensation_refused_fatally_fails_naming_it(engine: Engine, world: World) -> None:
    world.ledger.script(CANCEL_DRAFT, "fatal", "draft already paid out")
    assert engine.approve(WID, APPROVAL, granted=False, by="bob")
    assert engine.run_until_quiescent() == {WID: "failed"}
    assert "compensation of 'draft_refund' failed: " in engine.status(WID).stop_reason
    assert len(world.ledger.calls(CANCEL_DRAFT)) == 1


def test_retries_back_off_on_the_virtual_clock(world: World, definition: WorkflowDefinition) -> None:
    world.ledger.script(DRAFT, "retryable", "503 service unavailable", times=3)
    eng = world.engine()
    eng.deploy(definition)
    eng.start(WID, "refund", INPUT)
    assert eng.run_until_quiescent() == {WID: "waiting_approval"}
    backoff_s = definition.task("draft_refund").backoff_s
    retries = [e for e in eng.trace(WID) if e["kind"] == "retry_scheduled"]
    assert [e["delay_s"] for e in retries] == [backoff_s * 2 ** (n - 1) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert world.clock.now() - EPOCH_S == pytest.approx(2.0 + 4.0 + 8.0)
    draft_calls = world.ledger.calls(DRAFT)
    assert [c.outcome for c in draft_calls] == ["failed"] * 3 + ["applied"]
    assert [c.at - EPOCH_S for c in draft_calls] == [0.0, 2.0, 6.0, 14.0]


def test_retries_exhausted_fails_with_the_last_error(world: World, definition: WorkflowDefinition) -> None:
    world.ledger.script(DRAFT, "retryable", "503 service unavailable", times=4)
    eng = world.engine()
    eng.deploy(definition)
    eng.start(WID, "refund", INPUT)
    assert eng.run_until_quiescent() == {WID: "failed"}
    assert eng.status(WID).stop_reason == "task 'draft_refund' failed: 503 service unavailable"
    assert world.applied(ASK) == 0


def test_state_table_rejects_an_illegal_transition() -> None:
    with pytest.raises(IllegalTransition, match="illegal transition waiting_approval -> succeeded"):
        check_transition("waiting_approval", "succeeded")
    check_transition("waiting_approval", "running")


def test_resume_in_a_new_engine_continues_from_the_last_checkpoint(engine: Engine, world: World) -> None:
    engine.approve(WID, APPROVAL, granted=True)
    engine.close()
    world.engines.remove(engine)

    def probe(name: str) -> None:
        if name == f"after_effect:{ISSUE}":
            raise Crash(name)

    crashed = world.engine(probe)
    with pytest.raises(Crash):
        crashed.run_until_quiescent()
    assert world.applied(ISSUE) == 1
    assert crashed.status(WID).last_checkpoint == "approval_decision"

    fresh = world.engine()  # a new Engine and Toolbox on the same files
    assert fresh.run_until_quiescent() == {WID: "succeeded"}
    assert world.applied(ISSUE) == 1
    issue_calls = world.ledger.calls(ISSUE)
    assert [c.outcome for c in issue_calls] == ["applied", "duplicate"]
    assert issue_calls[0].idempotency_key == issue_calls[1].idempotency_key == f"{WID}/issue_refund"
    resumed = [e for e in fresh.trace(WID) if e["kind"] == "workflow_resumed"]
    assert resumed and resumed[-1]["from_checkpoint"] == "approval_decision"
    assert world.applied(NOTIFY) == 1


def test_corrupt_database_gives_store_error_naming_the_file(tmp_path: Path) -> None:
    db = tmp_path / "engine.db"
    db.write_bytes(b"\x00garbage, not SQLite\xff" * 256)
    ledger = Ledger(tmp_path / "ledger.db")
    try:
        clock = VirtualClock(ledger)
        with pytest.raises(StoreError, match="not a usable engine database") as info:
            Engine(db, Toolbox(ledger, clock), clock)
        assert str(db) in str(info.value)
    finally:
        ledger.close()


def test_a_skipped_task_says_why_in_the_trace(tmp_path: Path) -> None:
    """task_skipped carries the error, for a tool failure and for a phase timeout alike."""
    from crashpoint.harness.adapters.reference import ReferenceAdapter
    from crashpoint.harness.run.pack_driver import Driver
    from crashpoint.harness.load.loader import load_target

    root = Path(__file__).resolve().parents[2] / "scenarios" / "refunds" / "cases"
    for name, why in (("notify_failure_is_not_critical.yaml", "mailbox unavailable"),
                      ("issue_refund_slow_exceeds_phase_timeout.yaml", "exceeded its timeout")):
        pack, (case,) = load_target(root / name)
        out = Driver(ReferenceAdapter(), pack).run(case, tmp_path / name)
        (skipped,) = [e for e in out.trace if e["kind"] == "task_skipped"]
        assert why in skipped["error"]


def test_definition_tasks_are_made_once_and_stay_its_own() -> None:
    """``WorkflowDefinition.tasks`` is computed once per definition (the engine asks at every step): the same
    object each time, in execution order, and a redeployed version's tasks are its own, not the first one's."""
    def make(version: int, ids: list[list[str]]) -> WorkflowDefinition:
        return WorkflowDefinition.from_dict({"workflow": "w", "version": version, "phases": [
            {"id": f"p{n}", "tasks": [{"id": i, "tool": "notify.sendCustomerEmail"} for i in phase]}
            for n, phase in enumerate(ids)]})

    first = make(1, [["a", "b"], ["c"]])
    assert first.tasks is first.tasks
    assert [(p, t, task.id) for p, t, task in first.tasks] == [(0, 0, "a"), (0, 1, "b"), (1, 0, "c")]
    second = make(2, [["a"], ["d", "c"]])
    assert [task.id for _, _, task in second.tasks] == ["a", "d", "c"]
    assert [task.id for _, _, task in first.tasks] == ["a", "b", "c"]
    assert first.locate("c") == (1, 0) and second.locate("c") == (1, 1)
