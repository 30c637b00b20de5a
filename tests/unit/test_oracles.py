"""Unit tests of every check in :mod:`crashpoint.harness.judge.pack_rules`, each on a run that has the bug it looks for.

The project rule is that every check the harness makes must be shown to fail on a run that
has its bug. Each test here takes a real golden run of a refund case on the reference engine
(cached per module, so only a handful of worker processes start), copies it, plants exactly
one bug in the copy (a ledger call, a decision, a trace event, the reported status) and
asserts the oracle's name and a fragment of its message. Where the planted bug cannot help
tripping a second check, the test says so; otherwise it asserts that the failure is the only
one. The unmutated golden runs must pass every oracle.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.pack_driver import Driver, RunOutcome
from crashpoint.harness.load.loader import Case, Pack, load_target
from crashpoint.harness.judge.pack_rules import Failure, differential, final_status, judge, side_effects, trace_completeness

PACK_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
HAPPY = "refund_approved_happy_path"
CANCEL = "cancel_while_waiting_compensates_draft"
RESTART = "approval_granted_after_restart"
TIMEOUT = "approval_timeout_after_refund_draft"

DRAFT, ISSUE, NOTIFY = "refunds.draftRefundRequest", "refunds.issueRefund", "notify.sendCustomerEmail"
CANCEL_DRAFT, ASK = "refunds.cancelRefundDraft", "approvals.request"


# --------------------------------------------------------------------------- fixtures and helpers

@pytest.fixture(scope="module")
def target() -> tuple[Pack, dict[str, Case]]:
    pack, cases = load_target(PACK_DIR)
    return pack, {c.case_id: c for c in cases}


@pytest.fixture(scope="module")
def pack(target: tuple[Pack, dict[str, Case]]) -> Pack:
    return target[0]


@pytest.fixture(scope="module")
def case(target: tuple[Pack, dict[str, Case]]) -> Callable[..., Case]:
    """``case(id)``: the case as loaded; ``case(id, expected={...})``: the same with other expectations."""
    def get(case_id: str, **changes: Any) -> Case:
        return dataclasses.replace(target[1][case_id], **changes)
    return get


@pytest.fixture(scope="module")
def golden(target: tuple[Pack, dict[str, Case]], tmp_path_factory: pytest.TempPathFactory
           ) -> Callable[[str], RunOutcome]:
    """``golden(id)``: a fresh deep copy of the case's golden run on the reference engine (run once)."""
    pack, cases = target
    root = tmp_path_factory.mktemp("golden")
    runs: dict[str, RunOutcome] = {}

    def get(case_id: str) -> RunOutcome:
        if case_id not in runs:
            runs[case_id] = Driver(ReferenceAdapter(), pack).run(cases[case_id], root / case_id)
        return copy.deepcopy(runs[case_id])
    return get


def bare(case: Case) -> Case:
    """The case with no expectations: only the pack-level checks apply."""
    return dataclasses.replace(case, expected={})


def assert_fails(failures: list[Failure], oracle: str, fragment: str, *, only: bool = False) -> Failure:
    """A failure from ``oracle`` whose message contains ``fragment`` is there (and, ``only``, nothing else)."""
    seen = "\n".join(f"  [{f.oracle}] {f.message}" for f in failures) or "  (no failures)"
    hits = [f for f in failures if f.oracle == oracle and fragment in f.message]
    assert hits, f"expected [{oracle}] ...{fragment}...; got:\n{seen}"
    if only:
        assert len(failures) == 1, f"expected only [{oracle}] ...{fragment}...; got:\n{seen}"
    return hits[0]


def the_call(out: RunOutcome, tool: str) -> dict[str, Any]:
    """The single applied ledger call of ``tool``."""
    (call,) = [c for c in out.calls if c["tool"] == tool and c["outcome"] == "applied"]
    return call


def drop_calls(out: RunOutcome, tool: str) -> None:
    """Remove every ledger call of ``tool`` (from ``calls`` and ``sequence``)."""
    out.calls = [c for c in out.calls if c["tool"] != tool]
    out.sequence = [(k, i) for k, i in out.sequence if not (k == "call" and i["tool"] == tool)]


def add_call(out: RunOutcome, like: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """Append a ledger call made like ``like`` (new ``seq`` and ``gseq``, last in ``sequence``)."""
    call = {**copy.deepcopy(like), **changes}
    call["seq"] = max(c["seq"] for c in out.calls) + 1
    call["gseq"] = max(i["gseq"] for _, i in out.sequence) + 1
    out.calls.append(call)
    out.sequence.append(("call", copy.deepcopy(call)))
    return call


def set_call(out: RunOutcome, tool: str, **changes: Any) -> None:
    """Change the applied call of ``tool`` in both ``calls`` and ``sequence``."""
    for call in [c for c in out.calls if c["tool"] == tool] + [i for k, i in out.sequence
                                                                 if k == "call" and i["tool"] == tool]:
        call.update(changes)


def regseq(out: RunOutcome) -> None:
    """Renumber ``gseq`` to follow the order of ``out.sequence`` (and mirror it into ``out.calls``)."""
    by_seq = {c["seq"]: c for c in out.calls}
    for n, (kind, item) in enumerate(out.sequence, start=1):
        item["gseq"] = n
        if kind == "call":
            by_seq[item["seq"]]["gseq"] = n


def events(out: RunOutcome, kind: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in out.trace if e["kind"] == kind and all(e.get(k) == v for k, v in match.items())]


def drop_events(out: RunOutcome, kind: str, **match: Any) -> None:
    gone = events(out, kind, **match)
    assert gone, f"no {kind} {match} in the trace"
    out.trace = [e for e in out.trace if not any(e is g for g in gone)]


def index_of(out: RunOutcome, kind: str, **match: Any) -> int:
    event = events(out, kind, **match)[0]
    return next(i for i, e in enumerate(out.trace) if e is event)


# --------------------------------------------------------------------------- no false failures

@pytest.mark.parametrize("case_id", [HAPPY, CANCEL, RESTART, TIMEOUT])
def test_unmutated_golden_runs_pass_every_oracle(case_id: str, pack: Pack, case: Callable[..., Case],
                                                 golden: Callable[[str], RunOutcome]) -> None:
    out = golden(case_id)
    assert out.trace and out.calls, "the golden run left nothing to judge"
    assert final_status(case(case_id), out) == []
    assert side_effects(case(case_id), pack, out) == []
    assert trace_completeness(case(case_id), out) == []
    assert differential(out, golden(case_id)) == []
    crashed = dataclasses.replace(out, crash_point="after_checkpoint:refund_draft")
    assert judge(case(case_id), pack, crashed, golden(case_id)) == []


# --------------------------------------------------------------------------- final_status

def test_final_status_mismatch_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    out.status = "failed"
    assert_fails(final_status(case(HAPPY), out), "final_status", "expected final status succeeded, got failed",
                 only=True)


@pytest.mark.parametrize("status", ["waiting_approval", "escalated"])
def test_waiting_or_escalated_accepts_both(status: str, case: Callable[..., Case],
                                           golden: Callable[[str], RunOutcome]) -> None:
    assert case(TIMEOUT).expected["final_status"] == "waiting_or_escalated"
    out = golden(TIMEOUT)
    out.status = status
    assert final_status(case(TIMEOUT), out) == []


@pytest.mark.parametrize("status", ["succeeded", "failed", "cancelled"])
def test_waiting_or_escalated_rejects_other_statuses(status: str, case: Callable[..., Case],
                                                     golden: Callable[[str], RunOutcome]) -> None:
    out = golden(TIMEOUT)
    out.status = status
    assert_fails(final_status(case(TIMEOUT), out), "final_status",
                 f"expected final status waiting_or_escalated, got {status}", only=True)


@pytest.mark.parametrize("reason", ["failed: the draft was rejected", "", None])
def test_stop_reason_without_the_expected_substring_fails(reason: str | None, case: Callable[..., Case],
                                                          golden: Callable[[str], RunOutcome]) -> None:
    assert case(HAPPY).expected["stop_reason"] == "completed"
    out = golden(HAPPY)
    out.stop_reason = reason
    assert_fails(final_status(case(HAPPY), out), "final_status",
                 f"expected a stop reason containing 'completed', got {reason!r}", only=True)


# --------------------------------------------------------------------------- side_effects

@pytest.mark.parametrize("key", [None, ""])
def test_effect_applied_without_idempotency_key_fails(key: str | None, pack: Pack, case: Callable[..., Case],
                                                      golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    set_call(out, DRAFT, idempotency_key=key)
    failure = assert_fails(side_effects(bare(case(HAPPY)), pack, out), "side_effects",
                           f"{DRAFT} was applied without an idempotency key", only=True)
    assert failure.evidence and DRAFT in failure.evidence[0]


def test_effect_applied_twice_fails(pack: Pack, case: Callable[..., Case],
                                    golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, NOTIFY), idempotency_key="wf-x/notify_customer@retry-2")
    failures = side_effects(bare(case(HAPPY)), pack, out)
    failure = assert_fails(failures, "side_effects",
                           f"effect notify_customer ({NOTIFY}) applied 2 times; at most once is allowed", only=True)
    assert len(failure.evidence) == 2


def test_effect_applied_twice_on_success_also_breaks_exactly_once(pack: Pack, case: Callable[..., Case],
                                                                  golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, ISSUE), idempotency_key="wf-x/issue_refund@retry-2")
    failures = side_effects(bare(case(HAPPY)), pack, out)
    assert_fails(failures, "side_effects", f"effect issue_refund ({ISSUE}) applied 2 times; at most once is allowed")
    assert_fails(failures, "side_effects",
                 "workflow succeeded but effect issue_refund was applied 2 times; exactly once is required")
    assert len(failures) == 2, failures


def test_a_deduplicated_retry_is_not_an_effect(pack: Pack, case: Callable[..., Case],
                                               golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, ISSUE), outcome="duplicate")  # same key: the tool recognised the retry
    out.kills = 1  # the kill that cut off the first call's answer
    assert side_effects(case(HAPPY), pack, out) == []
    assert differential(out, golden(HAPPY)) == []


def test_succeeded_without_a_required_effect_fails(pack: Pack, case: Callable[..., Case],
                                                   golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_calls(out, DRAFT)
    assert_fails(side_effects(bare(case(HAPPY)), pack, out), "side_effects",
                 "workflow succeeded but effect draft_refund was applied 0 times; exactly once is required",
                 only=True)


def test_an_effect_not_required_on_success_may_be_missing(pack: Pack, case: Callable[..., Case],
                                                          golden: Callable[[str], RunOutcome]) -> None:
    assert pack.effects["notify_customer"]["required_on_success"] is False
    out = golden(HAPPY)
    drop_calls(out, NOTIFY)
    assert side_effects(bare(case(HAPPY)), pack, out) == []


def _no_decision(out: RunOutcome) -> None:
    out.sequence = [(k, i) for k, i in out.sequence if k != "decision"]


def _denied(out: RunOutcome) -> None:
    for kind, item in out.sequence:
        if kind == "decision":
            item["granted"] = False


def _another_approval(out: RunOutcome) -> None:
    for kind, item in out.sequence:
        if kind == "decision":
            item["approval_id"] = "ap_1"


def _decision_after_the_effect(out: RunOutcome) -> None:
    decision = next(i for k, i in out.sequence if k == "decision")
    rest = [(k, i) for k, i in out.sequence if k != "decision"]
    at = next(n for n, (k, i) in enumerate(rest) if k == "call" and i["tool"] == ISSUE)
    out.sequence = rest[:at + 1] + [("decision", decision)] + rest[at + 1:]
    regseq(out)


@pytest.mark.parametrize("plant", [_no_decision, _denied, _another_approval, _decision_after_the_effect],
                         ids=["no_decision", "denied", "another_approval_id", "granted_after_the_effect"])
def test_gated_effect_without_a_granted_approval_before_it_fails(plant: Callable[[RunOutcome], None], pack: Pack,
                                                                 case: Callable[..., Case],
                                                                 golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    kinds = [k for k, _ in out.sequence]
    assert kinds.index("decision") < [i.get("tool") for _, i in out.sequence].index(ISSUE)
    plant(out)
    failure = assert_fails(side_effects(bare(case(HAPPY)), pack, out), "side_effects",
                           "effect issue_refund applied without a granted approval 'refund_approval' before it",
                           only=True)
    assert ISSUE in failure.evidence[0]


def test_decision_after_the_effect_is_ordered_by_sequence(golden: Callable[[str], RunOutcome]) -> None:
    """The planted reordering really puts the decision after the call, in both orders the oracle could read."""
    out = golden(HAPPY)
    _decision_after_the_effect(out)
    kinds = [(k, i.get("tool")) for k, i in out.sequence]
    assert kinds.index(("decision", None)) == kinds.index(("call", ISSUE)) + 1
    decision = next(i for k, i in out.sequence if k == "decision")
    assert decision["gseq"] > the_call(out, ISSUE)["gseq"]


@pytest.mark.parametrize("status", ["failed", "cancelled"])
def test_failed_or_cancelled_without_compensation_fails(status: str, pack: Pack, case: Callable[..., Case],
                                                        golden: Callable[[str], RunOutcome]) -> None:
    out = golden(CANCEL)
    drop_calls(out, CANCEL_DRAFT)
    out.status = status
    assert_fails(side_effects(bare(case(CANCEL)), pack, out), "side_effects",
                 f"workflow ended {status} after effect draft_refund was applied, "
                 f"but its compensation {CANCEL_DRAFT} was never applied", only=True)


def test_compensation_applied_twice_fails(pack: Pack, case: Callable[..., Case],
                                          golden: Callable[[str], RunOutcome]) -> None:
    out = golden(CANCEL)
    add_call(out, the_call(out, CANCEL_DRAFT), idempotency_key="wf-x/draft_refund/compensate@2")
    failure = assert_fails(side_effects(bare(case(CANCEL)), pack, out), "side_effects",
                           f"compensation {CANCEL_DRAFT} of draft_refund applied 2 times", only=True)
    assert len(failure.evidence) == 2


def test_must_not_effect_fails(pack: Pack, case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    assert case(CANCEL).expected["must_not_issue_refund"] is True
    out = golden(CANCEL)
    add_call(out, the_call(out, DRAFT), tool=ISSUE, idempotency_key="wf-x/issue_refund")
    only_must_not = case(CANCEL, expected={"must_not_issue_refund": True})
    # issued after a decision for "ap_1" (the case's event; nothing was pending): the gate check fires too
    failures = side_effects(only_must_not, pack, out)
    assert_fails(failures, "side_effects", "must_not_issue_refund: effect issue_refund was applied 1 time(s)")
    assert_fails(failures, "side_effects", "effect issue_refund applied without a granted approval")
    # and the run ended cancelled after the irreversible refund (the saga's pivot) went out
    assert_fails(failures, "side_effects", "after its pivot a saga must complete forward")
    assert len(failures) == 3, failures
    assert_fails(side_effects(case(CANCEL), pack, out), "side_effects", "must_not_issue_refund")


def test_expected_effect_count_fails(pack: Pack, case: Callable[..., Case],
                                     golden: Callable[[str], RunOutcome]) -> None:
    assert case(HAPPY).expected["effects"]["notify_customer"] == 1
    out = golden(HAPPY)
    drop_calls(out, NOTIFY)
    assert_fails(side_effects(case(HAPPY), pack, out), "side_effects",
                 "expected effect notify_customer applied 1 time(s), got 0", only=True)


def test_expected_effect_count_zero_fails(pack: Pack, case: Callable[..., Case],
                                          golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    assert_fails(side_effects(case(HAPPY, expected={"effects": {"notify_customer": 0}}), pack, out),
                 "side_effects", "expected effect notify_customer applied 0 time(s), got 1", only=True)


def test_expected_compensated_fails(pack: Pack, case: Callable[..., Case],
                                    golden: Callable[[str], RunOutcome]) -> None:
    assert case(CANCEL).expected["compensated"] == ["draft_refund"]
    out = golden(CANCEL)
    drop_calls(out, CANCEL_DRAFT)
    failures = side_effects(case(CANCEL), pack, out)
    assert_fails(failures, "side_effects", "expected effect draft_refund compensated")
    assert_fails(failures, "side_effects", "workflow ended cancelled after effect draft_refund")  # the same bug
    assert len(failures) == 2, failures
    # on its own (a run that did not end failed/cancelled, so only the expectation can see it)
    out.status = "escalated"
    assert_fails(side_effects(case(CANCEL, expected={"compensated": ["draft_refund"]}), pack, out),
                 "side_effects", "expected effect draft_refund compensated", only=True)


def test_approval_requested_twice_fails(pack: Pack, case: Callable[..., Case],
                                        golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, ASK), idempotency_key="wf-x/approval/refund_approval#pid4242")
    assert_fails(side_effects(bare(case(HAPPY)), pack, out), "side_effects",
                 "approval 'refund_approval' was requested from a human 2 times", only=True)


def test_approval_request_retried_with_the_same_key_is_not_asked_twice(pack: Pack, case: Callable[..., Case],
                                                                       golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, ASK), outcome="duplicate")
    out.kills = 1
    assert side_effects(case(HAPPY), pack, out) == []


# --------------------------------------------------------------------------- trace

def test_required_trace_event_missing_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "approval_granted")
    assert_fails(trace_completeness(case(HAPPY), out), "trace", "required trace events missing: ['approval_granted']",
                 only=True)


def test_forbidden_trace_event_present_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    assert "compensation_started" in case(HAPPY).expected["forbidden_trace_events"]
    out = golden(HAPPY)
    at = index_of(out, "checkpoint", name="refund_issued")
    out.trace.insert(at + 1, {"seq": 999, "at": 0.0, "kind": "compensation_started", "task": "draft_refund",
                              "tool": CANCEL_DRAFT, "idempotency_key": "k"})
    failure = assert_fails(trace_completeness(case(HAPPY), out), "trace",
                           "forbidden trace events present: ['compensation_started']", only=True)
    assert failure.evidence[0].startswith("#999 compensation_started")


def test_required_checkpoint_missing_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    events(out, "checkpoint", name="refund_issued")[0]["name"] = "issued_somewhere"
    assert_fails(trace_completeness(case(HAPPY), out), "trace", "required checkpoints missing: ['refund_issued']",
                 only=True)


def test_illegal_transition_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    at = index_of(out, "transition", **{"from": "waiting_approval", "to": "running"})
    out.trace[at:at + 1] = [{**out.trace[at], "to": "checkpointed"}, {**out.trace[at], "from": "checkpointed"}]
    failure = assert_fails(trace_completeness(case(HAPPY), out), "trace",
                           "illegal transition waiting_approval -> checkpointed", only=True)
    assert "from=waiting_approval to=checkpointed" in failure.evidence[0]


def test_transition_to_an_unknown_status_is_illegal(case: Callable[..., Case],
                                                    golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    at = index_of(out, "transition", **{"from": "waiting_approval", "to": "running"})
    out.trace[at:at + 1] = [{**out.trace[at], "to": "paused"}, {**out.trace[at], "from": "paused"}]
    failures = trace_completeness(case(HAPPY), out)
    assert_fails(failures, "trace", "illegal transition waiting_approval -> paused")
    assert_fails(failures, "trace", "illegal transition paused -> running")
    assert len(failures) == 2, failures


def test_transition_chain_break_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "transition", **{"from": "accepted", "to": "running"})
    failure = assert_fails(trace_completeness(case(HAPPY), out), "trace",
                           "transition from running while the workflow was accepted", only=True)
    assert "from=running to=checkpointed" in failure.evidence[0]


def test_transition_from_a_state_the_workflow_left_fails(case: Callable[..., Case],
                                                         golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)  # a legal move, but not from where the workflow was (waiting_approval)
    events(out, "transition", **{"from": "waiting_approval", "to": "running"})[0]["from"] = "checkpointed"
    assert_fails(trace_completeness(case(HAPPY), out), "trace",
                 "transition from checkpointed while the workflow was waiting_approval", only=True)


def test_trace_ending_in_another_status_than_reported_fails(case: Callable[..., Case],
                                                            golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "transition", **{"from": "checkpointed", "to": "succeeded"})
    assert_fails(trace_completeness(case(HAPPY), out), "trace",
                 "the trace ends in checkpointed but the engine reports succeeded", only=True)


def test_side_effect_tool_call_without_key_fails(case: Callable[..., Case],
                                                 golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    del events(out, "tool_call", tool=DRAFT)[0]["idempotency_key"]
    failures = trace_completeness(case(HAPPY), out)
    assert_fails(failures, "trace", f"side effect {DRAFT} called without an idempotency key")
    # the ledger's call carries the key the trace lost, so the audit check fires as well
    assert_fails(failures, "trace", f"{DRAFT} effect in the ledger is not audited in the trace")
    assert len(failures) == 2, failures


def test_side_effect_tool_call_without_key_fails_alone(case: Callable[..., Case],
                                                       golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    events(out, "tool_call", tool=DRAFT)[0]["idempotency_key"] = None
    set_call(out, DRAFT, outcome="failed")  # nothing applied, so only the trace's own record is at fault
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 f"side effect {DRAFT} called without an idempotency key", only=True)


def test_ledger_effect_not_audited_in_trace_fails(case: Callable[..., Case],
                                                  golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    set_call(out, NOTIFY, idempotency_key="ghost-key")
    failure = assert_fails(trace_completeness(case(HAPPY), out), "trace",
                           f"{NOTIFY} effect in the ledger is not audited in the trace (key ghost-key)", only=True)
    assert failure.evidence == [f"ledger#{the_call(out, NOTIFY)['seq']} {NOTIFY} key=ghost-key applied"]


def test_no_checkpoint_after_a_side_effect_fails(case: Callable[..., Case],
                                                 golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "checkpoint", name="refund_draft")
    failure = assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                           f"no checkpoint after {DRAFT} before the next step", only=True)
    assert "tool_result" in failure.evidence[0] and "step_started" in failure.evidence[1]


def test_no_checkpoint_after_the_last_side_effect_fails(case: Callable[..., Case],
                                                        golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "checkpoint", name="customer_notified")
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 f"no checkpoint after {NOTIFY} before the next step", only=True)


def _waiting(out: RunOutcome) -> RunOutcome:
    """The run as it stood while waiting for approval: trace and ledger up to the approval request."""
    out.trace = out.trace[:index_of(out, "checkpoint", name="approval_request") + 1]
    asked = the_call(out, ASK)["gseq"]
    out.calls = [c for c in out.calls if c["gseq"] <= asked]
    out.sequence = [(k, i) for k, i in out.sequence if i["gseq"] <= asked]
    out.status, out.stop_reason = "waiting_approval", None
    return out


def test_a_waiting_run_needs_no_stop_reason(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    assert trace_completeness(bare(case(HAPPY)), _waiting(golden(HAPPY))) == []


def test_no_checkpoint_after_approval_requested_fails(case: Callable[..., Case],
                                                      golden: Callable[[str], RunOutcome]) -> None:
    out = _waiting(golden(HAPPY))
    drop_events(out, "checkpoint", name="approval_request")
    failures = trace_completeness(bare(case(HAPPY)), out)
    failure = assert_fails(failures, "trace", "no checkpoint after approval refund_approval before the next step")
    assert "approval_requested" in failure.evidence[0]
    # the approval request's tool_result is in the same uncheckpointed commit
    assert_fails(failures, "trace", f"no checkpoint after {ASK} before the next step")
    assert len(failures) == 2, failures


def test_no_checkpoint_after_approval_requested_fails_when_a_decision_follows(
        case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    drop_events(out, "checkpoint", name="approval_request")
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 "no checkpoint after approval refund_approval")


def test_terminal_state_without_stop_reason_fails(case: Callable[..., Case],
                                                  golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    out.stop_reason = None
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace", "terminal status succeeded has no stop reason",
                 only=True)


def _no_finished(out: RunOutcome) -> None:
    drop_events(out, "workflow_finished")


def _finished_other_status(out: RunOutcome) -> None:
    events(out, "workflow_finished")[0]["status"] = "failed"


def _finished_without_reason(out: RunOutcome) -> None:
    events(out, "workflow_finished")[0]["stop_reason"] = ""


@pytest.mark.parametrize("plant", [_no_finished, _finished_other_status, _finished_without_reason],
                         ids=["missing", "other_status", "no_stop_reason"])
def test_terminal_state_without_workflow_finished_fails(plant: Callable[[RunOutcome], None],
                                                        case: Callable[..., Case],
                                                        golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    plant(out)
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 "terminal status succeeded has no workflow_finished event with that status and a stop reason",
                 only=True)


# --------------------------------------------------------------------------- differential

def test_differential_status_differs_fails(golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    out.crash_point = "after_checkpoint:approval_decision"
    out.status, out.stop_reason = "failed", "task 'issue_refund' failed: refused"
    gold = golden(HAPPY)
    assert_fails(differential(out, gold), "differential",
                 f"golden run ended succeeded ({gold.stop_reason}); after the crash the run ended failed "
                 "(task 'issue_refund' failed: refused)", only=True)


def test_differential_stop_reason_differs_fails(golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    out.stop_reason = "completed: 2 tasks done, 1 skipped"
    assert_fails(differential(out, golden(HAPPY)), "differential", "after the crash the run ended succeeded "
                                                                   "(completed: 2 tasks done, 1 skipped)", only=True)


def test_differential_extra_effect_fails(golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, DRAFT), idempotency_key="wf-x/draft_refund@fresh")
    assert_fails(differential(out, golden(HAPPY)), "differential",
                 f"effects differ from the golden run: extra ['{DRAFT} key=wf-x/draft_refund@fresh args=",
                 only=True)


def test_differential_missing_effect_fails(golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    key = the_call(out, NOTIFY)["idempotency_key"]
    drop_calls(out, NOTIFY)
    assert_fails(differential(out, golden(HAPPY)), "differential",
                 f"effects differ from the golden run: extra [], missing ['{NOTIFY} key={key} args=", only=True)


def test_differential_same_effect_under_another_key_fails(golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    set_call(out, ISSUE, idempotency_key="wf-x/issue_refund@fresh")
    failure = assert_fails(differential(out, golden(HAPPY)), "differential", "effects differ from the golden run",
                           only=True)
    assert f"extra ['{ISSUE} key=wf-x/issue_refund@fresh args=" in failure.message
    assert f"missing ['{ISSUE} key=" in failure.message


def test_judge_runs_the_differential_oracle_only_for_crashed_runs(pack: Pack, case: Callable[..., Case],
                                                                  golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, NOTIFY), outcome="duplicate")  # harmless after a kill, so every other oracle passes
    out.kills = 1
    out.stop_reason = "completed: all done"  # differs from the golden run's, still contains "completed"
    assert out.crash_point is None
    assert judge(case(HAPPY), pack, out, golden(HAPPY)) == []
    out.crash_point = "after_effect:notify.sendCustomerEmail"
    assert_fails(judge(case(HAPPY), pack, out, golden(HAPPY)), "differential", "golden run ended succeeded",
                 only=True)
    assert judge(case(HAPPY), pack, out, None) == []


# ---------------------------------------------------------------- checks added after the breaker's report

def test_more_repeated_calls_than_kills_fails(pack: Pack, case: Callable[..., Case],
                                              golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, DRAFT), outcome="duplicate")
    add_call(out, the_call(out, ISSUE), outcome="duplicate")
    out.kills = 1
    assert_fails(side_effects(case(HAPPY), pack, out), "side_effects",
                 "2 tool calls repeated an idempotency key after 1 kill(s)", only=True)


def test_a_step_run_again_after_its_checkpoint_fails(case: Callable[..., Case],
                                                     golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    started = next(e for e in out.trace if e["kind"] == "step_started" and e["task"] == "draft_refund")
    out.trace.insert(len(out.trace) - 2, {**copy.deepcopy(started), "seq": 999})
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 "step draft_refund ran again after its result was checkpointed")


def test_an_effect_before_the_one_it_must_follow_fails(pack: Pack, case: Callable[..., Case],
                                                       golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    notify, issue = the_call(out, NOTIFY), the_call(out, ISSUE)
    notify["gseq"], issue["gseq"] = issue["gseq"], notify["gseq"]
    assert_fails(side_effects(case(HAPPY), pack, out), "side_effects",
                 "effect notify_customer was applied before effect issue_refund")


def test_differential_same_key_other_arguments_fails(golden: Callable[[str], RunOutcome]) -> None:
    gold = golden(HAPPY)
    out = copy.deepcopy(gold)
    out.crash_point = "after_checkpoint:refund_issued"
    the_call(out, NOTIFY)["args"]["refund_id"] = None
    assert_fails(differential(out, gold), "differential", "effects differ from the golden run", only=True)


# ---------------------------------------------------------------- checks added with the fault model's new faults

def test_a_lost_response_allows_one_repeated_call(pack: Pack, case: Callable[..., Case],
                                                  golden: Callable[[str], RunOutcome]) -> None:
    out = golden(HAPPY)
    add_call(out, the_call(out, DRAFT), outcome="duplicate")  # the engine retried with the same key...
    assert_fails(side_effects(case(HAPPY), pack, out), "side_effects",
                 "1 tool calls repeated an idempotency key after 0 kill(s) and 0 lost response(s)", only=True)
    the_call(out, DRAFT)["lost"] = True  # ...because the tool never delivered the first answer
    assert side_effects(case(HAPPY), pack, out) == []
    add_call(out, the_call(out, ISSUE), outcome="duplicate")  # one more repeat is one too many
    assert_fails(side_effects(case(HAPPY), pack, out), "side_effects",
                 "2 tool calls repeated an idempotency key after 0 kill(s) and 1 lost response(s)", only=True)


def test_a_run_that_changes_definition_version_fails(case: Callable[..., Case],
                                                     golden: Callable[[str], RunOutcome]) -> None:
    out = golden(RESTART)
    resumed = [e for e in out.trace if e["kind"] == "workflow_resumed"]
    assert resumed and all(e["version"] == 1 for e in resumed)
    resumed[-1]["version"] = 2
    assert_fails(trace_completeness(bare(case(RESTART)), out), "trace",
                 "the run changed definition version mid-run: it started on version 1, then ran version 2", only=True)


def test_a_wait_past_its_deadline_fails(case: Callable[..., Case], golden: Callable[[str], RunOutcome]) -> None:
    out = _waiting(golden(HAPPY))
    deadline = next(e["deadline"] for e in out.trace if e["kind"] == "approval_requested")
    out.pending_approval = {"approval_id": "refund_approval", "deadline": deadline}
    out.clock_now = deadline - 1.0
    assert trace_completeness(bare(case(HAPPY)), out) == []  # still in time
    out.clock_now = deadline + 1.0  # an engine that never noticed the timeout (DeadlineResetOnResume)
    assert_fails(trace_completeness(bare(case(HAPPY)), out), "trace",
                 "is still waited for at", only=True)
