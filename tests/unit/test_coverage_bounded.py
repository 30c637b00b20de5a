"""Crash points covered is at most 100% and the same number in the terminal (``crashpoint run``'s summary, from
:func:`crashpoint.harness.judge.metrics.aggregate`) and in the HTML and Markdown reports (from the stored results,
:func:`crashpoint.reports.summary.metrics`): a point counts once however many runs kill there, a pair ``A >> B``
and a recovery by several workers ``A >> 3 workers`` at their first kill (issue 27 item 9: the reports said
"crash points covered 119.3% (765 of 641)" under the default ``--crash sampled`` while the terminal said 100%)."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.judge.metrics import aggregate
from crashpoint.harness.judge.record import measures
from crashpoint.harness.model.outcomes import RunOutcome
from crashpoint.harness.model.results import RunResult
from crashpoint.reports.summary import fmt_metric, golden_points, metrics

POINTS = ["p0", "p1", "p2"]


def _result(spec: str | None) -> RunResult:
    out = RunOutcome("c", spec, "wf", Path("."), crash_points=POINTS, crash_fired=spec is not None)
    r = RunResult("c", spec, "passed", outcome=out)
    r.measures = measures(r)
    return r


def test_pairs_and_extras_do_not_push_coverage_over_100_percent() -> None:
    results = [_result(s) for s in [None, "p0", "p1", "p2", "p0 >> p1", "p1 >> p2", "p1 >> 3 workers",
                                    "p1 || worker"]]
    terminal = aggregate(results)["overall"]["crash_points_covered"]
    rows = [{**r.to_dict(), "measures": r.measures} for r in results]
    stored = metrics(rows)["crash_points_covered"]
    assert terminal == 1.0
    assert fmt_metric("crash_points_covered", stored, golden_points(rows)) == "100.0% (3 of 3)"


def test_a_point_no_run_killed_at_is_not_covered() -> None:
    results = [_result(s) for s in [None, "p0", "p0 >> p1", "p0 >> p2"]]
    rows = [{**r.to_dict(), "measures": r.measures} for r in results]
    assert fmt_metric("crash_points_covered", metrics(rows)["crash_points_covered"], golden_points(rows)) == \
        "33.3% (1 of 3)"
    assert aggregate(results)["overall"]["crash_points_covered"] == round(1 / 3, 4)


def test_the_weekly_report_counts_a_point_once() -> None:
    import pandas as pd

    from crashpoint.reports.weekly import week_metrics

    df = pd.DataFrame({"case_id": ["c"] * 5, "crash_point": ["none", "p0", "p0 >> p1", "p0 >> 3 workers", "p1"],
                       "crashed": [False, True, True, True, True], "passed": [True] * 5, "dup_safe": [False] * 5,
                       "dup": [False] * 5, "retry_ok": [False] * 5, "retry": [False] * 5, "comp_ok": [False] * 5,
                       "comp": [False] * 5, "cancel_ok": [False] * 5, "cancel": [False] * 5,
                       "approval_wait_s": [None] * 5})
    assert week_metrics(df)["crash_points_covered"] == 2
