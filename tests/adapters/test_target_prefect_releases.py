"""The known findings per prefect release (examples/prefect_refund/known_findings.yaml), checked on the release
installed: each probe's golden run, then its crash point if it names one, must give the pinned verdict or rules.
Other releases are checked in their own venvs (``python3 -m venv /tmp/p-X && /tmp/p-X/bin/pip install prefect==X
pytest freezegun xmlschema && /tmp/p-X/bin/pip install --no-deps -e .``, then this file with that interpreter)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs
from release_pins import check, check_rows, pins

pytestmark = needs("prefect")

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

EXAMPLE, PINS, INSTALLED, ROW = pins("prefect_refund", "prefect")


@pytest.mark.slow
@pytest.mark.skipif(ROW is None, reason=f"prefect {INSTALLED} has no row in known_findings.yaml")
@pytest.mark.parametrize("probe", sorted(PINS["probes"]))
def test_the_installed_release_gives_its_pinned_findings(tmp_path: Path, probe: str) -> None:
    if probe not in ROW:
        pytest.skip(f"prefect {INSTALLED}: {probe} not measured")
    spec = PINS["probes"][probe]
    target = Target.from_file(EXAMPLE / "target.yaml")
    if spec.get("entry"):
        target = dataclasses.replace(target, entry=spec["entry"])
    case = target.case(spec["case"])
    golden = run_one(target, case, "sync", tmp_path / "golden", None, None)
    result = golden
    if spec.get("crash_point"):
        assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
        result = run_one(target, case, "sync", tmp_path / "run", spec["crash_point"], golden.outcome)
    check(result, ROW[probe])


def test_every_pinned_row_names_known_probes_and_outcomes() -> None:
    check_rows(PINS, ("passed",), ("target.",))
