"""The fault kind added as one module (``harness/faults/kinds/late_answer.py``): a tool that answers
after its timeout. It catches ``NewKeyAfterTimeout`` (a timed-out call retried under a new key), which
a plain timeout, a lost answer and kills do not make apply an effect twice; the reference engine passes."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.faults import kinds
from crashpoint.harness.run.schedule_search import search_case
from crashpoint.harness.load.schedule import apply
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack
from verdicts import describe

BUGGY = "variants.engines:NewKeyAfterTimeout"
PACK, CASES = load_target(builtin_pack("refunds"))
HAPPY = next(c for c in CASES if c.case_id == "refund_approved_happy_path")
DRAFT = "refunds.draftRefundRequest"


def _golden(engine: str, fault: dict) -> object:
    case = apply(HAPPY, PACK, [fault], case_id=f"late_{fault.get('outcome', fault['kind'])}")
    (result,) = sweep(PACK, [case], ReferenceAdapter(engine=engine, name=engine), crash="none", jobs=1).results
    return result


def test_late_answer_is_registered_with_its_schema_definition_and_masked_within_the_budget() -> None:
    kind = kinds.get("late_answer")
    assert kind.injected and "tool_late_answer" in kinds.columns()
    fault = {"kind": "late_answer", "tool": DRAFT, "call": 1}
    case = apply(HAPPY, PACK, [fault])
    assert case.faults == [{**fault, "times": 1}] and case.expected["like_fault_free"] is True
    assert kinds.describe(fault) == f"{DRAFT} call 1: answers after its timeout x1"


def test_a_tool_that_answers_after_its_timeout_catches_a_new_key_after_a_timeout() -> None:
    fault = {"kind": "late_answer", "tool": DRAFT, "call": 1, "seconds": 45.0}
    bad = _golden(BUGGY, fault)
    assert bad.verdict == "failed", describe([bad])
    assert any(f.oracle == "side_effects" and "applied 2 times" in f.message for f in bad.failures), describe([bad])
    calls = [c for c in bad.outcome.calls if c["tool"] == DRAFT]
    assert [c["outcome"] for c in calls] == ["applied", "applied"] and calls[0]["lost"]
    good = _golden("crashpoint.engine.engine:Engine", fault)
    assert good.verdict == "passed", describe([good])
    assert [c["outcome"] for c in good.outcome.calls if c["tool"] == DRAFT] == ["applied", "duplicate"]


@pytest.mark.parametrize("outcome", ["timeout", "lost_response"])
def test_the_older_tool_faults_apply_the_effect_once_on_that_engine(outcome: str) -> None:
    run = _golden(BUGGY, {"kind": "tool", "tool": DRAFT, "call": 1, "outcome": outcome})
    assert not any(f.oracle == "side_effects" for f in run.failures), describe([run])
    assert len([c for c in run.outcome.calls if c["tool"] == DRAFT and c["outcome"] == "applied"]) == 1


@pytest.mark.slow
def test_the_generated_search_finds_it_with_the_new_kind(tmp_path: Path) -> None:
    result = search_case(HAPPY, PACK, ReferenceAdapter(engine=BUGGY, name=BUGGY), seed=20261130, budget=20,
                         workdir=tmp_path, kinds=["late_answer"], max_faults=2)
    assert result.found is not None and result.generated <= 20
    assert [f["kind"] for f in result.found.schedule] == ["late_answer"]
    clean = search_case(HAPPY, PACK, ReferenceAdapter(), seed=20261130, budget=result.generated,
                        workdir=tmp_path / "ref", kinds=["late_answer"], max_faults=2)
    assert clean.found is None
