"""``crashpoint run``'s --budget SECONDS, --pairs N (the old --budget N of --crash recovery) and --points: what they
accept and what exits 2 before anything runs, and the pytest plugin's --crashpoint-budget."""

from __future__ import annotations

import argparse

import pytest

from crashpoint.harness.cli.main import ExitCode, build_parser, main, seconds

pytest_plugins = ("pytester",)


def test_a_budget_is_seconds_with_or_without_its_unit() -> None:
    assert seconds("60") == seconds("60s") == seconds(" 60S ") == 60.0
    assert seconds("1.5") == 1.5
    for bad in ("0", "-5", "0s", "abc", "inf", "nan", "60m", ""):
        with pytest.raises(argparse.ArgumentTypeError):
            seconds(bad)
    args = build_parser().parse_args(["run", "refunds", "--budget", "20s", "--points", "all"])
    assert args.budget == 20.0 and args.points == "all" and args.pairs is None


@pytest.mark.parametrize("argv, says", [
    (["--budget", "abc"], "argument --budget: expected seconds > 0 (60 or 60s), got 'abc'"),
    (["--pairs", "3"], "--pairs N (N >= 1) applies to --crash recovery only"),
    (["--crash", "recovery", "--pairs", "0"], "--pairs N (N >= 1) applies to --crash recovery only"),
    (["--points", "all", "--crash-point", "after_checkpoint:refund_draft"], "--points picks among the crash points"),
    (["--points", "some"], "argument --points: invalid choice: 'some'"),
])
def test_bad_sweep_plans_exit_2_before_running(argv: list[str], says: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "refunds", *argv]) == ExitCode.USAGE
    assert says in capsys.readouterr().err


def test_the_pytest_plugin_takes_the_same_budget(pytester: pytest.Pytester) -> None:
    assert pytester.parseconfig("--crashpoint-budget", "45s").getoption("crashpoint_budget") == 45.0
    assert pytester.parseconfig().getoption("crashpoint_budget") is None
    with pytest.raises(pytest.UsageError, match="expected seconds > 0"):
        pytester.parseconfig("--crashpoint-budget", "soon")
