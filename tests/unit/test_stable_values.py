"""The golden comparison on values that legitimately differ (issue 27 item 5): what two fault-free runs of a case
disagree on, and the target file's ``ignore:`` paths, are left out of ``differential.same_end`` and
``differential.same_effects``; everything else is still compared. Judged on synthetic outcomes here (the real
runs: tests/adapters/test_target_stable_values.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.api import EffectCall
from crashpoint.errors import CaseError
from crashpoint.harness.judge import stable
from crashpoint.harness.judge.target_rules import judge
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome

BASE = {"target": "t", "engine": "langgraph", "entry": "m:builder", "inputs": [{"thread": "o1", "input": {}}]}


def _call(effect: str, seq: int) -> EffectCall:
    return EffectCall(seq, effect, f"{effect}-{seq}", "d", {}, "applied", False, 11, "o1", "issue", None, True, gseq=seq)


def _run(values: dict, crash_point: str | None = None, calls: int = 1, status: str = "finished") -> TargetOutcome:
    return TargetOutcome("default", "sync", crash_point, Path("."), threads={"o1": {"status": status, "values": values}},
                         calls=[_call("pay", n + 1) for n in range(calls)])


def _rules(target: Target, run: TargetOutcome, golden: TargetOutcome) -> list[str]:
    found, unknown = judge(target, run, golden)
    assert not unknown, unknown
    return [f"{f.rule}: {f.message}" for f in found if f.rule.startswith("differential.")]


def test_differing_names_the_deepest_paths_at_which_two_states_differ() -> None:
    a = {"receipt": {"id": "r1", "amount": 5}, "at": 1.5, "tags": [1], "only_a": 1}
    b = {"receipt": {"id": "r2", "amount": 5}, "at": 2.5, "tags": [1]}
    assert stable.differing(a, b) == ["at", "only_a", "receipt.id"]
    assert stable.differing({"x": 1}, {"x": 1}) == [] and stable.differing(1, 2) == [stable.WHOLE]
    assert stable.covered("receipt.id", ["receipt"]) and not stable.covered("receipt_id", ["receipt"])


def test_what_two_fault_free_runs_disagree_on_is_left_out_and_the_rest_still_compared() -> None:
    target = Target.from_data(BASE)
    golden = _run({"receipt": {"id": "r1", "amount": 5}, "at": 1.5})
    golden.unstable = stable.unstable(golden, _run({"receipt": {"id": "r2", "amount": 5}, "at": 2.5}))
    assert golden.unstable == {"values": {"o1": ["at", "receipt.id"]}}
    crashed = _run({"receipt": {"id": "r3", "amount": 5}, "at": 9.0}, "after_effect:pay")
    assert _rules(target, crashed, golden) == []
    # before: both runs differ from the golden run in `at` and `receipt`, although nothing was lost or repeated
    assert _rules(target, crashed, _run({"receipt": {"id": "r1", "amount": 5}, "at": 1.5})) == [
        "differential.same_end: thread o1 ended finished where the golden run ended finished; state differs in at, "
        "receipt"]
    wrong = _run({"receipt": {"id": "r3", "amount": 4}, "at": 9.0}, "after_effect:pay")  # an amount is not an id
    assert _rules(target, wrong, golden) == ["differential.same_end: thread o1 ended finished where the golden run "
                                             "ended finished; state differs in receipt"]


def test_ignore_paths_leave_out_what_the_target_file_names() -> None:
    target = Target.from_data({**BASE, "ignore": ["receipt.amount"]})
    golden = _run({"receipt": {"id": "r1", "amount": 5}})
    assert _rules(target, _run({"receipt": {"id": "r1", "amount": 4}}, "after_effect:pay"), golden) == []
    assert _rules(target, _run({"receipt": {"id": "r2", "amount": 5}}, "after_effect:pay"), golden) != []
    assert stable.notes(target, {}) == ["left out of the golden comparison: state receipt.amount in every thread "
                                        "(ignore: in the target file)"]


def test_an_effect_applied_differently_often_by_two_fault_free_runs_is_not_counted() -> None:
    target = Target.from_data(BASE)
    golden = _run({}, calls=2)
    crashed = _run({}, "after_effect:pay", calls=3)
    assert [r.split(":")[0] for r in _rules(target, crashed, golden)] == ["differential.same_effects"]
    golden.unstable = stable.unstable(golden, _run({}, calls=1))
    assert golden.unstable == {"effects": [["o1", "pay"]]}
    assert _rules(target, crashed, golden) == []


def test_a_thread_two_fault_free_runs_end_differently_is_not_compared_and_the_notes_say_so() -> None:
    golden = _run({"a": 1})
    found = stable.unstable(golden, _run({"a": 1}, status="waiting"))
    assert found == {"status": ["o1"]}
    golden.unstable = found
    assert _rules(Target.from_data(BASE), _run({"a": 2}, "after_effect:pay", status="waiting"), golden) == []
    assert stable.notes(Target.from_data(BASE), found) == [
        "left out of the golden comparison: thread o1's end (its status differs between two fault-free runs)"]


def test_the_summary_names_each_golden_runs_left_out_fields_once() -> None:
    from crashpoint.harness.model.results import RunResult

    note = "left out of the golden comparison: thread o1 state at (differs between two fault-free runs)"
    golden = RunResult("default[sync]", None, "passed", notes=[note])
    crash = RunResult("default[sync]", "after_effect:pay", "passed", notes=[note])
    assert stable.left_out_summary([golden, crash, golden]) == [
        "left out of the golden comparison (what two fault-free runs disagree on, and ignore: paths; every other "
        "rule judges it):", "  default[sync]: thread o1 state at (differs between two fault-free runs)"]
    assert stable.left_out_summary([crash]) == []


@pytest.mark.parametrize("bad", [[""], ["a..b"], [".a"], ["a b"], "receipt", [1]])
def test_an_ignore_that_is_not_a_list_of_dotted_paths_is_refused_naming_the_field(bad) -> None:
    with pytest.raises(CaseError) as err:
        Target.from_data({**BASE, "ignore": bad})
    assert "ignore" in str(err.value), err.value
