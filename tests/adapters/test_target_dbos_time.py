"""Time compressed on DBOS targets (issue 28 item 4): the team's ``DBOS.sleep`` of days ends within about a second,
its queues are polled every ``dbos.poll_s`` instead of their own ``polling_interval_sec`` (10 s here), and
``dbos.time_scale: 1`` keeps both as written."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.engines.base import engine_for  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "dbos_time"


def _off(path: Path) -> Target:
    data = Target.from_file(path).to_data()
    return Target.from_data(data | {"dbos": {**data["dbos"], "time_scale": 1}}, file=str(path))


def test_the_sweep_says_what_dbos_compresses() -> None:
    note = engine_for("dbos").time_note(Target.from_file(DATA / "sleep.yaml"))
    assert note is not None and "DBOS.sleep" in note and "polling_interval_sec" in note, note
    assert engine_for("dbos").time_note(_off(DATA / "sleep.yaml")) is None


@pytest.mark.slow  # one golden run: 3 to 6 s
def test_a_dbos_sleep_of_three_days_ends_within_seconds(tmp_path: Path) -> None:
    target = Target.from_file(DATA / "sleep.yaml")
    r = run_one(target, target.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert r.outcome.threads["sleep-1"]["status"] == "finished"


@pytest.mark.slow  # one golden run: 5 to 10 s (settle_s)
def test_time_scale_1_keeps_the_dbos_sleep(tmp_path: Path) -> None:
    target = _off(DATA / "sleep.yaml")
    r = run_one(target, target.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.outcome.threads["sleep-1"]["status"] == "pending"


@pytest.mark.slow  # one golden run: 2 to 5 s (before: 11 to 13 s, the team's 10 s poll)
def test_the_teams_queue_is_polled_fast(tmp_path: Path) -> None:
    target = Target.from_file(DATA / "queue.yaml")
    r = run_one(target, target.case("default"), "sync", tmp_path, None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert r.outcome.wall_s < 9, r.outcome.wall_s  # the child waited less than the team's 10 s poll
