"""The pytest fixture's assertion message names what each failing rule saw (a CI failure explains itself)."""

from __future__ import annotations

from types import SimpleNamespace

from crashpoint.harness.model.rules import Finding
from crashpoint.harness.pytest.targets import SweepReport


def _result(failures: list[Finding]) -> SimpleNamespace:
    run = SimpleNamespace(verdict="failed", case="approved", durability="sync", crash_point="after_effect:issue",
                          failures=failures, error=None, reproduce="crashpoint run t.yaml --case approved")
    return SimpleNamespace(results=[run], passed=False, target="t.yaml",
                           counts=lambda: {"passed": 0, "failed": 1})


def test_the_summary_gives_each_rule_message_and_evidence() -> None:
    found = Finding("target.repeats_explained", "issue called 2 times for one step; no kill explains any repeat",
                    [f"call {i}" for i in range(6)])
    summary = SweepReport(_result([found])).summary
    assert "failed approved [sync] at after_effect:issue: target.repeats_explained" in summary
    assert "crashpoint run t.yaml --case approved" in summary
    assert "target.repeats_explained: issue called 2 times for one step; no kill explains any repeat" in summary
    assert "call 3" in summary and "call 4" not in summary  # at most 4 evidence lines
