"""The refund team's chaos tests (``pytest --chaos examples/prefect_refund``): real SIGKILLs of the processes that
run its Prefect flow runs, recovered the way a Prefect team does (the runner reports the run Crashed, a new process
retries it by id), against one Prefect server the sweep starts."""

from __future__ import annotations

from pathlib import Path

TARGET = Path(__file__).resolve().parents[1] / "target.yaml"


def test_the_refund_flow_survives_a_kill_at_every_crash_point(crashpoint_sweep) -> None:
    """Every case of target.yaml (approved; denied; the issue declined, so the transaction rolls back and the draft's
    rollback hook voids it): a kill at each crash point, 2 kills during a recovery, a second live worker."""
    result = crashpoint_sweep(TARGET)
    assert result.passed, result.summary
