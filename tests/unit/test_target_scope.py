"""A target's golden run that did not exercise what its file names is an ``error`` (issue 27 item 1): an ``effects:``
entry never called, a human answer never asked for; a case may say its path makes no side effect (issue 24 item 4,
``no_effect``), and rule ``target.no_effect`` holds it to that. Judged on synthetic outcomes here (the real runs:
tests/adapters/test_target_scope_runs.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.api import EffectCall
from crashpoint.errors import CaseError
from crashpoint.harness.judge.verdict import judge_target
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome

BASE = {"target": "t", "engine": "langgraph", "entry": "m:builder", "inputs": [{"thread": "o1", "input": {}}]}


def _call(effect: str, seq: int = 1, outcome: str = "applied") -> EffectCall:
    return EffectCall(seq, effect, f"{effect}-{seq}", "d", {}, outcome, False, 11, "o1", "issue", None, True, gseq=seq)


def _golden(tmp_path: Path, calls: list[EffectCall], deliveries: list[dict] = ()) -> TargetOutcome:
    return TargetOutcome("default", "sync", None, tmp_path, threads={"o1": {"status": "finished", "values": {}}},
                         calls=calls, deliveries=list(deliveries), crash_points=["node:o1@issue"])


def _verdict(target: Target, run: TargetOutcome, case: str = "default"):
    return judge_target(target, target.case(case), "sync", run)


def test_an_effects_entry_never_called_on_the_golden_run_is_an_error(tmp_path: Path) -> None:
    """The issue's case: the node imported charge by name, so the patched one was never called; 50 of 50 passed."""
    target = Target.from_data({**BASE, "effects": ["payments:charge"]})
    r = _verdict(target, _golden(tmp_path, [_call("draft")]))
    assert r.verdict == "error" and r.error.startswith("the golden run never called the effects: entry charge "
                                                       "(payments:charge), so nothing was tested"), r.error
    assert _verdict(target, _golden(tmp_path, [_call("draft"), _call("charge", 2)])).verdict == "passed"


def test_an_answer_never_asked_for_on_the_golden_run_is_an_error(tmp_path: Path) -> None:
    target = Target.from_data({**BASE, "human": {"approve": [{"resume": False, "grants": False}, {"resume": True}],
                                                 "review": [{"resume": "ok"}]}})
    once = [{"kind": "answer", "thread": "o1", "node": "approve", "grants": False, "resume": False}]
    r = _verdict(target, _golden(tmp_path, [_call("draft")], once))
    assert r.verdict == "error", r.error
    assert "never asked for an answer of human node approve (answer 2 of 2: no thread waited on it more than 1 " \
           "time(s))" in r.error and "never asked for an answer of human node review (no thread ever waited on it)" \
           in r.error, r.error
    both = once + [{"kind": "answer", "thread": "o1", "node": "approve"}, {"kind": "redeliver", "thread": "o1",
                                                                          "node": "review"}]
    r = _verdict(target, _golden(tmp_path, [_call("draft")], both))
    assert r.verdict == "error" and "approve" not in r.error and "review" in r.error, r.error
    everything = both + [{"kind": "late_answer", "thread": "o1", "node": "review"}]
    assert _verdict(target, _golden(tmp_path, [_call("draft")], everything)).verdict == "passed"


def test_a_crash_run_is_not_held_to_the_golden_runs_reach(tmp_path: Path) -> None:
    """A kill may end a run before a later answer is asked for: only the golden run is judged for what it reached."""
    target = Target.from_data({**BASE, "effects": ["payments:charge"], "human": {"approve": [{"resume": True}]}})
    golden = _golden(tmp_path, [_call("draft"), _call("charge", 2)], [{"kind": "answer", "thread": "o1",
                                                                       "node": "approve"}])
    crashed = TargetOutcome("default", "sync", "node:o1@issue", tmp_path, threads=golden.threads, calls=golden.calls,
                            deliveries=[], fired=["node:o1@issue"], crash_points=golden.crash_points)
    r = judge_target(target, target.cases[0], "sync", crashed, crash_point="node:o1@issue", golden=golden)
    assert "never" not in (r.error or ""), r.error


def test_a_case_whose_path_makes_no_effect_says_so(tmp_path: Path) -> None:
    """Before, a rejection path that makes no side effect was an error ("the golden run made no tool call"), with no
    way to say that none is expected."""
    target = Target.from_data({**BASE, "effects": ["payments:charge"],
                               "cases": [{"name": "approved"}, {"name": "rejected", "no_effect": True},
                                         {"name": "no-charge", "no_effect": ["charge"]}]})
    nothing = _golden(tmp_path, [])
    nothing.case = "approved"
    assert _verdict(target, nothing, "approved").error.startswith("the golden run made no tool call")
    nothing.case = "rejected"
    assert _verdict(target, nothing, "rejected").verdict == "passed"
    drafted = _golden(tmp_path, [_call("draft")])
    drafted.case = "no-charge"
    assert _verdict(target, drafted, "no-charge").verdict == "passed"


@pytest.mark.parametrize(("case", "calls", "said"), [
    ("rejected", [_call("draft")], "case rejected says its path makes no such side effect (no_effect: true), yet "
                                   "draft was applied in o1"),
    ("no-charge", [_call("draft"), _call("charge", 2)], "(no_effect: [charge]), yet charge was applied in o1"),
])
def test_a_case_that_says_no_effect_and_makes_one_fails(tmp_path: Path, case: str, calls: list, said: str) -> None:
    target = Target.from_data({**BASE, "cases": [{"name": "rejected", "no_effect": True},
                                                 {"name": "no-charge", "no_effect": ["charge"]}]})
    run = _golden(tmp_path, calls)
    run.case = case
    r = _verdict(target, run, case)
    found = [f.message for f in r.failures if f.rule == "target.no_effect"]
    assert r.verdict == "failed" and len(found) == 1 and said in found[0], (r.verdict, r.error, found)
    assert _verdict(target, _golden(tmp_path, [c for c in calls if c.outcome != "applied"]), case).verdict != "failed"


def test_no_effect_is_a_boolean_or_a_list_of_effect_names() -> None:
    for bad in ([], "yes", [""], ["a", "a"]):
        with pytest.raises(CaseError) as caught:
            Target.from_data({**BASE, "cases": [{"name": "c", "no_effect": bad}]})
        assert caught.value.field == "cases[0].no_effect" or caught.value.field.startswith("cases[0].no_effect")
    target = Target.from_data({**BASE, "cases": [{"name": "c", "no_effect": ["pay"]}]})
    assert Target.from_data(target.to_data()).cases[0].no_effect == ["pay"]


def test_run_dir_is_the_runs_folder_and_none_outside_a_run(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import crashpoint

    monkeypatch.delenv("CRASHPOINT_RUN_DIR", raising=False)
    assert crashpoint.run_dir() is None
    monkeypatch.setenv("CRASHPOINT_RUN_DIR", str(tmp_path))
    assert crashpoint.run_dir() == tmp_path
