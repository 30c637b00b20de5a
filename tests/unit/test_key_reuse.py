"""Keys as payment APIs treat them (issue 28 item 5): the run's ledger refuses a key used again with other arguments
(outcome ``conflict``, the call raises, nothing applied), unless the effect declares a provider that replays the first
answer (``key_reuse="replay"``); ``target.key_reused`` fails a run with a conflict. A node run that applies one request
twice under fresh keys with no kill fails ``target.fresh_key_repeat``, the golden run included."""

from __future__ import annotations

from pathlib import Path

import pytest

import crashpoint
import crashpoint.api as api
from crashpoint.api import EffectCall, EffectFault
from crashpoint.harness.engines.effects import EffectSession, read_calls
from crashpoint.harness.judge.target_rules import fresh_key_repeat, key_reused
from crashpoint.harness.model.outcomes import TargetOutcome


class Client:  # an argument whose repr carries a memory address (differs in every process)
    pass


@crashpoint.effect("refund", key="key")
def refund(order: str, cents: int, key: str, client: object = None) -> dict:
    return {"refunded": order, "cents": cents}


@crashpoint.effect("refund_replaying", key="key", key_reuse="replay")
def refund_replaying(order: str, cents: int, key: str) -> dict:
    return {"refunded": order, "cents": cents}


@pytest.fixture()
def ledger(tmp_path: Path):
    where = {"thread": "o1", "node": "issue", "step": 1}
    session = EffectSession(tmp_path / "ledger.db", lambda point: None, lambda: dict(where), lambda thread: True)
    api._install(session)
    yield session.ledger
    api._install(None)


def _run(calls: list[EffectCall], pids: list[dict] | None = None) -> TargetOutcome:
    return TargetOutcome(case="default", durability="sync", crash_point=None, run_dir=Path("/nonexistent"),
                         calls=calls, pids=pids or [{"pid": 1, "phase": "start", "rc": 0}])


def test_a_key_used_again_with_other_arguments_is_refused_and_found(ledger) -> None:
    one, two = Client(), Client()  # both alive: two addresses
    assert refund("11", 2500, "refund-cus3", one) == {"refunded": "11", "cents": 2500}
    assert refund("11", 2500, "refund-cus3", two) == {"refunded": "11", "cents": 2500}  # same request: duplicate
    with pytest.raises(EffectFault, match="idempotency key 'refund-cus3' was already used with other arguments") as e:
        refund("12", 1000, "refund-cus3", one)
    assert e.value.retryable is False
    calls = read_calls(ledger)
    assert [c.outcome for c in calls] == ["applied", "duplicate", "conflict"]
    found = key_reused(None, _run(calls), None)
    assert [f.rule for f in found] == ["target.key_reused"]
    assert found[0].message.startswith("refund: key refund-cus3 was used by o1@issue and again with other arguments")
    assert '"order": "12"' in found[0].evidence[1]
    assert key_reused(None, _run(calls[:2]), None) == []


def test_a_provider_declared_to_replay_answers_the_first_answer_and_is_no_finding(ledger) -> None:
    refund_replaying("11", 2500, "refund-cus3")
    assert refund_replaying("12", 1000, "refund-cus3") == {"refunded": "11", "cents": 2500}
    calls = read_calls(ledger)
    assert [c.outcome for c in calls] == ["applied", "duplicate"] and key_reused(None, _run(calls), None) == []
    with pytest.raises(ValueError, match="key_reuse must be one of conflict, replay"):
        crashpoint.effect("x", key="k", key_reuse="ignore")


def _call(seq: int, key: str, pid: int = 1, outcome: str = "applied", order: str = "9", step: int = 1) -> EffectCall:
    return EffectCall(seq, "refund", key, f"d{seq}", {"order": order, "idempotency_key": key}, outcome, False, pid,
                      "o9", "issue", None, True, step=step)


def test_the_same_request_applied_again_under_a_fresh_key_with_no_kill_fails() -> None:
    found = fresh_key_repeat(None, _run([_call(1, "uuid-a"), _call(2, "uuid-b")]), None)
    assert [f.rule for f in found] == ["target.fresh_key_repeat"]
    assert found[0].message.startswith("refund applied 2 times with the same arguments in node issue of o9 (step 1), "
                                       "each time under a new idempotency key (uuid-a, uuid-b)")


def test_a_kill_a_repeat_of_the_key_another_request_or_a_call_that_applied_nothing_is_not_it() -> None:
    killed = [{"pid": 1, "phase": "start", "rc": -9}, {"pid": 2, "phase": "recover", "rc": 0}]
    assert fresh_key_repeat(None, _run([_call(1, "uuid-a"), _call(2, "uuid-b", pid=2)], killed), None) == []
    assert fresh_key_repeat(None, _run([_call(1, "k"), _call(2, "k", outcome="duplicate")]), None) == []
    assert fresh_key_repeat(None, _run([_call(1, "a", order="9"), _call(2, "b", order="10")]), None) == []
    assert fresh_key_repeat(None, _run([_call(1, "a", outcome="failed"), _call(2, "b")]), None) == []
    assert fresh_key_repeat(None, _run([_call(1, "a", step=1), _call(2, "b", step=3)]), None) == []
