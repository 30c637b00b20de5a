"""``target.approval_gate`` on a gated call crashpoint could not place (its thread ``None``: no engine position in
its thread, none inherited from the code that started the thread): the finding says so (issue 27 item 10). Before,
it read "pay applied in None while the approval of approve had no answer yet", blaming a missing answer."""

from __future__ import annotations

from pathlib import Path

from crashpoint.api import EffectCall
from crashpoint.harness.judge.target_rules import approval_gate
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome


def _call(thread: str | None, gseq: int) -> EffectCall:
    return EffectCall(1, "pay", "p-1", "d", {}, "applied", False, 11, thread, None if thread is None else "issue",
                      None, True, gseq=gseq)


def test_an_unplaced_gated_call_is_named_as_such(tmp_path: Path) -> None:
    target = Target.from_data({"target": "t", "engine": "langgraph", "entry": "m:b", "gates": {"pay": "approve"},
                               "inputs": [{"thread": "o1", "input": {}}]})
    granted = [{"approval_id": "o1@approve", "granted": True, "gseq": 1, "by": "crashpoint"}]
    placed = TargetOutcome("default", "sync", None, tmp_path, calls=[_call("o1", 2)], decisions=granted)
    assert approval_gate(target, placed, None) == []
    unplaced = TargetOutcome("default", "sync", None, tmp_path, calls=[_call(None, 2)], decisions=granted)
    found = approval_gate(target, unplaced, None)
    assert len(found) == 1 and "could not place it" in found[0].message, found
    assert "no answer yet" not in found[0].message
