"""The known findings per temporalio release (examples/temporal_refund/known_findings.yaml), checked on the release
installed: each probe's golden run, with default options, must give the pinned verdict or rules. Other releases are
checked in their own venvs (``python3 -m venv /tmp/t-X && /tmp/t-X/bin/pip install temporalio==X pytest && pip
install --no-deps -e .``, then this file with that interpreter)."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs
from release_pins import check, check_rows, pins

pytestmark = needs("temporalio")

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

EXAMPLE, PINS, INSTALLED, ROW = pins("temporal_refund", "temporalio")


@pytest.mark.slow
@pytest.mark.skipif(ROW is None, reason=f"temporalio {INSTALLED} has no row in known_findings.yaml")
@pytest.mark.parametrize("probe", sorted(PINS["probes"]))
def test_the_installed_release_gives_its_pinned_findings(tmp_path: Path, probe: str) -> None:
    if probe not in ROW:
        pytest.skip(f"temporalio {INSTALLED}: {probe} not measured")
    spec = PINS["probes"][probe]
    target = Target.from_file(EXAMPLE / spec["file"])
    case = target.case(spec["case"]) if spec.get("case") else target.cases[0]
    result = run_one(target, case, target.durability[0], tmp_path / "run", None, None)
    want = ROW[probe]
    check(result, want)
    if isinstance(want, list) and "target.ends_within_budget" in want:  # Temporal's own words, quoted
        said = " ".join(f.message for f in result.failures if f.rule == "target.ends_within_budget")
        assert "Nondeterminism error" in said, said


def test_every_pinned_row_names_known_probes_and_outcomes() -> None:
    check_rows(PINS, ("passed",), ("target.",))
