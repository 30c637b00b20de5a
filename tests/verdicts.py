"""Assertion helpers over sweep results, shared by the test modules."""

from __future__ import annotations

from crashpoint.harness.run.sweep import RunResult


def describe(results: list[RunResult]) -> str:
    """Readable summary of runs for assertion messages: one line per run, one per failure under it."""
    lines = []
    for r in results:
        lines.append(f"{r.case_id} @ {r.crash_point or 'golden'}: {r.verdict} {r.error or ''}".rstrip())
        lines += [f"    [{f.oracle}] {f.message}" for f in r.failures]
    return "\n".join(lines)
