"""The known findings per langgraph release (examples/langgraph_refund/known_findings.yaml, README's table),
checked on the release installed: each probe runs once and must give the pinned verdict or rules."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs
from release_pins import check, check_rows, pins

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

EXAMPLE, PINS, INSTALLED, ROW = pins("langgraph_refund", "langgraph")


@pytest.mark.slow
@pytest.mark.skipif(ROW is None, reason=f"langgraph {INSTALLED} has no row in known_findings.yaml")
@pytest.mark.parametrize("probe", sorted(PINS["probes"]))
def test_the_installed_release_gives_its_pinned_findings(tmp_path: Path, probe: str) -> None:
    if probe not in ROW:
        pytest.skip(f"langgraph {INSTALLED}: {probe} not measured")
    spec = PINS["probes"][probe]
    target = Target.from_file(EXAMPLE / spec.get("file", "target.yaml"))
    if spec.get("entry"):
        target = dataclasses.replace(target, entry=spec["entry"])
    case, mode, point = target.case(spec["case"]), spec["durability"], spec.get("crash_point")
    golden = None
    if point:
        golden = run_one(target, case, mode, tmp_path / "golden", None, None).outcome
    result = run_one(target, case, mode, tmp_path / "run", point, golden,
                     write_latency_ms=spec.get("write_latency_ms", 0.0))
    check(result, ROW[probe])


def test_every_pinned_row_names_known_probes_and_outcomes() -> None:
    check_rows(PINS, ("passed", "unsupported"), ("target.", "side_effects.", "differential."))
