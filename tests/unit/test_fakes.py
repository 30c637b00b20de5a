"""The fake world's scripted tool faults (``crashpoint.fakes``): what each does to the ledger, the
clock and the caller. In-process, no worker processes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import ANSWERS, EPOCH_S, Ledger
from crashpoint.fakes.tools import Toolbox
from crashpoint.protocols import ToolError

DRAFT, ISSUE = "refunds.draftRefundRequest", "refunds.issueRefund"
ARGS = {"order_id": "ord_1", "amount_cents": 1200}


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Ledger]:
    led = Ledger(tmp_path / "ledger.db")
    yield led
    led.close()


@pytest.fixture
def box(ledger: Ledger) -> Toolbox:
    return Toolbox(ledger, VirtualClock(ledger))


def test_lost_response_applies_the_effect_records_it_lost_and_answers_a_retryable_error(
        ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "lost_response")
    with pytest.raises(ToolError, match="connection reset after the effect") as info:
        box.call(DRAFT, ARGS, "k1")
    assert info.value.retryable
    (call,) = ledger.calls(DRAFT)
    assert (call.outcome, call.lost, call.idempotency_key) == ("applied", True, "k1")
    assert call.result["status"] == "drafted"
    assert ledger.applied(DRAFT) == [call]
    assert ledger.unconsumed_script() == []


def test_retry_after_a_lost_response_is_a_duplicate_that_returns_the_first_result(
        ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "lost_response")
    with pytest.raises(ToolError):
        box.call(DRAFT, ARGS, "k1")
    first = ledger.calls(DRAFT)[0].result
    assert box.call(DRAFT, ARGS, "k1") == first  # same key: the first (lost) answer, not a second draft
    assert [(c.outcome, c.lost) for c in ledger.calls(DRAFT)] == [("applied", True), ("duplicate", False)]
    assert len(ledger.applied(DRAFT)) == 1


def test_retry_after_a_lost_response_with_a_new_key_is_a_second_effect(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "lost_response")
    with pytest.raises(ToolError):
        box.call(DRAFT, ARGS, "k1")
    second = box.call(DRAFT, ARGS, "k1#retry")
    assert second["draft_id"] != ledger.calls(DRAFT)[0].result["draft_id"]
    assert len(ledger.applied(DRAFT)) == 2


def test_lost_answer_to_a_refusal_is_recorded_failed_and_lost(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(ISSUE, "lost_response")
    with pytest.raises(ToolError, match="connection reset") as info:
        box.call(ISSUE, {"draft_id": "nope"}, "k1")
    assert info.value.retryable  # the caller cannot tell a lost refusal from a lost success
    (call,) = ledger.calls(ISSUE)
    assert (call.outcome, call.lost, call.retryable) == ("failed", True, False)
    with pytest.raises(ToolError, match="missing") as again:  # the refusal is sticky for the key
        box.call(ISSUE, {"draft_id": "nope"}, "k1")
    assert not again.value.retryable


def test_slow_call_advances_the_virtual_clock_then_succeeds(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "slow", seconds=4000)
    result = box.call(DRAFT, ARGS, "k1")
    assert result["status"] == "drafted"
    assert box.clock.now() == EPOCH_S + 4000
    (call,) = ledger.calls(DRAFT)
    assert (call.outcome, call.lost, call.at) == ("applied", False, EPOCH_S)  # stamped when it began
    box.call(DRAFT, ARGS, "k2")  # the script was used once: the next call takes no time
    assert box.clock.now() == EPOCH_S + 4000


def test_a_repeated_key_does_not_consume_a_slow_script(ledger: Ledger, box: Toolbox) -> None:
    box.call(DRAFT, ARGS, "k1")
    ledger.script(DRAFT, "slow", seconds=10)
    box.call(DRAFT, ARGS, "k1")  # answered from the ledger
    assert box.clock.now() == EPOCH_S and len(ledger.unconsumed_script()) == 1


def test_timeout_applies_nothing_and_raises_a_retryable_timeout(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "timeout", times=2)
    for _ in range(2):
        with pytest.raises(ToolError, match="timeout") as info:
            box.call(DRAFT, ARGS, "k1")
        assert info.value.retryable
    assert [(c.outcome, c.retryable, c.lost) for c in ledger.calls(DRAFT)] == [("failed", True, False)] * 2
    assert ledger.applied(DRAFT) == []
    assert ledger.db.execute("SELECT COUNT(*) FROM state").fetchone()[0] == 0  # the service holds no draft
    assert box.call(DRAFT, ARGS, "k1")["status"] == "drafted"  # the same key works once the outage ends
    assert len(ledger.applied(DRAFT)) == 1


def test_tool_fault_crash_points_are_passed_like_any_call(ledger: Ledger) -> None:
    passed: list[str] = []
    box = Toolbox(ledger, VirtualClock(ledger), probe=passed.append)
    ledger.script(DRAFT, "timeout")
    ledger.script(DRAFT, "lost_response")
    for _ in range(2):
        with pytest.raises(ToolError):
            box.call(DRAFT, ARGS, "k1")
    assert passed == [f"{p}_effect:{DRAFT}" for p in ("before", "after")] * 2


@pytest.mark.parametrize("outcome, seconds", [("slow", None), ("slow", 0), ("slow", -1), ("timeout", 5.0),
                                              ("nap", None)])
def test_script_refuses_bad_outcomes(ledger: Ledger, outcome: str, seconds: float | None) -> None:
    with pytest.raises(ValueError):
        ledger.script(DRAFT, outcome, seconds=seconds)


# -- answers as real APIs give them (issue 28 item 8) ---------------------------------------------------------
def test_a_rate_limit_applies_nothing_and_says_429_and_how_long_to_wait(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "rate_limited", seconds=45.0)
    with pytest.raises(ToolError, match="429 Too Many Requests: rate limited, retry after 45 s") as info:
        box.call(DRAFT, ARGS, "k1")
    assert (info.value.retryable, info.value.maybe_applied, info.value.status, info.value.retry_after) == (
        True, False, 429, 45.0)
    (call,) = ledger.calls(DRAFT)
    assert (call.outcome, call.retryable, call.lost) == ("failed", True, False)
    assert box.clock.now() == call.at  # the call itself takes no time: waiting is the caller's
    assert box.call(DRAFT, ARGS, "k1")["status"] == "drafted"  # the same key after the wait: applied once
    assert len(ledger.applied(DRAFT)) == 1


@pytest.mark.parametrize("outcome, answer", [("empty_answer", {}), ("malformed_answer", ANSWERS["malformed"])])
def test_an_empty_or_malformed_answer_is_applied_and_the_same_key_gets_the_real_one(
        ledger: Ledger, box: Toolbox, outcome: str, answer: object) -> None:
    ledger.script(DRAFT, outcome)
    assert box.call(DRAFT, ARGS, "k1") == answer  # no error: what came back is not the answer
    (call,) = ledger.calls(DRAFT)
    assert (call.outcome, call.lost) == ("applied", True) and call.result["status"] == "drafted"
    again = box.call(DRAFT, ARGS, "k1")
    assert again == call.result and again["draft_id"].startswith("dr_")
    assert [c.outcome for c in ledger.calls(DRAFT)] == ["applied", "duplicate"]


def test_an_empty_answer_is_a_fresh_dict_each_time(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "empty_answer", times=2)
    first = box.call(DRAFT, ARGS, "k1")
    first["mutated"] = True
    assert box.call(DRAFT, ARGS, "k2") == {}


def test_a_stale_read_does_not_see_the_write_just_made_and_its_refusal_is_retryable(
        ledger: Ledger, box: Toolbox) -> None:
    draft = box.call(DRAFT, ARGS, "d1")
    ledger.script(ISSUE, "stale_read")
    with pytest.raises(ToolError, match="is missing .*a stale read") as info:
        box.call(ISSUE, {"draft_id": draft["draft_id"]}, "i1")
    assert info.value.retryable and not info.value.maybe_applied
    assert box.call(ISSUE, {"draft_id": draft["draft_id"]}, "i1")["status"] == "issued"  # the write shows now
    assert [c.outcome for c in ledger.calls(ISSUE)] == ["failed", "applied"]


def test_a_stale_read_sees_the_record_as_before_its_latest_write(ledger: Ledger, box: Toolbox) -> None:
    draft = box.call(DRAFT, ARGS, "d1")
    box.call("refunds.cancelRefundDraft", {"result": draft}, "c1")  # drafted -> cancelled
    ledger.script(ISSUE, "stale_read")
    # the issue reads the draft still "drafted" (the cancel not seen yet) and issues it: what a stale read risks
    assert box.call(ISSUE, {"draft_id": draft["draft_id"]}, "i1")["status"] == "issued"


def test_a_stale_read_of_a_tool_that_reads_nothing_answers_as_usual(ledger: Ledger, box: Toolbox) -> None:
    ledger.script(DRAFT, "stale_read")
    assert box.call(DRAFT, ARGS, "d1")["status"] == "drafted"


@pytest.mark.parametrize("outcome, seconds", [("rate_limited", None), ("rate_limited", 0), ("empty_answer", 3.0),
                                              ("stale_read", 1.0)])
def test_script_refuses_the_new_outcomes_with_bad_seconds(ledger: Ledger, outcome: str, seconds: float | None) -> None:
    with pytest.raises(ValueError):
        ledger.script(DRAFT, outcome, seconds=seconds)
