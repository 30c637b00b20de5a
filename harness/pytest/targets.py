"""The ``crashpoint_sweep`` fixture: a team's own tests sweep their target under ``pytest --chaos``.

::

    def test_refund_agent_survives_every_crash(crashpoint_sweep):
        result = crashpoint_sweep("target.yaml", durability=["sync"])
        assert result.passed, result.summary

Without ``--chaos`` (or ``--crashpoint-chaos``) a test using the fixture is skipped: sweeps spawn
hundreds of processes and belong to the chaos run. Light to import (the sweep loads when called).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import pytest

#: The reason a ``crashpoint_sweep`` test is skipped without chaos (the plugin's terminal summary counts these).
SWEEP_SKIP = "crashpoint sweeps run under --chaos (or --crashpoint-chaos)"


class SweepReport:
    """A sweep's result with a ``summary`` made for an assertion message (each failing run, its rules and repro,
    then each rule's message and up to 4 lines of its evidence)."""

    def __init__(self, result: Any) -> None:
        self.result = result
        self.passed = result.passed
        from crashpoint.harness.engines.effects import unseen_summary

        from crashpoint.harness.judge.document import budget_data
        from crashpoint.reports.terminal import sampling

        left = {"points": getattr(result, "points", "all"), "classes": getattr(result, "classes", None) or {},
                "budget": budget_data(result) if getattr(result, "left_out", None) else {}}
        from crashpoint.harness.judge.fault_stops import summary as not_retried

        lines = [f"{len(result.results)} runs: {result.counts()}", *sampling(left), *unseen_summary(result.results),
                 *not_retried(result.results)]
        for r in result.results:
            if r.verdict != "passed":
                rules = ", ".join(sorted({f.rule for f in r.failures})) or r.error
                lines.append(f"{r.verdict} {r.case} [{r.durability}] at {r.crash_point or 'golden run'}: {rules}\n"
                             f"    {r.reproduce}")
                for f in r.failures:  # what each rule saw, so a failure in CI explains itself
                    lines.append(f"      {f.rule}: {f.message}")
                    lines.extend(f"        {e}" for e in f.evidence[:4])
        self.summary = "\n".join(lines)

    def findings(self) -> dict[str, int]:
        """Rule id -> runs it failed."""
        return self.result.findings()


@pytest.fixture()
def crashpoint_sweep(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., SweepReport]:
    """``crashpoint_sweep(target, **options) -> SweepReport``: ``target`` is a :class:`crashpoint.Target` or a
    target file (relative to the test file's folder); options as :func:`crashpoint.harness.run.target_sweep.sweep`,
    except that ``crash`` defaults to ``sampled``, ``crashpoint run``'s default, so a test makes the runs the CLI
    makes (``sweep``'s own default, ``every``, has no second kill during a recovery), and ``time_budget_s`` to
    ``--crashpoint-budget SECONDS`` (each sweep's own time budget; what it left out is in ``summary`` and in
    ``result.left_out``)."""
    from crashpoint.harness.pytest.plugin import chaos_enabled

    if not chaos_enabled(request.config):
        pytest.skip(SWEEP_SKIP)

    def run(target: Any, **options: Any) -> SweepReport:
        from crashpoint.harness.run.target_sweep import sweep
        from crashpoint.harness.load.target import Target

        from crashpoint.harness.load.target_check import check_target

        if not isinstance(target, Target):
            path = Path(target)
            target = Target.from_file(path if path.is_absolute() else Path(request.path).parent / path)
        check_target(target)  # before a sweep: what crashpoint validate refuses is never swept
        options.setdefault("workdir", tmp_path / "runs")
        options.setdefault("crash", "sampled")  # crashpoint run's default (harness/cli/main.py, --crash)
        options.setdefault("time_budget_s", request.config.getoption("crashpoint_budget", None))
        return SweepReport(sweep(target, **options))

    return run
