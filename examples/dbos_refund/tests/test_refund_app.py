"""The refund team's chaos tests (``pytest --chaos examples/dbos_refund``): real SIGKILLs of the workers that run
its DBOS workflows, recovered by ``DBOS.launch()`` in new processes."""

from __future__ import annotations

from pathlib import Path

import pytest

TARGET = Path(__file__).resolve().parents[1] / "target.yaml"


@pytest.mark.slow
def test_the_refund_app_survives_a_kill_at_every_crash_point(crashpoint_sweep) -> None:
    """Every case of target.yaml (approved, denied and compensated, never answered): a kill at each crash point."""
    result = crashpoint_sweep(TARGET, workers=2)
    assert result.passed, result.summary
