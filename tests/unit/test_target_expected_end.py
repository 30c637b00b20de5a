"""``expect:`` in a target file (per case, or the target's default) and the rule that judges it,
``target.expected_end``, on every run, the golden run included."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.errors import CaseError
from crashpoint.harness.run.target_driver import TargetOutcome
from crashpoint.harness.judge.target_rules import expected_end, judge
from crashpoint.harness.load.target import Target, TargetCase

DENIED = {"refund-1001": {"status": "finished", "values": {"result": {"status": "denied"}}}}
TARGET = Target(name="t", entry="m:builder", inputs=[{"thread": "refund-1001", "input": {}}],
                cases=[TargetCase("denied", expect=DENIED), TargetCase("approved")],
                expect={"refund-1001": {"status": "finished"}})


def _run(case: str, status: str, result: dict, crash_point: str | None = None) -> TargetOutcome:
    out = TargetOutcome(case, "sync", crash_point, Path("."))
    out.threads = {"refund-1001": {"status": status, "values": {"result": result, "log": ["x"]}}}
    return out


def test_a_golden_run_that_ends_wrong_fails_the_expected_end_and_the_right_one_passes() -> None:
    """The refund issued although the reviewer denied: the golden run itself is wrong, so every crash run that
    ends like it passes ``differential.same_end``; ``target.expected_end`` fails the golden run."""
    wrong = _run("denied", "finished", {"status": "refunded", "refund_id": "r1"})
    found, unknown = judge(TARGET, wrong, None)
    assert not unknown and [f.rule for f in found] == ["target.expected_end"], found
    assert found[0].message == ("thread refund-1001 did not end as expected: values.result.status: expected "
                                '"denied", got "refunded"'), found[0].message
    crashed = _run("denied", "finished", {"status": "refunded", "refund_id": "r1"}, "after_effect:issue_refund")
    crashed_found, _ = judge(TARGET, crashed, wrong)
    assert "differential.same_end" not in {f.rule for f in crashed_found}, crashed_found
    assert [f.rule for f in expected_end(TARGET, crashed, wrong)] == ["target.expected_end"]
    right = _run("denied", "finished", {"status": "denied"})
    assert expected_end(TARGET, right, None) == [] and judge(TARGET, right, None) == ([], [])


def test_a_case_without_its_own_expect_takes_the_targets() -> None:
    assert expected_end(TARGET, _run("approved", "finished", {"status": "refunded"}), None) == []
    found = expected_end(TARGET, _run("approved", "waiting", {}), None)
    assert [f.message for f in found] == ["thread refund-1001 did not end as expected: status: expected finished, "
                                          "got waiting"]
    assert expected_end(Target(name="t", entry="m:b", inputs=[{"thread": "a", "input": 1}]),
                        _run("default", "stuck", {}), None) == []  # nothing expected: nothing to judge


def test_a_boolean_is_expected_as_a_boolean_not_as_1_or_0() -> None:
    """Python's ``True == 1``: before, ``expect`` {approved: true} passed a thread whose approved was 1, and
    {count: 1} one whose count was true (both seen passing on a LangGraph golden run)."""
    target = Target(name="t", entry="m:b", inputs=[{"thread": "refund-1001", "input": 1}],
                    expect={"refund-1001": {"values": {"result": {"approved": True, "count": 1, "tags": [False, 2.0]}}}})
    found = expected_end(target, _run("default", "finished", {"approved": 1, "count": True, "tags": [0, 2]}), None)
    assert [f.evidence for f in found] == [["values.result.approved: expected true, got 1",
                                           "values.result.count: expected 1, got true",
                                           "values.result.tags: expected [false, 2.0], got [0, 2]"]], found
    assert expected_end(target, _run("default", "finished", {"approved": True, "count": 1.0, "tags": [False, 2]}),
                        None) == []


def test_the_expect_round_trips_through_the_yaml_form() -> None:
    again = Target.from_data(TARGET.to_data())
    assert again == TARGET and again.expected(again.case("denied")) == DENIED


HEAD = "target: x\nengine: langgraph\nentry: a:b\ninputs:\n  - {thread: t1, input: 1}\n"


@pytest.mark.parametrize("text, where", [
    ("expect:\n  t1: {status: done}\n", "7: field expect.t1.status"),
    ("expect:\n  t1: {state: {a: 1}}\n", "7: field expect.t1"),
    ("cases:\n  - name: c\n    expect:\n      t1: {values: [1]}\n", "9: field cases[0].expect.t1.values"),
    ("cases:\n  - name: c\n    expect:\n      t2: {status: finished}\n", "9: field cases[0].expect.t2: expect names "
                                                                        "thread 't2', which inputs do not start"),
])
def test_a_bad_expect_names_its_file_line_and_field(tmp_path: Path, text: str, where: str) -> None:
    bad = tmp_path / "t.yaml"
    bad.write_text(HEAD + text)
    with pytest.raises(CaseError) as info:
        Target.from_file(bad)
    assert str(info.value).startswith(f"{bad}:{where}"), str(info.value)
