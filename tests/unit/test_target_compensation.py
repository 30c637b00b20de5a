"""Compensation on a team's own code (issue 28 item 10, :mod:`crashpoint.harness.judge.target_compensation`): the
target file says what undoes what, and a thread that ended without going on has undone each such effect once."""

from __future__ import annotations

from pathlib import Path

import pytest
from crashpoint.api import EffectCall
from crashpoint.errors import CaseError
from crashpoint.harness.judge.target_compensation import compensated, compensation_at_most_once
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome

SPEC = {"draft_refund": {"undo": "void_draft", "unless": ["issue_refund"]}}


def _target(compensations: dict) -> Target:
    return Target.from_data({"target": "t", "engine": "langgraph", "entry": "m:g",
                             "inputs": [{"thread": "a", "input": 1}], "compensations": compensations})


def _run(tmp_path: Path, status: str, *effects: tuple[str, str]) -> TargetOutcome:
    calls = [EffectCall(n, effect, f"{effect}-{n}", "d", {}, outcome, False, 11, "a", "n", None, True)
             for n, (effect, outcome) in enumerate(effects, 1)]
    return TargetOutcome("c", "sync", None, tmp_path, threads={"a": {"status": status, "values": {}}}, calls=calls)


def _rules(target: Target, run: TargetOutcome) -> list[str]:
    return [f.rule for f in compensated(target, run, None) + compensation_at_most_once(target, run, None)]


@pytest.mark.parametrize("status, effects, found", [
    ("finished", [("draft_refund", "applied"), ("void_draft", "applied")], []),  # denied, voided
    ("finished", [("draft_refund", "applied"), ("issue_refund", "applied")], []),  # approved: went on
    ("finished", [("draft_refund", "applied")], ["target.compensated"]),  # denied, the void forgotten
    ("stuck", [("draft_refund", "applied")], ["target.compensated"]),  # the workflow failed after the draft
    ("waiting", [("draft_refund", "applied")], []),  # not ended yet: nothing is due
    ("finished", [("draft_refund", "failed")], []),  # nothing applied, nothing to undo
    ("finished", [("draft_refund", "applied"), ("void_draft", "duplicate")], ["target.compensated"]),  # not applied
    ("finished", [("draft_refund", "failed"), ("void_draft", "applied")], []),  # a void to be safe: once is fine
    ("finished", [("draft_refund", "applied"), ("void_draft", "applied"), ("void_draft", "applied")],
     ["target.compensation_at_most_once"]),  # voided twice (a fresh key per call, re-run after a kill)
])
def test_what_a_thread_owes_when_it_ends(tmp_path: Path, status: str, effects: list, found: list[str]) -> None:
    assert _rules(_target(SPEC), _run(tmp_path, status, *effects)) == found


def test_the_short_form_asks_the_undo_of_a_failed_thread_only(tmp_path: Path) -> None:
    target = _target({"draft_refund": "void_draft"})
    assert target.compensations == {"draft_refund": {"undo": "void_draft", "unless": []}}
    assert _rules(target, _run(tmp_path, "finished", ("draft_refund", "applied"))) == []
    assert _rules(target, _run(tmp_path, "stuck", ("draft_refund", "applied"))) == ["target.compensated"]
    assert Target.from_data(target.to_data()).compensations == target.compensations


def test_a_bad_entry_names_its_field() -> None:
    with pytest.raises(CaseError, match="compensations.draft_refund"):
        _target({"draft_refund": {"unless": ["issue_refund"]}})
