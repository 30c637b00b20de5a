"""``target.approval_gate`` follows child workflows (issue 27: no false alarm on correct code): an effect applied in a
child workflow (a DBOS ``DBOS.start_workflow`` from a workflow, a Temporal ``execute_child_workflow``) is gated by
the approval of its thread or of any of its ancestors, answered before the call and before the child was started.
Before, the gate matched only ``THREAD@NODE``, so a correct parent that starts its refund child after the manager's
grant failed every run ("refund_card applied in cancel-77-refund while the approval of manager_decision had no
answer yet"). A child started before the approval, a denied or missing answer, and a late answer still fail."""

from __future__ import annotations

from pathlib import Path

from crashpoint.api import EffectCall
from crashpoint.harness.judge.target_rules import approval_gate
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import LATE_BY, TargetOutcome

TARGET = {"target": "t", "engine": "dbos", "entry": "m:wf", "gates": {"refund": "manager"},
          "inputs": [{"thread": "o1", "input": {}}]}


def _call(thread: str, gseq: int) -> EffectCall:
    return EffectCall(1, "refund", "r-1", "d", {}, "applied", False, 11, thread, "refund", None, True, gseq=gseq)


def _answer(thread: str, gseq: int, granted: bool = True, by: str = "crashpoint") -> dict:
    return {"approval_id": f"{thread}@manager", "granted": granted, "gseq": gseq, "by": by}


def _run(tmp_path: Path, call: EffectCall, decisions: list[dict], parents: dict[str, tuple[str, int]]) -> list:
    target = Target.from_data(TARGET)
    run = TargetOutcome("default", "sync", None, tmp_path, calls=[call], decisions=decisions,
                        parents={t: {"parent": p, "after_gseq": g, "pid": 1} for t, (p, g) in parents.items()})
    return approval_gate(target, run, None)


def test_a_child_started_after_its_parents_grant_is_gated_by_it(tmp_path: Path) -> None:
    # the manager granted at 2; the parent then started o1-refund (ledger at 2), which refunded at 3
    assert _run(tmp_path, _call("o1-refund", 3), [_answer("o1", 2)], {"o1-refund": ("o1", 2)}) == []


def test_a_grandchild_is_gated_by_the_root_approval(tmp_path: Path) -> None:
    parents = {"o1-pay": ("o1", 2), "o1-pay-card": ("o1-pay", 2)}
    assert _run(tmp_path, _call("o1-pay-card", 3), [_answer("o1", 2)], parents) == []


def test_a_child_started_before_the_approval_fails_even_when_it_applies_after_the_grant(tmp_path: Path) -> None:
    # o1-refund was started at 1, before the grant (2): the grant did not cause it, although the refund came at 3
    found = _run(tmp_path, _call("o1-refund", 3), [_answer("o1", 2)], {"o1-refund": ("o1", 1)})
    assert len(found) == 1, found
    assert "o1-refund" in found[0].message and "child workflow of o1" in found[0].message, found[0].message
    assert "started before" in found[0].message, found[0].message


def test_a_child_whose_effect_comes_before_the_answer_fails(tmp_path: Path) -> None:
    found = _run(tmp_path, _call("o1-refund", 2), [_answer("o1", 3)], {"o1-refund": ("o1", 1)})
    assert len(found) == 1 and "no answer yet" in found[0].message, found


def test_a_denied_parent_approval_fails_the_child(tmp_path: Path) -> None:
    found = _run(tmp_path, _call("o1-refund", 3), [_answer("o1", 2, granted=False)], {"o1-refund": ("o1", 2)})
    assert len(found) == 1 and "denied" in found[0].message, found


def test_a_late_parent_answer_grants_the_child_nothing(tmp_path: Path) -> None:
    found = _run(tmp_path, _call("o1-refund", 3), [_answer("o1", 2, by=LATE_BY)], {"o1-refund": ("o1", 2)})
    assert len(found) == 1 and "grants nothing" in found[0].message, found


def test_an_unrelated_threads_grant_gates_nothing(tmp_path: Path) -> None:
    # o2's manager granted; o1-refund is o1's child, and o1 has no answer
    found = _run(tmp_path, _call("o1-refund", 3), [_answer("o2", 2)], {"o1-refund": ("o1", 2)})
    assert len(found) == 1 and "no answer yet" in found[0].message, found
    found = _run(tmp_path, _call("o1-refund", 3), [_answer("o1", 2)], {})  # no parent recorded: its own thread only
    assert len(found) == 1 and "no answer yet" in found[0].message, found


def test_the_childs_own_answer_decides_before_its_parents(tmp_path: Path) -> None:
    decisions = [_answer("o1", 2), _answer("o1-refund", 3, granted=False)]
    found = _run(tmp_path, _call("o1-refund", 4), decisions, {"o1-refund": ("o1", 2)})
    assert len(found) == 1 and "denied" in found[0].message, found


def test_a_cycle_of_parents_ends(tmp_path: Path) -> None:
    found = _run(tmp_path, _call("a", 3), [], {"a": ("b", 2), "b": ("a", 2)})
    assert len(found) == 1 and "no answer yet" in found[0].message, found
