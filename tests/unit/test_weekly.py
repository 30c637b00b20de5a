"""The weekly reliability report over four weeks of stored runs, dates pinned with freezegun.

The verdicts and measures are seeded so that every trend and list is known independently (worked
out by hand below, per week W0..W3 from Monday 2026-11-02):

* resume success (killed runs that passed): alpha's 10 killed runs each week, plus beta's 1 in W3.
  W0 10/10, W1 10/10, W2 9/10 (alpha@p1 fails), W3 9/11 (alpha@p2, alpha@p3 fail) -> worsened
  from 90.0% to 81.8%.
* duplicate-event safety: dup_case's one run a week; W2 duplicated an effect -> improved 0% -> 100%.
* retry success: retry_case's two runs a week; W2 one retried task never succeeded -> improved 50% -> 100%.
* compensation success: always 100% -> unchanged.
* cancellation correctness: cancel_case runs W0..W2 only -> n/a in W3; cancel_case disappeared.
* approval wait time: 100, 200, 300, 150 virtual s -> improved 300 s -> 150 s.
* crash points covered: 10, 10, 10, 11 -> improved 10 -> 11.
* new failures: alpha@p2, alpha@p3. fixed: alpha@p1, dup_case. flaky: flip_case (W1: pass and fail
  on commit c1). incident recurrence: incident_refund_x failing in W2 and W3 (2 runs).
* alerts: retry storm (W3 retry_case, 7 retries), approval overdue (W1), duplicate side effect (W2
  dup_case), replay failure (W2 alpha@p1).
"""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest
from freezegun import freeze_time

from crashpoint.harness.cli.main import main
from crashpoint.reports import weekly
from crashpoint.reports.results_store import ResultStore
from needs import fresh_pg_database

SINCE, UNTIL = date(2026, 11, 2), date(2026, 11, 29)
WEEKS = ["2026-11-02..2026-11-08", "2026-11-09..2026-11-15", "2026-11-16..2026-11-22", "2026-11-23..2026-11-29"]


def r(case_id: str, point: str = "none", ok: bool = True, tags: tuple[str, ...] = (), oracle: str = "side_effects",
      **measures) -> dict:
    failures = [] if ok else [{"oracle": oracle, "message": f"{case_id} at {point} broke", "evidence": []}]
    return {"case_id": case_id, "crash_point": point, "verdict": "passed" if ok else "failed", "failures": failures,
            "wall_s": 0.1, "tags": list(tags), "measures": measures}


def week_results(w: int) -> list[dict]:
    out = []
    failing_points = {2: {"p1"}, 3: {"p2", "p3"}}.get(w, set())
    for i in range(1, 11):
        p = f"after_effect:p{i}"
        out.append(r("alpha", p, ok=f"p{i}" not in failing_points, crashed=True,
                     oracle="differential", replay_failed=(w == 2 and i == 1)))
    if w == 3:
        out.append(r("beta", "after_effect:q1", crashed=True))
    out.append(r("dup_case", ok=w != 2, dup=True, dup_safe=w != 2, dup_effect=w == 2))
    out.append(r("retry_case", retry=True, retry_ok=True, retries=7 if w == 3 else 1))
    out.append(r("retry_case", "after_checkpoint:x", retry=True, retry_ok=w != 2, retries=1))
    out.append(r("comp_case", comp=True, comp_ok=True))
    if w < 3:
        out.append(r("cancel_case", cancel=True, cancel_ok=True))
    out.append(r("approval_case", approval_wait_s=[100.0, 200.0, 300.0, 150.0][w], approval_overdue=w == 1))
    out.append(r("flip_case"))
    out.append(r("incident_refund_x", ok=w < 2, tags=("incident", "refund")))
    return out


def record(store: ResultStore, when: str, commit: str, results: list[dict], finish: bool = True) -> None:
    with freeze_time(when):
        run_id = store.begin_run({"engine": "reference", "pack": "refunds", "git_commit": commit})
        for x in results:
            store.add_result(run_id, x)
        if finish:
            store.finish_run(run_id)


def _fill(url: str) -> None:
    store = ResultStore(url)
    record(store, "2026-10-30 12:00:00", "c_old", [r("alpha", "after_effect:p9", ok=False, crashed=True)])  # before
    for w, day in enumerate(["2026-11-04", "2026-11-11", "2026-11-18", "2026-11-25"]):
        record(store, f"{day} 09:00:00", f"c{w}", week_results(w))
    record(store, "2026-11-12 15:00:00", "c1", [r("flip_case", ok=False)])  # same commit as W1's run: flaky
    record(store, "2026-11-27 23:59:00", "c3", [r("comp_case", comp=True, comp_ok=True)], finish=False)  # killed
    record(store, "2026-11-30 00:00:01", "c4", [r("alpha", "after_effect:p1", ok=False, crashed=True)])  # after
    store.close()


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def store_url(request, tmp_path_factory: pytest.TempPathFactory):
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('weekly') / 'results.db'}"
        _fill(url)
        yield url
    else:
        for url in fresh_pg_database():
            _fill(url)
            yield url


@pytest.fixture(scope="module")
def report(store_url: str) -> dict:
    store = ResultStore(store_url, create=False)
    try:
        return weekly.weekly(store, SINCE, UNTIL)
    finally:
        store.close()


def test_weeks_and_runs(report: dict) -> None:
    assert [w["label"] for w in report["weeks"]] == WEEKS
    assert [w["runs"] for w in report["weeks"]] == [1, 2, 1, 2]
    assert [w["incomplete_runs"] for w in report["weeks"]] == [0, 0, 0, 1]


def test_each_metric_has_the_seeded_trend(report: dict) -> None:
    t = report["trends"]
    assert t["resume_success"]["values"] == [1.0, 1.0, 0.9, round(9 / 11, 4)]
    assert t["resume_success"]["direction"] == "worsened"
    assert t["duplicate_event_safety"]["values"] == [1.0, 1.0, 0.0, 1.0]
    assert t["duplicate_event_safety"]["direction"] == "improved"
    assert t["retry_success"]["values"] == [1.0, 1.0, 0.5, 1.0]
    assert t["retry_success"]["direction"] == "improved"
    assert t["compensation_success"]["values"] == [1.0, 1.0, 1.0, 1.0]
    assert t["compensation_success"]["direction"] == "unchanged"
    assert t["cancellation_correctness"]["values"] == [1.0, 1.0, 1.0, None]
    assert t["cancellation_correctness"]["direction"] == "n/a"
    assert t["approval_wait_s"]["values"] == [100.0, 200.0, 300.0, 150.0]
    assert t["approval_wait_s"]["direction"] == "improved"  # lower is better
    assert t["crash_points_covered"]["values"] == [10, 10, 10, 11]
    assert t["crash_points_covered"]["direction"] == "improved"


def test_new_fixed_flaky_disappeared_incidents(report: dict) -> None:
    assert report["new_failures"] == [{"engine": "reference", "case_id": "alpha", "crash_point": "after_effect:p2"},
                                      {"engine": "reference", "case_id": "alpha", "crash_point": "after_effect:p3"}]
    assert report["fixed"] == [{"engine": "reference", "case_id": "alpha", "crash_point": "after_effect:p1"},
                               {"engine": "reference", "case_id": "dup_case", "crash_point": "none"}]
    assert report["flaky"] == [{"engine": "reference", "case_id": "flip_case", "crash_point": "none", "git_commit": "c1"}]
    assert report["disappeared"] == ["cancel_case"]
    assert report["incidents"] == [{"case_id": "incident_refund_x", "failing_runs": 2, "weeks": WEEKS[2:]}]


def test_alerts(report: dict) -> None:
    got = [(a["kind"], a["week"], a["case_id"], a["crash_point"]) for a in report["alerts"]]
    assert got == [("retry_storm", WEEKS[3], "retry_case", "none"),
                   ("approval_overdue", WEEKS[1], "approval_case", "none"),
                   ("dup_effect", WEEKS[2], "dup_case", "none"),
                   ("replay_failed", WEEKS[2], "alpha", "after_effect:p1")]
    assert [a["detail"] for a in report["alerts"]] == [
        "7 retries scheduled", "an approval was decided after its deadline, or left waiting past it",
        "dup_case at none broke", "alpha at after_effect:p1 broke"]


def test_the_report_states_the_trends_in_words(report: dict) -> None:
    said = weekly.sentences(report)
    assert said[:7] == [
        "resume success: worsened from 90.0% to 81.8%",
        "duplicate-event safety: improved from 0.0% to 100.0%",
        "retry success: improved from 50.0% to 100.0%",
        "compensation success: unchanged from 100.0% to 100.0%",
        "cancellation correctness: n/a (latest week n/a, earlier 100.0%)",
        "approval wait time: improved from 300 s to 150 s",
        "crash points covered: improved from 10 to 11",
    ]
    assert said[7:] == [
        "new failures: alpha at after_effect:p2, alpha at after_effect:p3",
        "fixed: alpha at after_effect:p1, dup_case",
        "flaky: flip_case (commit c1)",
        "disappeared (coverage gap, not a regression): cancel_case",
        "incident recurrences: incident_refund_x (2 failing runs)",
    ]


def test_weekly_command_in_every_format(store_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["report", "--weekly", "--since", str(SINCE), "--until", str(UNTIL), "--db", store_url]
    assert main(args) == 1  # new failures and alerts
    text = capsys.readouterr().out
    assert text.startswith("### crashpoint weekly reliability report: 2026-11-02 to 2026-11-29")
    assert "- resume success: worsened from 90.0% to 81.8%" in text
    assert "| resume success | 100.0% | 100.0% | 90.0% | 81.8% | worsened |" in text
    assert "#### Alerts (4)" in text
    assert main([*args, "--format", "json", "--out", str(tmp_path / "w.json")]) == 1
    doc = json.loads((tmp_path / "w.json").read_text())
    assert doc["format"] == "crashpoint.weekly/1" and doc["disappeared"] == ["cancel_case"]
    assert main([*args, "--format", "html", "--out", str(tmp_path / "w.html")]) == 1
    page = (tmp_path / "w.html").read_text()
    assert "data:image/png;base64," in page and "<script" not in page
    assert main([*args, "--format", "junit"]) == 2


def test_a_quiet_range_has_no_findings(store_url: str) -> None:
    store = ResultStore(store_url, create=False)
    quiet = weekly.weekly(store, date(2026, 11, 23), date(2026, 11, 29))
    assert quiet["new_failures"] == [{"engine": "reference", "case_id": "alpha", "crash_point": "after_effect:p2"},
                                      {"engine": "reference", "case_id": "alpha", "crash_point": "after_effect:p3"},
                                      {"engine": "reference", "case_id": "incident_refund_x", "crash_point": "none"}]
    assert all(t["direction"] == "n/a" for t in quiet["trends"].values())
    empty = weekly.weekly(store, date(2025, 1, 1), date(2025, 1, 7))
    assert empty["weeks"][0]["runs"] == 0 and empty["alerts"] == [] and empty["new_failures"] == []
