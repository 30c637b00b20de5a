"""What a sweep says of effect faults the team's code did not retry (a new user read a green sweep's 'every one of the
1 tool calls failed: no effect was exercised' as a problem, and was told nowhere that the code lacks retries)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

from crashpoint.api import EffectCall
from crashpoint.harness.judge import fault_stops
from crashpoint.harness.judge.coverage import vacuity
from crashpoint.harness.model.outcomes import TargetOutcome

NOTE = ("thread order-1 stopped at the injected timeout of issue_refund (call 1): the code does not retry that call, "
        "so the end-state rules (...) were not applied to it; the others were. To survive a transient failure there, "
        "give the node a RetryPolicy, and call it again under the same idempotency key")


def _call(effect: str, outcome: str) -> EffectCall:
    return EffectCall(seq=1, effect=effect, key="k", digest="d", args={}, outcome=outcome, lost=False, pid=1,
                      thread="order-1", node="n", task=None, durable=True)


def test_the_summary_counts_each_unretried_fault_and_says_how_to_survive_it() -> None:
    runs = [SimpleNamespace(notes=[NOTE]), SimpleNamespace(notes=[NOTE.replace("timeout", "lost_response")]),
            SimpleNamespace(notes=[NOTE]), SimpleNamespace(notes=["race forced: ..."])]
    lines = fault_stops.summary(runs)
    assert lines[0].startswith("not retried: 3 effect-fault run(s)")
    assert "  issue_refund lost_response: 1 run(s)" in lines and "  issue_refund timeout: 2 run(s)" in lines
    assert lines[-1] == ("  to survive a transient failure: give the node a RetryPolicy, and call it again under the "
                         "same idempotency key")
    assert fault_stops.summary([SimpleNamespace(notes=["race forced: ..."])]) == []


def test_every_call_failing_is_vacuous_unless_the_runs_own_fault_failed_it() -> None:
    def run(spec: str | None, calls: list[EffectCall]) -> TargetOutcome:
        return TargetOutcome(case="c", durability="sync", crash_point=spec, run_dir=Path("/nonexistent"), calls=calls)

    message = "every one of the 1 tool calls failed: no effect was exercised"
    assert message in vacuity(run("after_effect:draft", [_call("issue_refund", "failed")]), golden=False)[0]
    assert message in vacuity(run("fault:draft#1=timeout", [_call("issue_refund", "failed")]), golden=False)[0]
    assert message not in vacuity(run("fault:issue_refund#1=timeout", [_call("issue_refund", "failed")]),
                                  golden=False)[0]


def test_a_command_that_clears_its_own_environment_is_recognised() -> None:
    """``subprocess.run("env -i python pay.py", shell=True)`` inherits the marker and drops it itself (the attack's
    e'): such a command is watched like one given ``env={}``."""
    from crashpoint.harness.engines.effects import CLEARS_ENV

    for command in ("env -i python pay.py", "/usr/bin/env -i python pay.py", "cd /x && env - python p.py",
                    "env --ignore-environment python p.py", "env -u CRASHPOINT_RUN_DIR python p.py",
                    "env -iv python p.py"):
        assert CLEARS_ENV.search(command), command
    for command in ("python pay.py", "env FOO=1 python p.py", "printenv", "myenv -i x", "env -u HOME python p.py"):
        assert not CLEARS_ENV.search(command), command
