"""The known findings per temporalio release (examples/temporal_refund/known_findings.yaml), checked on the release
installed: each probe's golden run, with default options, must give the pinned verdict or rules. Other releases are
checked in their own venvs (``python3 -m venv /tmp/t-X && /tmp/t-X/bin/pip install temporalio==X pytest && pip
install --no-deps -e .``, then this file with that interpreter)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples/temporal_refund"
PINS = yaml.safe_load((EXAMPLE / "known_findings.yaml").read_text())
INSTALLED = version("temporalio")
ROW = PINS["releases"].get(INSTALLED)


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
    if isinstance(want, str):
        assert result.verdict == want, (result.verdict, result.error, [f.message for f in result.failures])
    else:
        assert result.verdict == "failed", (result.verdict, result.error)
        assert set(want) <= {f.rule for f in result.failures}, [f.message for f in result.failures]
        if "target.ends_within_budget" in want:  # Temporal's own words, quoted
            said = " ".join(f.message for f in result.failures if f.rule == "target.ends_within_budget")
            assert "Nondeterminism error" in said, said


def test_every_pinned_row_names_known_probes_and_outcomes() -> None:
    for release, row in PINS["releases"].items():
        assert set(row) <= set(PINS["probes"]), release
        for want in row.values():
            assert want == "passed" or (isinstance(want, list) and all(r.startswith("target.") for r in want))
