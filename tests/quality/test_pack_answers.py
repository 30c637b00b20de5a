"""Answers as real APIs give them, on the reference engine (issue 28 item 8): a rate limit waited out for its
``retry_after``, an empty or malformed answer asked again with the same key (answered ``duplicate``), a stale read's
refusal retried: each masked within the task's retries. ``variants.engines:TrustsAnyAnswer`` (the engine before it
checked answers) fails the empty and malformed ones."""

from __future__ import annotations

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.load.schedule import apply
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack
from verdicts import describe

PACK, CASES = load_target(builtin_pack("refunds"))
HAPPY = next(c for c in CASES if c.case_id == "refund_approved_happy_path")
DRAFT, ISSUE = "refunds.draftRefundRequest", "refunds.issueRefund"


def _golden(engine: str, fault: dict) -> object:
    case = apply(HAPPY, PACK, [fault], case_id=f"answer_{fault['outcome']}")
    (result,) = sweep(PACK, [case], ReferenceAdapter(engine=engine, name=engine), crash="none", jobs=1).results
    return result


@pytest.mark.parametrize("tool, outcome", [(DRAFT, "rate_limited"), (DRAFT, "empty_answer"),
                                           (DRAFT, "malformed_answer"), (ISSUE, "stale_read")])
def test_the_reference_engine_masks_each_answer(tool: str, outcome: str) -> None:
    case = apply(HAPPY, PACK, [{"kind": "tool", "tool": tool, "call": 1, "outcome": outcome}])
    assert case.expected["like_fault_free"] is True  # masked within the task's retries: judged as the fault-free run
    run = _golden("crashpoint.engine.engine:Engine", {"kind": "tool", "tool": tool, "call": 1, "outcome": outcome})
    assert run.verdict == "passed", describe([run])
    calls = [c for c in run.outcome.calls if c["tool"] == tool]
    assert [c["outcome"] for c in calls] == {"rate_limited": ["failed", "applied"], "stale_read": ["failed", "applied"]
                                             }.get(outcome, ["applied", "duplicate"])


def test_the_retry_after_a_rate_limit_waits_its_retry_after() -> None:
    run = _golden("crashpoint.engine.engine:Engine",
                  {"kind": "tool", "tool": DRAFT, "call": 1, "outcome": "rate_limited", "seconds": 600.0})
    first, second = [c for c in run.outcome.calls if c["tool"] == DRAFT]
    assert second["at"] - first["at"] >= 600.0  # the task's own backoff is 1 s


@pytest.mark.parametrize("outcome", ["empty_answer", "malformed_answer"])
def test_an_engine_that_trusts_any_answer_is_caught(outcome: str) -> None:
    run = _golden("variants.engines:TrustsAnyAnswer", {"kind": "tool", "tool": DRAFT, "call": 1, "outcome": outcome})
    assert run.verdict == "failed", describe([run])
    assert any(f.oracle == "final_status" for f in run.failures), describe([run])
