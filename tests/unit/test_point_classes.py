"""Crash-point classes (harness/run/point_classes.py) and the sweep loop's plan with classes and a time budget
(harness/run/sweep.py): what is one class and what is not, which instances a sampled sweep kills at, the order a
budget starts runs in, and what it says it left out. No engine runs here: the loop drives a subject whose runs
return at once (its golden run reports the wall seconds the budget plans with), and nothing is timed."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from crashpoint.harness.judge.document import sweep_data
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.results import RunResult, SweepResult
from crashpoint.harness.run import point_classes as pc
from crashpoint.harness.run.sweep import Subject, spread_rank, sweep_subject
from crashpoint.reports.terminal import sampling

#: two interchangeable threads (a queue's workflows), one step each with an effect, interleaved: w-2 runs between
#: w-1's before_effect and after_result, w-1 between w-2's step and after_effect
POINTS = ["step:w-1@draft", "before_effect:pay", "step:w-2@draft", "after_effect:pay", "before_effect:pay#2",
          "after_result:w-1@draft", "after_effect:pay#2", "after_result:w-2@draft"]
INPUTS = [{"thread": "w-1", "queue": "q", "input": 1}, {"thread": "w-2", "queue": "q", "input": 2}]


def _call(seq: int, thread: str, effect: str = "pay", node: str = "draft", outcome: str = "applied"):
    return SimpleNamespace(seq=seq, effect=effect, thread=thread, node=node, outcome=outcome)


CALLS = [_call(1, "w-1"), _call(2, "w-2")]


def _keys(found: list[pc.PointClass]) -> list[list[str]]:
    return [c.points for c in found]


def test_the_same_step_of_interchangeable_threads_is_one_class() -> None:
    found = pc.classes(POINTS, roles=pc.thread_roles(INPUTS, None), calls=CALLS)
    assert _keys(found) == [["step:w-1@draft", "step:w-2@draft"], ["before_effect:pay", "before_effect:pay#2"],
                            ["after_effect:pay", "after_effect:pay#2"],
                            ["after_result:w-1@draft", "after_result:w-2@draft"]]
    assert found[2].key == "after_effect:pay in draft of w-*"
    assert [c.racy for c in found] == [False, True, True, False]


def test_threads_of_other_roles_unknown_threads_and_packs_are_never_merged() -> None:
    other = [INPUTS[0], {"thread": "w-2", "input": 2}]  # w-2 is not queued: a role of its own
    assert all(len(c.points) == 1 for c in pc.classes(POINTS, roles=pc.thread_roles(other, None), calls=CALLS))
    expects = {"w-1": {"status": "finished"}, "w-2": {"status": "waiting"}}  # expected to end otherwise
    assert all(len(c.points) == 1 for c in pc.classes(POINTS, roles=pc.thread_roles(INPUTS, expects), calls=CALLS))
    # the ledger does not hold the effect calls one for one (a call that raised past it): effect points unplaced
    unplaced = pc.classes(POINTS, roles=pc.thread_roles(INPUTS, None), calls=CALLS[:1])
    assert [len(c.points) for c in unplaced] == [2, 1, 1, 1, 2, 1]
    assert [c.points for c in unplaced][1:3] == [["before_effect:pay"], ["after_effect:pay"]]
    assert all(len(c.points) == 1 for c in pc.classes(POINTS, roles=None, calls=CALLS))  # a pack's sweep


def test_a_second_visit_of_a_node_in_one_thread_is_another_class() -> None:
    points = ["node:t-1@approve", "node:t-1@approve#2", "node:t-2@approve", "node:t-2@approve#2"]
    found = pc.classes(points, roles=pc.thread_roles([{"thread": "t-1", "input": 1}, {"thread": "t-2", "input": 2}],
                                                     None))
    assert _keys(found) == [["node:t-1@approve", "node:t-2@approve"], ["node:t-1@approve#2", "node:t-2@approve#2"]]
    assert found[1].key == "node:approve (visit 2) of t-*"


def test_interleaved_threads_make_racy_classes_and_sequential_ones_do_not() -> None:
    roles = pc.thread_roles([{"thread": f"t-{n}", "input": n} for n in (1, 2)], None)
    inter = ["a:t-1@x", "a:t-2@x", "b:t-1@x", "b:t-2@x", "c:t-1@x", "c:t-2@x"]
    assert [c.racy for c in pc.classes(inter, roles=roles)] == [False, True, False]  # b: t-2 ran before and after
    one_then_other = ["a:t-1@x", "b:t-1@x", "c:t-1@x", "a:t-2@x", "b:t-2@x", "c:t-2@x"]
    assert not any(c.racy for c in pc.classes(one_then_other, roles=roles))


def test_the_sample_covers_every_class_and_racy_or_recovery_classes_twice() -> None:
    roles = pc.thread_roles([{"thread": f"t-{n}", "input": n} for n in (1, 2, 3)], None)
    points = [f"{k}:t-{n}@x" for n in (1, 2, 3) for k in ("node", "after_put")]
    found = pc.sample(pc.classes(points, roles=roles, recovery_kinds=("node:",)))
    assert [(c.recovery, c.covered) for c in found] == [(True, ["node:t-1@x", "node:t-3@x"]),
                                                        (False, ["after_put:t-1@x"])]
    assert pc.plan_order(found) == [("node:t-1@x", "class"), ("after_put:t-1@x", "class"),
                                    ("node:t-3@x", "recovery")]
    data = found[0].to_dict(["node:t-3@x"])
    assert data == {"class": "node:x of t-*", "instances": 3, "sample": ["node:t-1@x", "node:t-3@x"],
                    "covered": ["node:t-1@x"],
                    "left_out": ["node:t-2@x", "node:t-3@x"], "budget_cut": ["node:t-3@x"], "racy": False,
                    "recovery": True}


# --------------------------------------------------------------------------- the loop's plan


def _instant(run_dir: Path, unit: str, point: str | None, golden_s: float, order: list) -> RunResult:
    """A run that returns at once: the golden run passes POINTS and says it took ``golden_s``; a crash run passes."""
    order.append(point)
    if point is None:
        return RunResult(unit, None, "passed", wall_s=golden_s,
                         outcome=TargetOutcome("batch", "sync", None, run_dir, crash_points=list(POINTS), calls=CALLS))
    return RunResult(unit, point, "passed", wall_s=0.0,  # killed as asked; its recovery passed after_result
                     outcome=TargetOutcome("batch", "sync", point, run_dir, kills=len(point.split(" >> ")),
                                           crash_points=[point.split(" >> ")[0], "after_result:w-1@draft"]))


class _Queue(Subject):
    """One unit with the two queued workflows of POINTS; its classes are those of an interchangeable queue."""

    kind = "target"

    def __init__(self, golden_s: float) -> None:
        self.golden_s, self.order = golden_s, []

    def units(self) -> list[str]:
        return ["batch[sync]"]

    def call(self, unit: str, crash_point: str | None, golden: Any, repeat: int):
        return _instant, (unit, crash_point, self.golden_s, self.order)

    def point_classes(self, unit, points, golden):
        return pc.classes(points, roles=pc.thread_roles(INPUTS, None), calls=golden.calls,
                          recovery_kinds=("after_result:",))

    def pair_points(self, unit, points):
        return points[:1]

    def result(self, crash, results, points, wall_s):
        return SweepResult(SimpleNamespace(name="q", version="1", file=None, entry="x"), "fake", "1", crash, results,
                           points, wall_s)


def test_a_sampled_sweep_kills_at_each_class_and_racy_or_recovery_ones_twice() -> None:
    subject = _Queue(golden_s=0.0)
    with ThreadPoolExecutor(1) as pool:
        result = sweep_subject(subject, crash="sampled", executor=pool)
    singles = [r.crash_point for r in result.results if r.crash_point and " >> " not in r.crash_point]
    # the step once; the effects (racy) and after_result (a recovery kind here) twice; in golden-run order
    assert singles == [p for p in POINTS if p != "step:w-2@draft"]
    assert [r.crash_point for r in result.results if r.crash_point and " >> " in r.crash_point] == [
        "step:w-1@draft >> after_result:w-1@draft"]
    assert result.points == "classes" and [len(c["covered"]) for c in result.classes["batch[sync]"]] == [1, 2, 2, 2]
    everything = sweep_subject(_Queue(golden_s=0.0), crash="sampled", executor="threads", points="all", jobs=1)
    assert [r.crash_point for r in everything.results if r.crash_point and " >> " not in r.crash_point] == POINTS
    assert sampling(sweep_data(result)) == [
        "crash-point classes: 4 classes of 8 crash points; 7 sampled (one instance of each class, two of a racy or "
        "recovery class), 1 not (--points all kills at every one)"]
    assert sampling(sweep_data(everything)) == ["crash-point classes: 4 classes of 8 crash points; every one sampled"]


def test_a_budget_starts_each_class_first_then_racy_recovery_pairs_and_the_rest() -> None:
    subject = _Queue(golden_s=0.0)
    with ThreadPoolExecutor(1) as pool:
        result = sweep_subject(subject, crash="sampled", executor=pool, time_budget_s=3600, points="all")
    # within a tier, spread over the run (the middle first: spread_rank)
    assert subject.order == [None,
                             "after_effect:pay", "before_effect:pay", "after_result:w-1@draft", "step:w-1@draft",
                             "after_effect:pay#2", "before_effect:pay#2",  # racy
                             "after_result:w-2@draft",  # recovery
                             "step:w-1@draft >> after_result:w-1@draft",  # a kill during a recovery
                             "step:w-2@draft"]  # an instance beyond the sample
    assert result.left_out == [] and sweep_data(result)["budget"]["only_golden"] is False
    assert [r.crash_point for r in result.results][1:-1] == POINTS  # reported in golden-run order all the same


def test_a_budget_no_crash_run_fits_runs_the_golden_runs_and_says_so() -> None:
    subject = _Queue(golden_s=100.0)  # a crash run is expected to take 150 s: none fits in 60
    with ThreadPoolExecutor(2) as pool:
        result = sweep_subject(subject, crash="sampled", executor=pool, time_budget_s=60)
    assert subject.order == [None] and [r.crash_point for r in result.results] == [None]
    assert result.passed  # what ran passed; what did not run is neither a failure nor a pass
    data = sweep_data(result)
    assert data["budget"]["only_golden"] and data["budget"]["crash_runs_started"] == 0
    assert [(r["crash_point"], r["tier"]) for r in data["budget"]["left_out"]] == [
        ("after_effect:pay", "class"), ("before_effect:pay", "class"), ("after_result:w-1@draft", "class"),
        ("step:w-1@draft", "class"), ("after_effect:pay#2", "racy"), ("before_effect:pay#2", "racy"),
        ("after_result:w-2@draft", "recovery"), ("step:w-1@draft", "pairs")]
    assert [c["budget_cut"] for c in data["classes"]["batch[sync]"]] == [
        ["step:w-1@draft"], ["before_effect:pay", "before_effect:pay#2"], ["after_effect:pay", "after_effect:pay#2"],
        ["after_result:w-1@draft", "after_result:w-2@draft"]]
    assert all(c["covered"] == [] for c in data["classes"]["batch[sync]"])
    assert data["results"] and all(r["crash_point"] == "none" for r in data["results"])
    assert sampling(data)[-1] == (
        "time budget 60 s: only the golden runs ran; no crash run fit, so no crash was tested: 8 run(s) left out "
        "(4 class, 2 racy, 1 recovery, 1 pairs); neither failed nor passed")


def test_a_tier_is_taken_spread_over_the_run() -> None:
    assert spread_rank(4) == [3, 1, 0, 2] and spread_rank(1) == [0] and spread_rank(0) == []
    for n in (2, 5, 8, 13):
        assert sorted(spread_rank(n)) == list(range(n))
        first = [i for i, r in enumerate(spread_rank(n)) if r < 3]
        assert min(first) < n / 2 <= max(first)  # the first three taken are in both halves of the run


def test_bad_points_modes_and_budgets_are_refused() -> None:
    with pytest.raises(ValueError):
        sweep_subject(_Queue(0.0), crash="sampled", points="some")
    for bad in (0, -1, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            sweep_subject(_Queue(0.0), crash="sampled", time_budget_s=bad)
