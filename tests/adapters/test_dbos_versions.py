"""Known findings per released dbos version (README, "Test your own DBOS app"): each pinned finding's repro
run on the installed dbos gives that finding; a version with none passes the runs that found them elsewhere.
Races (:data:`RACES`) are pinned by repetition: enough tries that missing a race in all of them is below
:data:`MISS_AT_MOST`. Other versions are checked in their own venvs (``python -m venv /tmp/dbos-X && pip install
dbos==X``)."""

from __future__ import annotations

import math
from importlib.metadata import version
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/dbos_refund/target.yaml"
FINDINGS = TARGET.with_name("findings.yaml")
#: dbos version -> (case, crash point, rules found): findings every run of their repro shows on that release (the
#: races are in :data:`RACES`).
KNOWN: dict[str, list[tuple[str, str, set[str]]]] = {"2.20.0": [], "2.31.1": [], "3.0.0": [], "3.2.0": [], "3.4.0": []}


def _probes() -> list[tuple[str, str]]:
    """The runs of ``target.yaml`` that found something on some release (pinned findings and races): each must pass
    on a release that pins neither there."""
    return sorted({(case, point) for found in KNOWN.values() for case, point, _ in found}
                  | {(case, point) for races in RACES.values() for file, case, point, *_ in races if file == TARGET})


@pytest.mark.slow
def test_the_installed_dbos_gives_its_pinned_findings(tmp_path: Path) -> None:
    installed = version("dbos")
    if installed not in KNOWN:
        pytest.skip(f"dbos {installed} has no pinned findings (swept: {', '.join(KNOWN)})")
    target = Target.from_file(TARGET)
    expected = {(case, point): rules for case, point, rules in KNOWN[installed]}
    racy = {(case, point) for file, case, point, *_ in RACES.get(installed, ()) if file == TARGET}
    for n, (case, point) in enumerate(sorted((set(_probes()) - racy) | set(expected))):
        r = run_one(target, target.case(case), "sync", tmp_path / f"{n}", point, None)
        assert r.error is None, r.error
        found = {f.rule for f in r.failures} - {"differential.same_end", "differential.same_effects"}
        assert found >= expected.get((case, point), set()), (installed, case, point, found)
        if (case, point) not in expected:
            assert r.verdict == "passed", (installed, case, point, [f.message for f in r.failures])


#: dbos version -> races the sweep found there: ``(target file, case, crash point, rule, (caught, tries))``, the
#: last the measured rate (README's table). Versions absent: not measured.
#: ``findings.yaml``'s restart-and-operator, measured 2026-12-01 (``--repeat`` of the repro in that version's venv):
#: 3.0.0 showed it 1 in 10 (a test would need 511 tries: not pinned), 2.31.1 0 in 10. 2.20.0's two recovering
#: executors: 3 of 4 runs at after_effect:draft_refund in the last session, 0 of 1 in this session's sweep (which
#: found it at 40 other points of the case's 62, one run each).
RACE = (FINDINGS, "restart-and-operator", "after_effect:draft_refund", "target.one_live_execution")
RACES: dict[str, list[tuple[Path, str, str, str, tuple[int, int]]]] = {
    "3.4.0": [(*RACE, (4, 20))],  # 3 of 5 in the last session
    "3.2.0": [(*RACE, (4, 10))],
    "2.20.0": [(TARGET, "two-workers-recover", "after_effect:draft_refund", "target.one_live_execution", (3, 5)),
               (*RACE, (9, 10))],
    # The default sampled sweep's own overlapping recovery of case approved (one worker recovers each kill, so the
    # sweep adds "A >> 2 workers" at the golden run's first after_effect point): two recoverers of one dead executor
    # run its workflow at once. Measured 2026-12-06 with 20 tries each: 2.24.0 10 of 20, 2.28.0 11 of 20 (each
    # failure target.one_live_execution, with target.single_live_process in 7 and 9), 2.29.0 0 of 20, 3.4.0 0 of 20.
    "2.24.0": [(TARGET, "approved", "after_effect:draft_refund >> 2 workers", "target.one_live_execution", (10, 20))],
    "2.28.0": [(TARGET, "approved", "after_effect:draft_refund >> 2 workers", "target.one_live_execution", (11, 20))],
}
#: The chance, at the rate measured, that a pinned race is missed in every try (a flaky test is a broken one).
MISS_AT_MOST = 1e-4
#: The rules a try of a race may fail with besides the race's own (both processes may call the step's effect).
RACE_RULES = {"target.one_live_execution", "target.single_live_process", "target.repeats_explained"}


def tries_for(caught: int, runs: int, miss_at_most: float = MISS_AT_MOST) -> int:
    """Tries that find a race of rate ``caught / runs`` at least once but with chance ``miss_at_most``, taking the
    rate's 95% lower (Wilson) bound, not the point estimate (a handful of runs measures it loosely).

    Raises:
        ValueError: ``caught`` is 0 (no rate: nothing to pin) or above ``runs``.
    """
    if not 0 < caught <= runs:
        raise ValueError(f"caught must be in 1..runs (got {caught} of {runs})")
    z, p = 1.96, caught / runs
    low = (p + z * z / (2 * runs) - z * math.sqrt(p * (1 - p) / runs + z * z / (4 * runs * runs))) / (1 + z * z / runs)
    return math.ceil(math.log(miss_at_most) / math.log(1 - low)) if low < 1 else 1


def test_tries_for_a_race_grow_as_its_rate_falls_or_is_measured_loosely() -> None:
    assert tries_for(20, 20) < tries_for(10, 20) < tries_for(3, 20)
    assert tries_for(12, 20) < tries_for(3, 5)  # the same rate, measured on fewer runs: more tries
    assert (1 - 0.2) ** tries_for(1, 2) < MISS_AT_MOST  # a rate of 1 in 2 has a lower bound under 0.2
    with pytest.raises(ValueError):
        tries_for(0, 10)


def test_the_installed_dbos_shows_its_pinned_races(tmp_path: Path) -> None:
    """Each race pinned for the installed dbos is caught by its rule within :func:`tries_for` tries (it stops at the
    first); every try before it passes or fails with the race's rules only, and no try that passed saw two live
    processes execute one workflow (its ``overlaps.log`` with live holders)."""
    installed = version("dbos")
    if installed not in RACES:
        pytest.skip(f"dbos {installed} has no pinned races (measured: {', '.join(RACES)})")
    for n, (file, case, point, rule, (caught, runs)) in enumerate(RACES[installed]):
        target = Target.from_file(file)
        tries = tries_for(caught, runs)
        for attempt in range(tries):
            run_dir = tmp_path / f"{n}-{attempt}"
            r = run_one(target, target.case(case), "sync", run_dir, point, None, keep=True)
            assert r.error is None and r.verdict in ("passed", "failed"), (installed, case, point, r.verdict, r.error)
            found = {f.rule for f in r.failures}
            assert found <= RACE_RULES, (installed, case, point, [f.message for f in r.failures])
            if r.verdict == "passed":
                live = [o for o in r.outcome.engine_facts["overlaps"] if o.get("holders")]
                assert not live, (installed, case, point, live)
            if rule in found:
                break
        assert rule in found, (installed, case, point, f"not caught in {tries} tries at a rate of {caught}/{runs}")

