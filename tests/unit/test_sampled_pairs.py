"""A recovery pair crashpoint sampled itself (``--crash sampled``: the loop picks the second kill from the crash
points the first kill's recovery passed) never makes a correct run an ``error`` when a later run's recovery takes
another path: the pair is run again at another point of that run's recovery (or retried), at most
``PAIR_TRIES`` runs, and a pair no try reached is left out of the results and named in ``sampled_pairs``. A pair
the user named (``--crash-point "A >> B"``) stays an ``error`` when not reached (issue 27 item 4).

The subject here is a fake (no engine): its runs pass ``p0 .. p3``; the recovery of a single kill passes a
``warmup`` point first that a pair's recovery never passes (the racy path a real engine takes: another queued
workflow first, a cache warm in one run only), so the pair ``p1 >> warmup`` the loop picks is never reached.
"""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.judge.verdict import decide, unreached
from crashpoint.harness.model.outcomes import RunOutcome
from crashpoint.harness.model.results import RunResult, SweepResult
from crashpoint.harness.process.crashpoints import THEN
from crashpoint.harness.run.sweep import PAIR_TRIES, Subject, sweep_subject

POINTS = ["p0", "p1", "p2", "p3"]


def _run(run_dir: Path, unit: str, crash_point: str | None) -> RunResult:
    """One fake run of ``unit`` killed at ``crash_point``; in unit ``never`` no second kill ever lands."""
    if crash_point is None:
        return RunResult(unit, None, "passed", outcome=RunOutcome(unit, None, "wf", run_dir, crash_points=POINTS))
    kills = crash_point.split(THEN)
    at = POINTS.index(kills[0])
    recovery = (["warmup"] if len(kills) == 1 else []) + POINTS[at + 1:]
    fired = kills[:1] + [k for k in kills[1:] if k in recovery and unit != "never"]
    log = [{"worker": n + 1, "pid": 100 + n, "signal": "SIGKILL", "crash_point": p, "resumed_by": 200 + n}
           for n, p in enumerate(fired)]
    reached = len(fired) == len(kills)
    verdict, error = decide(None, [unreached(crash_point, reached, "the golden run passes: p0, p1, p2, p3")])
    return RunResult(unit, crash_point, verdict, error=error, outcome=RunOutcome(
        unit, crash_point, "wf", run_dir, crash_points=POINTS[:at + 1] + recovery, crash_fired=reached,
        kill_log=log, kills=len(fired)))


class Fake(Subject):
    kind = "pack"
    default_executor = "threads"

    def __init__(self, units: list[str]) -> None:
        self._units = units

    def units(self):
        return list(self._units)

    def call(self, unit, crash_point, golden, repeat):
        return _run, (unit, crash_point)

    def pair_points(self, unit, points):
        return ["p1"]

    def result(self, crash, results, points, wall_s):
        return SweepResult(None, "fake", "0", crash, results, points, wall_s)


def _sweep(units: list[str], **kw) -> tuple[SweepResult, list[int], list[RunResult]]:
    plans: list[int] = []
    seen: list[RunResult] = []
    result = sweep_subject(Fake(units), jobs=2, on_plan=plans.append, on_result=seen.append, **kw)
    return result, plans, seen


def test_a_sampled_pair_not_reached_is_replaced_by_one_its_recovery_passed(tmp_path: Path) -> None:
    result, plans, seen = _sweep(["u"], crash="sampled", workdir=tmp_path)
    verdicts = {r.crash_point: str(r.verdict) for r in result.results}
    assert "error" not in verdicts.values(), [(r.crash_point, r.error) for r in result.results]
    assert verdicts[f"p1{THEN}p2"] == "passed", verdicts  # the pair run's own recovery's first point
    assert f"p1{THEN}warmup" not in verdicts
    assert result.sampled_pairs["u"] == {"sampled": 1, "reached": 1, "not_reached": [],
                                         "replaced": [{"pair": f"p1{THEN}warmup", "by": f"p1{THEN}p2", "tries": 2}]}
    assert plans[-1] == len(seen) == len(result.results) == 1 + 4 + 1


def test_a_sampled_pair_no_try_reaches_is_left_out_and_named(tmp_path: Path) -> None:
    result, plans, seen = _sweep(["never"], crash="sampled", workdir=tmp_path)
    assert [str(r.verdict) for r in result.results] == ["passed"] * 5, [(r.crash_point, r.error) for r in result.results]
    cover = result.sampled_pairs["never"]
    assert cover["sampled"] == 1 and cover["reached"] == 0 and len(cover["not_reached"]) == 1
    assert cover["not_reached"][0]["first"] == "p1" and len(cover["not_reached"][0]["tried"]) == PAIR_TRIES
    assert plans[-1] == len(seen) == len(result.results)  # the plan shrank by the pair left out


def test_a_pair_the_user_named_stays_an_error_when_not_reached(tmp_path: Path) -> None:
    result, _, _ = _sweep(["u"], crash="sampled", only=[f"p1{THEN}warmup"], workdir=tmp_path)
    named = [r for r in result.results if r.crash_point == f"p1{THEN}warmup"]
    assert [str(r.verdict) for r in named] == ["error"], [(r.crash_point, r.verdict) for r in result.results]
    assert "was never reached" in (named[0].error or "")


def test_the_result_document_and_terminal_name_the_pairs(tmp_path: Path) -> None:
    from crashpoint.harness.judge.document import pair_summary
    from crashpoint.reports.terminal import unreached_pairs

    result, _, _ = _sweep(["u", "never"], crash="sampled", workdir=tmp_path)
    assert pair_summary(result.sampled_pairs) == {"sampled": 2, "reached": 1, "replaced": 1, "not_reached": 1}
    lines = unreached_pairs({"sampled_pairs": result.sampled_pairs})
    assert len(lines) == 1 and lines[0].startswith(f"sampled pair not reached in {PAIR_TRIES} tries, left out: never: p1")
