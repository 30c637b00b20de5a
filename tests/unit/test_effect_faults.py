"""Effect faults of a target's default sweep (issue 28 items 7 and 9): the spec part ``fault:EFFECT#N=OUTCOME``, the
specs a golden run gives, and the judging of a thread that stopped at its fault (crashpoint.harness.judge.fault_stops).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.api import EffectCall
from crashpoint.harness.judge import fault_stops
from crashpoint.harness.load.target import TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.results import RunResult, SweepResult
from crashpoint.harness.model.rules import Finding
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run import effect_faults
from crashpoint.reports.summary import first_kill


def _call(seq: int, effect: str, outcome: str = "applied", thread: str = "t1") -> EffectCall:
    return EffectCall(seq, effect, f"k{seq}", "d", {}, outcome, False, 1, thread, "n", None, True)


def test_a_spec_reads_its_fault_parts() -> None:
    part = crashpoints.fault_part("issue_refund", 2, "lost_response")
    assert part == "fault:issue_refund#2=lost_response"
    spec = crashpoints.parse(part)
    assert spec.faults == (("issue_refund", 2, "lost_response"),) and spec.kills == () and spec.first is None
    both = crashpoints.parse(f"after_effect:draft_refund >> {crashpoints.fault_part('notify', 1, 'timeout')}")
    assert both.kills == ("after_effect:draft_refund",) and both.faults == (("notify", 1, "timeout"),)
    for bad in ("fault:issue_refund#1=bogus", "fault:issue_refund=timeout", "fault:issue_refund#0=timeout",
                "fault:#1=timeout"):
        with pytest.raises(ValueError, match="a fault part reads"):
            crashpoints.parse(bad)


def test_each_effect_times_out_at_its_first_application_and_every_application_loses_its_answer() -> None:
    golden = TargetOutcome("c", "sync", None, Path("."), calls=[
        _call(1, "draft"), _call(2, "notify"), _call(3, "issue", "duplicate"), _call(4, "issue"), _call(5, "notify"),
        _call(6, "refused", "failed")])
    # the duplicate took no scripted outcome: the issue applied is the effect's call 1 for the ledger's script
    assert effect_faults.specs(golden, TargetCase("c")) == [
        "fault:draft#1=timeout", "fault:draft#1=lost_response", "fault:notify#1=timeout",
        "fault:notify#1=lost_response", "fault:issue#1=timeout", "fault:issue#1=lost_response",
        "fault:notify#2=lost_response"]
    # an effect the case faults itself is left to the case
    own = TargetCase("c", faults=[{"kind": "tool", "tool": "issue", "call": 1, "outcome": "timeout"}])
    assert not any(s.startswith("fault:issue#") for s in effect_faults.specs(golden, own))


def test_interchangeable_threads_are_sampled_as_their_crash_points_are() -> None:
    golden = TargetOutcome("c", "sync", None, Path("."), calls=[
        _call(1, "draft", thread="a"), _call(2, "draft", thread="b"), _call(3, "draft", thread="vip")])
    roles = {"a": "queued", "b": "queued", "vip": "direct"}
    assert effect_faults.specs(golden, TargetCase("c"), roles) == [
        "fault:draft#1=timeout", "fault:draft#1=lost_response", "fault:draft#3=lost_response"]
    assert len(effect_faults.specs(golden, TargetCase("c"))) == 4  # no roles: every thread its own


def test_a_spec_fault_joins_the_case_s_own_faults() -> None:
    own = TargetCase("c", faults=[{"kind": "tool", "tool": "issue", "call": 1, "outcome": "timeout"}])
    derived = effect_faults.with_faults(own, [("notify", 2, "lost_response")])
    assert derived.name == "c" and [(f["tool"], f["call"], f["outcome"]) for f in derived.faults] == [
        ("issue", 1, "timeout"), ("notify", 2, "lost_response")]


def _stopped_run(error: str, status: str = "stuck", thread: str = "order-1") -> TargetOutcome:
    return TargetOutcome("c", "sync", "fault:notify_customer#1=timeout", Path("."),
                         threads={thread: {"status": status, "error": error}})


def test_a_thread_that_stopped_at_its_fault_is_not_judged_on_its_end() -> None:
    run = _stopped_run("EffectTimeout: notify_customer: timeout (no answer in time; nothing was applied)")
    assert fault_stops.stopped(run) == {"order-1": ("notify_customer", 1, "timeout")}
    findings = [Finding("target.expected_end", "thread order-1 did not end as expected"),
                Finding("differential.same_effects", "issue_refund applied 0 time(s) in order-1; the golden ..."),
                Finding("differential.same_effects", "issue_refund applied 0 time(s) in order-12; the golden ..."),
                Finding("side_effects.at_most_once", "issue_refund applied 2 times in order-1")]
    kept, notes = fault_stops.apply(findings, run, "give the node a RetryPolicy")
    assert [(f.rule, f.message.split(" in ")[-1][:8]) for f in kept] == [
        ("differential.same_effects", "order-12"), ("side_effects.at_most_once", "order-1")]
    assert len(notes) == 1 and notes[0].startswith("thread order-1 stopped at the injected timeout of "
                                                   "notify_customer (call 1)")
    assert "there, give the node a RetryPolicy, and call it again under the same idempotency key" in notes[0]


@pytest.mark.parametrize("status, error", [
    ("finished", ""),  # went on past the fault (code that swallows it): every rule applies
    ("stuck", "EffectTimeout: issue_refund: timeout (no answer in time; nothing was applied)"),  # another effect
    ("stuck", "KeyError: 'refund_id'"),  # stopped, but not at the fault's own error
])
def test_a_thread_that_did_not_stop_at_its_own_fault_keeps_every_finding(status: str, error: str) -> None:
    run = _stopped_run(error, status)
    findings = [Finding("target.expected_end", "thread order-1 did not end as expected")]
    assert fault_stops.apply(findings, run) == (findings, [])


def test_a_fault_run_is_counted_as_one_and_covers_no_crash_point() -> None:
    assert first_kill("fault:issue_refund#1=timeout") is None
    assert first_kill("before_put:t@4 with before_writes:t@issue held") == "before_put:t@4"
    assert first_kill("a >> 2 workers") == "a" and first_kill("p || worker") is None
    result = SweepResult(None, "langgraph", "1", "sampled", [
        RunResult("c", None, "passed"), RunResult("c", "fault:x#1=timeout", "passed"),
        RunResult("c", "a >> b", "passed"), RunResult("c", "a", "passed")], {}, 0.0)
    assert result.runs_by_kind() == {"golden": 1, "single": 1, "double": 1, "effect_fault": 1}


def test_a_crash_spec_gives_the_answers_of_real_apis_but_no_stale_read() -> None:
    for outcome in ("rate_limited", "empty_answer", "malformed_answer"):
        assert crashpoints.parse(f"fault:issue_refund#1={outcome}").faults == (("issue_refund", 1, outcome),)
    with pytest.raises(ValueError, match="OUTCOME one of .*malformed_answer.*got 'fault:issue_refund#1=stale_read'"):
        crashpoints.parse("fault:issue_refund#1=stale_read")
