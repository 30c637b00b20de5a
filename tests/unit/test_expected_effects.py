"""``expect`` counts each effect's applications per thread (issue 28 item 9): ``effects: {issue_refund: 1}``, judged by
``target.expected_effects`` on every run, the golden run included, so a golden run that pays twice fails on its own
(``differential.same_effects`` takes that golden run for the reference). Bad counts exit 2 naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.api import EffectCall
from crashpoint.errors import CaseError
from crashpoint.harness.judge.target_rules import expected_effects
from crashpoint.harness.load.target import Target
from crashpoint.harness.load.target_check import check_target
from crashpoint.harness.model.outcomes import TargetOutcome

TARGET = """target: t
engine: langgraph
entry: random_key.agent:builder
pythonpath: ["{here}"]
inputs:
  - {{thread: order-9, input: {{order_id: "9", amount_cents: 3100}}}}
expect:
  order-9: {{status: finished, effects: {{refund: {times}}}}}
cases:
  - {{name: ok}}
  - name: denied
    expect: {{order-9: {{effects: {{refund: 0}}}}}}
"""
HERE = Path(__file__).resolve().parents[1] / "data/realbugs"


def _target(tmp_path: Path, times: str = "1", effect: str = "refund") -> Path:
    path = tmp_path / "target.yaml"
    path.write_text(TARGET.format(here=HERE, times=times).replace("refund: 1", f"{effect}: {times}"))
    return path


def _call(seq: int, outcome: str, key: str, thread: str = "order-9") -> EffectCall:
    return EffectCall(seq, "refund", key, "d", {}, outcome, False, 1, thread, "issue", None, True, step=1)


def _run(calls: list[EffectCall], case: str = "ok") -> TargetOutcome:
    return TargetOutcome(case=case, durability="sync", crash_point=None, run_dir=Path("/nonexistent"), calls=calls)


def test_a_golden_run_that_pays_twice_fails_on_its_own(tmp_path: Path) -> None:
    target = Target.from_file(_target(tmp_path))
    found = expected_effects(target, _run([_call(1, "applied", "k1"), _call(2, "applied", "k2")]), None)
    assert [f.rule for f in found] == ["target.expected_effects"]
    assert found[0].message == "thread order-9: refund applied 2 time(s), expected 1 (keys: k1, k2)"
    assert found[0].evidence[0].startswith("ledger#1 refund key=k1 applied")


def test_a_repeat_its_key_answered_and_a_call_that_applied_nothing_do_not_count(tmp_path: Path) -> None:
    target = Target.from_file(_target(tmp_path))
    assert expected_effects(target, _run([_call(1, "failed", "k"), _call(2, "applied", "k"),
                                          _call(3, "duplicate", "k"), _call(4, "applied", "x", "other-thread")]),
                            None) == []
    found = expected_effects(target, _run([_call(1, "failed", "k")]), None)  # paid nothing, reported issued
    assert found[0].message == "thread order-9: refund applied 0 time(s), expected 1; 1 more call(s) applied nothing " \
                               "(failed)"
    # a case's own expect replaces the target's: the denial path must apply none
    assert expected_effects(target, _run([], case="denied"), None) == []
    assert len(expected_effects(target, _run([_call(1, "applied", "k")], case="denied"), None)) == 1


@pytest.mark.parametrize("times", ["-1", "true", "1.5", "[1]"])
def test_a_count_that_is_not_a_whole_number_exits_naming_its_field_and_line(tmp_path: Path, times: str) -> None:
    with pytest.raises(CaseError) as caught:
        Target.from_file(_target(tmp_path, times))
    assert caught.value.field == "expect.order-9.effects.refund" and caught.value.line == 8, (
        caught.value.field, caught.value.line, str(caught.value))


def test_a_count_of_an_effect_the_code_does_not_have_is_refused(tmp_path: Path) -> None:
    target = Target.from_file(_target(tmp_path, effect="refnud"))
    with pytest.raises(CaseError) as caught:
        check_target(target)
    assert caught.value.field == "expect.order-9.effects.refnud" and caught.value.line == 8, caught.value
    assert "counts effect 'refnud' of order-9, which no effect has" in str(caught.value)
    check_target(Target.from_file(_target(tmp_path)))  # the right name passes
