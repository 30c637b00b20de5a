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


def unverified_kills(results: list[RunResult]) -> list[str]:
    """Crash runs whose kills are not verified: each must have died by the harness's SIGKILL in the
    process the harness started, and been resumed by a new process (``[]`` when all are)."""
    bad = []
    for r in results:
        if r.crash_point is None or r.verdict == "error":
            continue
        log = r.outcome.kill_log if r.outcome else []
        if not log or r.outcome.kill_problems or any(k["signal"] != "SIGKILL" or k["resumed_by"] in (None, k["pid"])
                                                     for k in log):
            bad.append(f"{r.case_id} @ {r.crash_point}: {log} {r.outcome.kill_problems if r.outcome else ''}")
    return bad
