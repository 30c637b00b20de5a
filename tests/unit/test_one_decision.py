"""One decision order for every run: :func:`~crashpoint.harness.judge.verdict.judge` (a pack's run) and
:func:`~crashpoint.harness.judge.verdict.judge_target` (a target's run) both leave the verdict to
:func:`~crashpoint.harness.judge.verdict.decide`, so the same situation gets the same verdict both ways: an
engine that lacks a feature, a hung worker, a broken engine, a kill that was not verified, a run that did not
test what it claims (a pack's crash point never fired; a target's duplicate that never overlapped), a crash point never
reached, a finding, a rule that raised, a finding beside a rule that raised, and a clean run."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from crashpoint.api import EffectCall
from crashpoint.errors import Unsupported, WorkerTimeout
from crashpoint.harness.model.rules import Finding, Rule, RuleContext
from crashpoint.harness.judge.verdict import decide, judge, judge_target
from crashpoint.harness.load.loader import Case, Pack, load_target
from crashpoint.harness.run.pack_driver import RunOutcome
from crashpoint.harness.run.target_driver import TargetOutcome, TargetUnsupported
from crashpoint.harness.load.target import Target, TargetCase

ROOT = Path(__file__).resolve().parents[2]
POINT = "after_effect:refunds.issueRefund"
CALL = {"tool": "refunds.issueRefund", "outcome": "applied", "key": "k1"}

INVARIANTS = '''
import os

def checked(run):
    """What the situation asks of it (``CP_TEST_INVARIANT``): nothing, a finding, or a bug of its own."""
    how = os.environ.get("CP_TEST_INVARIANT", "")
    if how == "find":
        return "the refund was issued twice"
    if how == "raise":
        raise KeyError("no such field")
    return True
'''


def _finds(ctx: RuleContext) -> list[Finding]:
    return [Finding("test_only.finds", "the refund was issued twice")]


def _raises(ctx: RuleContext) -> list[Finding]:
    raise KeyError("no such field")


FINDS = Rule("test_only.finds", "finds something on every run", _finds, __name__)
RAISES = Rule("test_only.raises", "raises on every run", _raises, __name__)


@pytest.fixture(scope="module")
def refund_case() -> tuple[Pack, Case]:
    pack, cases = load_target(ROOT / "scenarios" / "refunds")
    return pack, cases[0]


@pytest.fixture()
def target(tmp_path: Path) -> Target:
    """A target whose one invariant does what ``CP_TEST_INVARIANT`` says (module written in ``tmp_path``)."""
    name = f"cp_invariants_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(INVARIANTS))
    return Target(name="t", entry="m:g", inputs=[{"thread": "a", "input": 1}], invariants=[f"{name}:checked"],
                  pythonpath=[str(tmp_path)])


#: The kill log of a run whose first kill fired and was verified (the pair's second point then never reached).
FIRST_KILL = ({"worker": 1, "pid": 7, "signal": "SIGKILL", "crash_point": POINT, "resumed_by": 8},)


def _pack_run(tmp_path: Path, *, fired: bool = True, kill_problems: tuple[str, ...] = (),
              kill_log: tuple[dict[str, Any], ...] = ()) -> RunOutcome:
    return RunOutcome("c", POINT, "wf", tmp_path, status="succeeded", calls=[dict(CALL)], crash_fired=fired,
                      crash_points=[POINT], kill_problems=list(kill_problems), kill_log=[dict(k) for k in kill_log])


def _target_run(tmp_path: Path, *, not_tested: tuple[str, ...] = (), kill_problems: tuple[str, ...] = (),
                kill_log: tuple[dict[str, Any], ...] = ()) -> TargetOutcome:
    return TargetOutcome("default", "sync", POINT, tmp_path, threads={"a": {"status": "finished", "values": {}}},
                         crash_points=[POINT], fired=[POINT], not_tested=list(not_tested),
                         kill_problems=list(kill_problems), kill_log=[dict(k) for k in kill_log])


#: situation -> (pack run, its rules, target run, what the target's invariant does, target point reached)
SITUATIONS: dict[str, tuple[Any, ...]] = {
    "unsupported": (Unsupported("no timers in this release"), [], TargetUnsupported("no timers in this release"),
                    "", True),
    "hung worker": (WorkerTimeout("worker did not exit within 60 s"), [],
                    WorkerTimeout("worker did not exit within 60 s"), "", True),
    "engine broke": (RuntimeError("boom"), [], RuntimeError("boom"), "", True),
    "kill not verified": ({"kill_problems": ("pid 7 was still alive",)}, [FINDS],
                          {"kill_problems": ("pid 7 was still alive",)}, "find", True),
    "a duplicate that never overlapped": ({"fired": False}, [FINDS],
                                          {"not_tested": ("the duplicate start never overlapped",)}, "find", True),
    "crash point never reached": ({"fired": False}, [FINDS], {}, "find", False),
    # a sampled pair on a broken variant (dbos 3.4.0, issue 27 item 4): the first kill fired, its recovery paid
    # twice and never reached the second point; the double payment is the finding, not "nothing was tested"
    "second point never reached after a kill that found something": (
        {"fired": False, "kill_log": FIRST_KILL}, [FINDS], {"kill_log": FIRST_KILL}, "find", False),
    "a finding": ({}, [FINDS], {}, "find", True),
    "a rule raised": ({}, [RAISES], {}, "raise", True),
    "clean": ({}, [], {}, "", True),
}
EXPECTED = {"unsupported": "unsupported", "hung worker": "unknown", "engine broke": "error",
            "kill not verified": "error", "crash point never reached": "error",
            "second point never reached after a kill that found something": "failed",
            "a duplicate that never overlapped": "error", "a finding": "failed",
            "a rule raised": "unknown", "clean": "passed"}


@pytest.mark.parametrize("situation", list(SITUATIONS))
def test_the_same_situation_gets_the_same_verdict_for_a_pack_and_a_target(
        situation: str, refund_case: tuple[Pack, Case], target: Target, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    pack, case = refund_case
    pack_run, rules, target_run, invariant, reached = SITUATIONS[situation]
    if isinstance(pack_run, dict):
        pack_run = _pack_run(tmp_path, **pack_run)
        target_run = _target_run(tmp_path, **target_run)
    monkeypatch.setenv("CP_TEST_INVARIANT", invariant)
    by_pack = judge(case, pack, pack_run, crash_point=POINT, golden=_pack_run(tmp_path), rules=rules)
    by_target = judge_target(target, TargetCase(), "sync", target_run, crash_point=POINT,
                             golden=_target_run(tmp_path), reached=reached)
    assert by_pack.verdict == by_target.verdict == EXPECTED[situation], (by_pack.error, by_target.error)
    if situation in ("unsupported", "hung worker", "engine broke", "kill not verified"):
        assert by_pack.error.endswith(by_target.error) or by_target.error in by_pack.error, \
            (by_pack.error, by_target.error)
    if situation == "crash point never reached":
        assert f"crash point {POINT} was never reached" in by_pack.error
        assert f"crash point {POINT} was never reached" in by_target.error
    if situation.startswith("second point never reached"):
        for result in (by_pack, by_target):
            assert any(n.startswith(f"crash point {POINT} was never reached") for n in result.vacuity), result.vacuity
    assert bool(by_pack.failures) == bool(by_target.failures) == (invariant == "find")


def test_the_decision_order() -> None:
    """What comes first wins: an exception, then the first reason the run did not test what it claims, then a
    finding (with the rules that raised named beside it), then a rule that raised."""
    assert decide(TargetUnsupported("no")) == ("unsupported", "no")
    assert decide(WorkerTimeout("60 s"), ["not tested"], found=True) == ("unknown", "60 s")
    assert decide(ValueError("bad"), ["not tested"]) == ("error", "ValueError: bad")
    assert decide(None, [None, "", "kill not verified", "never reached"], found=True, broken="r raised") == \
        ("error", "kill not verified")
    assert decide(None, [None], found=True, broken="r raised") == ("failed", "r raised")
    assert decide(None, [None], found=True) == ("failed", None)
    assert decide(None, [], broken="r raised") == ("unknown", "r raised")
    assert decide() == ("passed", None)


PAID = EffectCall(1, "pay", "k-a", "d", {}, "applied", False, 1, "a", "n", None, True)
#: golden-run situation -> (pack outcome fields, target outcome fields, the rule or invariant finds something, verdict)
GOLDEN: dict[str, tuple[dict[str, Any], dict[str, Any], bool, str]] = {
    "faults never fired": ({"faults_missed": ["refunds.issueRefund fatal"]},
                           {"faults_missed": ["pay fatal"], "calls": [PAID]}, False, "error"),
    "faults never fired, a property rule found something": ({"faults_missed": ["refunds.issueRefund fatal"]},
                                                            {"faults_missed": ["pay fatal"], "calls": [PAID]}, True,
                                                            "failed"),
    "no effect call": ({"calls": []}, {"calls": []}, False, "error"),
    "clean": ({}, {"calls": [PAID]}, False, "passed"),
}


@pytest.mark.parametrize("situation", list(GOLDEN))
def test_a_golden_runs_vacuity_gets_the_same_verdict_for_a_pack_and_a_target(
        situation: str, refund_case: tuple[Pack, Case], target: Target, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A golden run that tested nothing (its faults never fired, it called no effect) is an ``error`` for both
    subjects, unless a property rule found something anyway (that finding holds whatever the faults did): one
    rule for both (before the one judge, a pack's vacuity beat every finding and a target's gave way to any)."""
    pack, case = refund_case
    pack_fields, target_fields, finds, expected = GOLDEN[situation]
    monkeypatch.setenv("CP_TEST_INVARIANT", "find" if finds else "")
    pack_run = RunOutcome("c", None, "wf", tmp_path, status="succeeded", calls=[dict(CALL)], crash_points=[POINT])
    for name, value in pack_fields.items():
        setattr(pack_run, name, value)
    target_run = TargetOutcome("default", "sync", None, tmp_path, threads={"a": {"status": "finished", "values": {}}},
                               crash_points=[POINT], **target_fields)
    by_pack = judge(case, pack, pack_run, rules=[FINDS] if finds else [])
    by_target = judge_target(target, TargetCase(), "sync", target_run)
    assert by_pack.verdict == by_target.verdict == expected, (by_pack.error, by_target.error)
    if expected == "error":
        assert by_pack.error.split(":")[0] == by_target.error.split(":")[0], (by_pack.error, by_target.error)
