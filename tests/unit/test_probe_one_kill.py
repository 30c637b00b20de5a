"""Two workers recovering at once (a target case's ``workers: 2``) count a crash point's occurrences each from the log
as it was when they started, so both can pass a point as its ``#2``: the schedule's kill is then fired by one of them
only (``crashpoints.claim_kill``), the other goes on. Before, both killed themselves and the run was an ``error``
("the probe fired 2 times", dbos_refund's ``before_effect:notify_customer >> before_effect:notify_customer#2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.harness.process.crashpoints import CrashProbe, SimulatedCrash


def test_of_two_workers_at_the_same_occurrence_one_fires_the_kill(tmp_path: Path) -> None:
    (tmp_path / "crashpoints.log").write_text("step:a\n")  # the first kill's worker passed it once
    first = CrashProbe(str(tmp_path), targets=["step:a#2"], simulate=True)
    second = CrashProbe(str(tmp_path), targets=["step:a#2"], simulate=True)
    with pytest.raises(SimulatedCrash):
        first("step:a")
    second("step:a")  # its own count says #2 too: the kill was this run's once, so it goes on
    assert (tmp_path / "crash.fired").read_text().splitlines() == ["step:a#2"]


def test_each_kill_of_a_schedule_is_claimed_on_its_own(tmp_path: Path) -> None:
    probe = CrashProbe(str(tmp_path), targets=["p", "q"], simulate=True)
    with pytest.raises(SimulatedCrash):
        probe("p")
    recovery = CrashProbe(str(tmp_path), targets=["p", "q"], simulate=True)
    with pytest.raises(SimulatedCrash):
        recovery("q")
