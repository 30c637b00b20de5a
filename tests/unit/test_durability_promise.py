"""target.durability_promise (issue 28 item 1), judged from the ledger, the saver's log and the kill's crash point, not
from "a kill happened": under LangGraph's ``sync``, a node whose step's checkpoint write had begun (every task of the
step returned and handed its writes over) must not apply its effects again after the kill.

The outcomes below are the shape of real runs of tests/data/realbugs/sync_refund_nokey.yaml on langgraph 1.2.24
(saver.log, steps.log and the ledger of the run killed at ``before_put:order-7@2`` with the node's writes held)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from crashpoint.api import EffectCall
from crashpoint.harness.engines import langgraph
from crashpoint.harness.model.outcomes import TargetOutcome

OLD, NEW = 100, 101


def _put(pid: int, step: int, at: str, source: str = "loop") -> dict:
    return {"pid": pid, "op": "put", "thread": "t", "step": step, "source": source, "at": at}


def _writes(pid: int, node: str, at: str, channels: tuple[str, ...] = ("refund",)) -> dict:
    return {"pid": pid, "op": "writes", "thread": "t", "node": node, "task": f"task-{node}", "channels": list(channels),
            "at": at}


def _call(seq: int, pid: int, outcome: str, node: str = "issue_refund", step: int = 2, key: str | None = None,
          effect: str = "refund") -> EffectCall:
    return EffectCall(seq, effect, key, "d1", {"order_id": "7"}, outcome, False, pid, "t", node, None, True, step=step)


def _run(point: str, saver_old: list[dict], calls: list[EffectCall], durability: str = "sync",
         steps_new: tuple = ((NEW, "t", 2, "issue_refund"),)) -> TargetOutcome:
    saver = [_put(OLD, -1, "call", "input"), _put(OLD, -1, "end", "input"), _put(OLD, 0, "call"), _put(OLD, 0, "end"),
             _put(OLD, 1, "call"), _put(OLD, 1, "end"), *saver_old,
             _writes(NEW, "issue_refund", "call"), _writes(NEW, "issue_refund", "end"), _put(NEW, 2, "call"),
             _put(NEW, 2, "end")]
    return TargetOutcome(
        case="default", durability=durability, crash_point=point, run_dir=Path("/nonexistent"),
        calls=calls, pids=[{"pid": OLD, "phase": "start"}, {"pid": NEW, "phase": "recover"}],
        kill_log=[{"worker": 1, "pid": OLD, "signal": 9, "crash_point": point}],
        steps=[(OLD, "t", 1, "lookup"), (OLD, "t", 2, "issue_refund"), *steps_new], engine_facts={"saver": saver})


def _rule(run: TargetOutcome) -> list:
    return langgraph.durability_promise(None, run, None)


#: The released LangGraph: the node returned, its writes went to the saver's background thread (never awaited), the
#: loop called put for step 2 and the kill came there, before the writes were durable.
RACED = [_writes(OLD, "issue_refund", "call"), _put(OLD, 2, "call")]


def test_an_unkeyed_node_applied_again_after_its_steps_checkpoint_write_began_fails() -> None:
    run = _run("before_put:t@2", RACED, [_call(1, OLD, "applied"), _call(2, NEW, "applied")])
    found = _rule(run)
    assert len(found) == 1 and found[0].rule == "target.durability_promise"
    message = found[0].message
    assert message.startswith("refund applied again in pid 101: node issue_refund (step 2 of t) had returned in pid 100,"
                              " killed at before_put:t@2")
    assert "still in the saver's background thread" in message
    assert '"Changes are persisted synchronously before the next step starts."' in message
    assert message.endswith("refund has no idempotency key; give it one derived from the thread's state")
    assert found[0].evidence == ["ledger#1 refund key=None applied pid=100 t@issue_refund step 2",
                                 "ledger#2 refund key=None applied pid=101 t@issue_refund step 2"]
    assert langgraph.kept_by_keys_notes(run) == []


def test_a_key_made_anew_per_call_is_named_as_the_teams_part() -> None:
    """A new user read the rule as blaming LangGraph for a uuid4 key of theirs: the message says what the key did."""
    run = _run("before_put:t@2", RACED, [_call(1, OLD, "applied", key="refund-a1"),
                                          _call(2, NEW, "applied", key="refund-b2")])
    message = _rule(run)[0].message
    assert message.endswith("refund's key changed between the calls (refund-a1, refund-b2): a key made anew per call "
                            "cannot stop the repeat; derive it from the thread's state")


def test_a_kill_at_a_later_crash_point_of_the_same_write_counts_too() -> None:
    """The saver's log, not the crash point's name, says the write had begun: a kill at the writes of the next node
    (``before_writes``), with put 2 called and its end not logged, is judged the same."""
    saver = [*RACED, _writes(OLD, "email_receipt", "call", ("receipt",))]
    run = _run("before_writes:t@email_receipt", saver, [_call(1, OLD, "applied"), _call(2, NEW, "applied")])
    assert [f.rule for f in _rule(run)] == ["target.durability_promise"]


def test_a_keyed_repeat_answered_duplicate_is_a_note_not_a_failure() -> None:
    run = _run("before_put:t@2", RACED, [_call(1, OLD, "applied", key="refund-7"),
                                          _call(2, NEW, "duplicate", key="refund-7")])
    assert _rule(run) == []
    notes = langgraph.kept_by_keys_notes(run)
    assert len(notes) == 1 and notes[0].startswith("durability=sync not kept by LangGraph: node issue_refund (step 2 "
                                                   "of t) had returned in pid 100 before the kill at before_put:t@2")
    assert "answered duplicate by their keys, so nothing was applied twice" in notes[0]


def test_a_kill_before_the_steps_checkpoint_write_began_is_at_least_once_not_the_promise() -> None:
    """A kill inside the node (after its effect, before it returned): no put of step 2 was called, so the re-run is
    the at-least-once every mode has (side_effects.at_most_once's business), not a broken promise."""
    run = _run("after_effect:refund", [], [_call(1, OLD, "applied"), _call(2, NEW, "applied")])
    assert _rule(run) == [] and langgraph.kept_by_keys_notes(run) == []
    # nor a node that handed over an interrupt (it runs again on resume by design)
    run = _run("before_put:t@2", [_writes(OLD, "issue_refund", "call", ("__interrupt__",)), _put(OLD, 2, "call")],
               [_call(1, OLD, "applied"), _call(2, NEW, "applied")])
    assert _rule(run) == []


def test_other_modes_promise_nothing_there() -> None:
    for mode in ("async", "exit"):
        run = _run("before_put:t@2", RACED, [_call(1, OLD, "applied"), _call(2, NEW, "applied")], durability=mode)
        assert _rule(run) == [], mode


def test_the_fixed_build_never_reruns_so_nothing_is_found() -> None:
    """The fixed build: the writes are durable before put 2 is called; the recovery starts at step 3."""
    saver = [_writes(OLD, "issue_refund", "call"), _writes(OLD, "issue_refund", "end"), _put(OLD, 2, "call")]
    run = _run("before_put:t@2", saver, [_call(1, OLD, "applied"), _call(2, NEW, "applied", "email_receipt", 3,
                                                                          effect="send_email")],
               steps_new=((NEW, "t", 3, "email_receipt"),))
    assert _rule(run) == [] and langgraph.kept_by_keys_notes(run) == []


def test_the_sweep_adds_a_forced_race_per_returned_node_with_an_effect_under_sync_only() -> None:
    golden = TargetOutcome(
        case="default", durability="sync", crash_point=None, run_dir=Path("/nonexistent"),
        calls=[_call(1, OLD, "applied"), _call(2, OLD, "applied", "email_receipt", 3, effect="send_email")],
        steps=[(OLD, "t", 1, "lookup"), (OLD, "t", 2, "issue_refund"), (OLD, "t", 3, "email_receipt")],
        crash_points=["node:t@lookup", "before_writes:t@lookup", "node:t@issue_refund", "before_effect:refund",
                      "after_effect:refund", "before_writes:t@issue_refund", "before_put:t@2",
                      "node:t@email_receipt", "before_effect:send_email", "after_effect:send_email",
                      "before_put:t@3", "before_writes:t@email_receipt"],
        engine_facts={"saver": []})
    assert langgraph.race_specs(golden, "sync") == ["before_put:t@2 with before_writes:t@issue_refund held",
                                                    "before_put:t@3 with before_writes:t@email_receipt held"]
    assert langgraph.race_specs(golden, "exit") == []


def test_under_async_the_sweep_holds_each_write_until_the_next_effect() -> None:
    """Issue 28 item 3: a kill inside a background checkpoint write, made certain (the write held, not slowed by a
    flag): the thread's first write until its first effect, a later step's write until the next step's effect."""
    points = ["before_put:t@-1", "node:t@lookup", "before_effect:fetch", "after_effect:fetch", "before_put:t@0",
              "node:t@issue_refund", "before_effect:refund", "after_effect:refund", "before_put:t@1",
              "before_put:t@2", "node:t@email_receipt", "after_effect:send_email", "before_put:t@3"]
    golden = TargetOutcome(case="default", durability="async", crash_point=None, run_dir=Path("/nonexistent"),
                           crash_points=points, engine_facts={"saver": []})
    assert langgraph.race_specs(golden, "async") == [
        "after_effect:fetch with before_put:t@-1 held",
        # a held put N is killed at an effect between puts N+1 and N+2: none for put 0 (put 2 follows put 1 at once,
        # refund's own step does not count), send_email for put 1, none after put 3 for put 2
        "after_effect:send_email with before_put:t@1 held"]
    many = [f"before_put:t@{n}" if k == 0 else f"after_effect:e{n}" for n in range(20) for k in range(2)]
    golden = dataclasses.replace(golden, crash_points=["before_put:t@-1", "after_effect:first"] + many)
    specs = langgraph.race_specs(golden, "async")
    assert len(specs) == langgraph.MAX_RACES and specs[0] == "after_effect:first with before_put:t@-1 held"


def _lost_start(calls: list[EffectCall]) -> TargetOutcome:
    return TargetOutcome(
        case="default", durability="async", crash_point="after_effect:open_ticket", run_dir=Path("/nonexistent"),
        calls=calls, pids=[{"pid": OLD, "phase": "start", "rc": -9}, {"pid": NEW, "phase": "start", "rc": 0}],
        deliveries=[{"kind": "kill", "worker": 1, "pid": OLD, "crash_point": "after_effect:open_ticket"},
                    {"kind": "resubmit", "thread": "t"}])


def test_a_thread_left_with_no_checkpoint_after_its_effects_is_a_finding_of_its_own() -> None:
    from crashpoint.harness.judge.target_rules import thread_has_checkpoint

    ticket = EffectCall(1, "open_ticket", "ticket-c42", "d", {}, "applied", False, OLD, "t", "intake", None, False,
                        step=1)
    again = EffectCall(2, "open_ticket", "ticket-c42", "d", {}, "duplicate", False, NEW, "t", "intake", None, False,
                       step=1)
    found = thread_has_checkpoint(None, _lost_start([ticket, again]), None)
    assert [f.rule for f in found] == ["target.thread_has_checkpoint"]
    assert found[0].message.startswith("thread t had no checkpoint at all after the kill at after_effect:open_ticket, "
                                       "though 1 of its effect call(s) were applied (open_ticket)")
    # no effect applied before the kill (the kill came first): the resubmission repeats nothing
    assert thread_has_checkpoint(None, _lost_start([dataclasses.replace(ticket, pid=NEW)]), None) == []
    # no resubmission (the thread had its checkpoint): nothing
    run = _lost_start([ticket, again])
    run.deliveries = run.deliveries[:1]
    assert thread_has_checkpoint(None, run, None) == []
