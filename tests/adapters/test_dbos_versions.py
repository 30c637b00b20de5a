"""Known findings per released dbos version (README, "Test your own DBOS app"): each pinned finding's repro
run on the installed dbos gives that finding; a version with none passes the runs that found them elsewhere.
Other versions are checked in their own venvs (``python -m venv /tmp/dbos-X && pip install dbos==X``)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.targets.sweep import run_one  # noqa: E402
from crashpoint.harness.targets.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/dbos_refund/target.yaml"
#: dbos version -> (case, crash point, rules found): the sweep's findings on that release.
KNOWN: dict[str, list[tuple[str, str, set[str]]]] = {
    # a race: found in 3 of 4 runs at this session's speed (target.single_live_process and target.repeats_explained
    # too when both processes reach draft_refund's effect, about half of those), so it is looked for in up to TRIES
    "2.20.0": [("two-workers-recover", "after_effect:draft_refund", {"target.one_live_execution"})],
    "2.31.1": [], "3.0.0": [], "3.2.0": [], "3.4.0": [],
}
#: Runs of a pinned finding's repro until it shows (a race between recovering workers hits a fraction of tries).
TRIES = 5
#: The runs that found something on some release: each must pass on a release pinned with no finding.
PROBES = sorted({(case, point) for found in KNOWN.values() for case, point, _ in found})


@pytest.mark.slow
def test_the_installed_dbos_gives_its_pinned_findings(tmp_path: Path) -> None:
    installed = version("dbos")
    if installed not in KNOWN:
        pytest.skip(f"dbos {installed} has no pinned findings (swept: {', '.join(KNOWN)})")
    target = Target.from_file(TARGET)
    expected = {(case, point): rules for case, point, rules in KNOWN[installed]}
    for n, (case, point) in enumerate(sorted(set(PROBES) | set(expected))):
        for attempt in range(TRIES if (case, point) in expected else 1):
            r = run_one(target, target.case(case), "sync", tmp_path / f"{n}-{attempt}", point, None)
            assert r.error is None, r.error
            found = {f.rule for f in r.failures} - {"target.final_state_like_golden", "target.effects_like_golden"}
            if found >= expected.get((case, point), set()):
                break
        assert found >= expected.get((case, point), set()), (installed, case, point, found, f"{TRIES} tries")
        if (case, point) not in expected:
            assert r.verdict == "passed", (installed, case, point, [f.message for f in r.failures])
