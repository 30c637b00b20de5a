"""``crashpoint search TARGET.yaml`` without running an engine: the space a target's schedules draw over comes from
its golden run and its engine's capabilities, a schedule becomes one case (like_fault_free when a correct target
masks it), and the command refuses what a target's search cannot do with exit 2."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crashpoint.harness.cli.main import main
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.run import schedule_search as ss

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/langgraph_refund/target.yaml"


def _golden(engine_target: Target, answered: bool = True) -> TargetOutcome:
    out = TargetOutcome("approved", "sync", None, Path("/nonexistent"))
    out.crash_points = ["node:order-1001@draft", "after_effect:issue_refund", "after_effect:notify_customer#2"]
    out.calls = [SimpleNamespace(effect=e) for e in ["notify_customer", "issue_refund", "notify_customer"]]
    out.deliveries = [{"kind": "answer"}] if answered else []
    out.threads = {"order-1001": {"status": "finished"}}
    return out


def test_the_space_is_the_golden_runs_points_calls_requests_and_the_engines_capabilities() -> None:
    langgraph = Target(name="t", engine="langgraph", entry="m:g", inputs=[{"thread": "a", "input": 1}],
                       versions={"v2": "m:g2"})
    space = ss.target_space(langgraph, _golden(langgraph))
    # the points sorted: a seed draws the same ones however thread timing ordered the golden run's log
    assert (space.subject, space.points, space.calls) == ("target", sorted(_golden(langgraph).crash_points),
                                                          {"notify_customer": 2, "issue_refund": 1})
    assert (space.requests, space.versions, space.waits, space.capabilities) == (("start", "answer"), ("v2",), True,
                                                                                 {"rendezvous"})
    quiet = ss.target_space(langgraph, _golden(langgraph, answered=False))
    assert (quiet.requests, quiet.waits) == (("start",), False)  # nothing waited: no deploy, no server crash drawn
    temporal = Target(name="t", engine="temporal", entry="m:g", inputs=[{"thread": "a", "input": 1}])
    assert ss.target_space(temporal, _golden(temporal)).capabilities == {"server"}


@settings(max_examples=60, database=None)
@given(st.data())
def test_every_drawn_schedule_is_a_case_its_engine_can_run(data) -> None:
    """Each drawn fault is of a kind the engine can inject (LangGraph: no server crash, no several workers), at a
    point, effect call or request the golden run had; the schedule makes a valid case."""
    target = Target(name="t", engine="langgraph", entry="m:g", inputs=[{"thread": "a", "input": 1}],
                    versions={"v2": "m:g2"})
    golden = _golden(target)
    schedule = data.draw(st.lists(ss.target_faults(target, golden), min_size=1, max_size=3))
    for f in schedule:
        assert f["kind"] in ("kill", "duplicate", "tool", "deploy"), f
        if f["kind"] == "kill":
            assert f["at"] in golden.crash_points
        if f["kind"] == "tool":
            assert f["call"] <= {"notify_customer": 2, "issue_refund": 1}[f["tool"]] and f["outcome"] != "fatal"
    case = ss.target_case(TargetCase("approved"), schedule)
    assert case.faults and case.name.startswith("approved_gen_")
    assert case.like_fault_free == all(f["kind"] != "deploy" for f in schedule)  # a deploy changes the code


def test_a_schedule_joins_the_cases_own_faults_and_a_kind_held_once_is_not_doubled() -> None:
    base = TargetCase("c", faults=[{"kind": "deploy", "version": "v2"}])
    case = ss.target_case(base, [{"kind": "deploy", "version": "v3"}, {"kind": "kill", "at": "node:a@x"}])
    assert [f["kind"] for f in case.faults] == ["deploy", "kill"] and case.deploy == "v2"
    assert not case.like_fault_free  # the case has faults of its own: its fault-free run is not the reference
    with pytest.raises(ValueError, match=r"fault kind\(s\) \['server_crash'\] draw nothing on this target's case"):
        target = Target(name="t", engine="langgraph", entry="m:g", inputs=[{"thread": "a", "input": 1}])
        ss.target_faults(target, _golden(target), ["server_crash"])


@pytest.mark.parametrize("argv, message", [
    (["--kinds", "server_crash"], "--kinds: server_crash: not a fault kind a LangGraph target's case can hold; "
                                  "known: kill, duplicate, tool, deploy"),
    (["--kinds", "zombie"], "--kinds: zombie: not a fault kind"),
    (["--engine", "x:y"], "--engine is for packs: a target file names its engine"),
    (["--executor", "processes"], "--executor: a target's search runs in threads"),
    (["--case", "nope"], "has no case 'nope'"),
])
def test_what_a_targets_search_cannot_do_exits_2_with_one_message(tmp_path: Path, capsys, monkeypatch, argv,
                                                                  message) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["search", str(EXAMPLE), "--schedules", "1", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1, err
    assert not (tmp_path / ".crashpoint").exists()  # refused before the seed is written


def test_a_packs_search_refuses_the_target_options(tmp_path: Path, capsys) -> None:
    assert main(["search", "refunds", "--case", "x"]) == 2
    assert "--case and --durability are for a target file" in capsys.readouterr().err


def test_a_packs_search_refuses_a_kind_it_does_not_draw_before_any_run(tmp_path: Path, capsys, monkeypatch) -> None:
    """``server_crash`` (a target's only) and ``deploy`` (a pack's deploys are drawn as ``insert``) draw nothing for a
    pack: exit 2 naming the kinds it draws. Before, the search ran the golden runs and then crashed (exit 3,
    ValueError from the generator)."""
    monkeypatch.chdir(tmp_path)
    assert main(["search", "refunds", "--kinds", "server_crash,deploy", "--schedules", "1"]) == 2
    err = capsys.readouterr().err
    assert ("--kinds: unknown kind(s) ['server_crash', 'deploy']; a pack's search draws: kill, duplicate, hold, "
            "insert, reorder, tool, late_answer, zombie, workers") in err and err.count("\n") == 1, err


def test_kills_are_put_in_the_order_the_golden_run_passed_their_points() -> None:
    points = ["node:a@draft", "after_effect:pay", "node:a@notify"]
    deploy = {"kind": "deploy", "version": "v2"}
    drawn = [{"kind": "kill", "at": "node:a@notify"}, deploy, {"kind": "kill", "at": "node:a@draft"},
             {"kind": "kill", "at": "node:a@notify", "twice": True}]
    assert ss.in_golden_order(drawn, points) == [{"kind": "kill", "at": "node:a@draft"}, deploy,
                                                 {"kind": "kill", "at": "node:a@notify"}]


def _searched(outcomes: list[bool], tmp_path: Path) -> ss.SearchResult:
    """A search over one-fault schedules whose runs fail as ``outcomes`` say, in turn: the first draw fails."""
    results = iter(outcomes)

    def run(schedule, run_dir):
        return ss.Trial(schedule, None, "failed" if next(results, False) else "passed")

    result = ss.SearchResult("c", seed=1, budget=5)
    ss._find(result, st.just([{"kind": "kill", "at": "p"}]), run, tmp_path, False, None)
    return result


def test_a_found_schedule_is_run_again_and_says_how_often_it_failed(tmp_path: Path) -> None:
    steady = _searched([True] * 10, tmp_path / "steady")
    assert steady.reproduced == (3, 3) and steady.found is not None
    assert "failed 3 of 3 runs of this schedule" in "\n".join(ss.summary_lines(steady))
    racy = _searched([True, False, True], tmp_path / "racy")  # found once; of two runs more, one passes
    assert racy.reproduced == (2, 3), racy.reproduced
    assert "its outcome depends on timing (a racy point), so its repro may pass when run once" in \
        "\n".join(ss.summary_lines(racy))
    assert racy.to_dict()["found"]["reproduced"] == [2, 3]
