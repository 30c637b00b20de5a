"""The pytest plugin, exercised with pytester on a temporary project."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "scenarios" / "refunds"
SEED = "approval_timeout_after_refund_draft.json"


@pytest.fixture(autouse=True)
def _no_other_chaos_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests exercise crashpoint's own ``--chaos`` alias: keep another installed owner of ``--chaos``
    (ordeal, in a venv made before the test extra dropped it) out of the sessions they start."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:ordeal")


@pytest.fixture()
def project(pytester: pytest.Pytester) -> Path:
    """A project holding a copy of the refunds pack with the seed case and the cancel case."""
    dst = pytester.path / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    for name in (SEED, "cancel_while_waiting_compensates_draft.yaml"):
        shutil.copy(PACK / "cases" / name, dst / "cases")
    return dst


def test_plain_run_is_one_golden_item_per_case(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project), "-v")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*crashpoint: golden runs only*", "*::approval_timeout_after_refund_draft PASSED*"])


def test_chaos_makes_one_item_per_crash_point_with_readable_ids(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project / "cases" / SEED), "--chaos", "--crashpoint-schedules", "0", "-v")
    result.assert_outcomes(passed=14)  # the golden run + 13 crash points
    result.stdout.fnmatch_lines([
        "*crashpoint: chaos*",
        "*approval_timeout_after_refund_draft[[]kill@after_checkpoint:refund_draft[]] PASSED*",
    ])


def test_chaos_option_clash_with_another_plugin_does_not_break_pytest(pytester: pytest.Pytester,
                                                                      project: Path) -> None:
    """Another plugin's ``--chaos`` flag switches crashpoint's chaos on too, and one header line says so (before,
    ``--chaos`` there ran crashpoint's golden runs only, silently: 1 passed)."""
    pytester.makepyfile(otherchaos="""
        def pytest_addoption(parser):
            parser.getgroup("otherchaos").addoption("--chaos", action="store_true", help="another plugin's --chaos")
    """)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "otherchaos", str(project / "cases" / SEED), "--crashpoint-chaos",
                                "--crashpoint-schedules", "0")
    result.assert_outcomes(passed=14)
    result.stdout.fnmatch_lines(["*crashpoint: chaos on*"])
    assert "shared with plugin" not in result.stdout.str()  # --crashpoint-chaos alone: no borrowed --chaos
    result = pytester.runpytest("-p", "otherchaos", str(project / "cases" / SEED), "--chaos",
                                "--crashpoint-schedules", "0")
    result.assert_outcomes(passed=14)  # the golden run + 13 crash points, as with our own --chaos
    result.stdout.fnmatch_lines(["crashpoint: --chaos is shared with plugin otherchaos: crashpoint honours it too*",
                                 "crashpoint: chaos on*"])
    golden = pytester.runpytest("-p", "otherchaos", str(project / "cases" / SEED))
    golden.assert_outcomes(passed=1)
    golden.stdout.fnmatch_lines(["*crashpoint: golden runs only; enable chaos with --chaos (shared with plugin "
                                 "otherchaos) or --crashpoint-chaos*",
                                 "crashpoint: no crash run happened (1 case(s) ran their golden run only)*"])


def test_another_plugins_chaos_option_that_takes_a_value_is_not_read_and_the_summary_says_so(
        pytester: pytest.Pytester, project: Path) -> None:
    """A ``--chaos LEVEL`` of another plugin is not an on/off switch crashpoint can read: its cases run golden only,
    and the terminal summary says no crash run happened (never a silent golden-only run)."""
    pytester.makepyfile(levelchaos="""
        def pytest_addoption(parser):
            parser.addoption("--chaos", default=None, metavar="LEVEL", help="another plugin's --chaos LEVEL")
    """)
    pytester.syspathinsert()
    result = pytester.runpytest("-p", "levelchaos", str(project / "cases" / SEED), "--chaos", "high")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*crashpoint: golden runs only; enable chaos with --crashpoint-chaos (--chaos "
                                 "belongs to another plugin)*",
                                 "crashpoint: no crash run happened (1 case(s) ran their golden run only); crash "
                                 "runs need --crashpoint-chaos"])


def test_a_skipped_target_sweep_is_counted_in_the_summary(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_sweep="""
        def test_sweeps(crashpoint_sweep):
            raise AssertionError("not reached: the fixture skips without chaos")
    """)
    result = pytester.runpytest("-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["crashpoint: no crash run happened (1 crashpoint_sweep test(s) skipped); crash runs "
                                 "need --chaos or --crashpoint-chaos",
                                 "*crashpoint sweeps run under --chaos*"])


def test_a_failure_shows_the_oracle_trace_lines_and_a_repro_command(pytester: pytest.Pytester,
                                                                    project: Path) -> None:
    result = pytester.runpytest(str(project / "cases" / "cancel_while_waiting_compensates_draft.yaml"),
                                "--crashpoint-engine", "variants.engines:NoCompensationOnCancel")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "*[[]side_effects.compensated_on_failure[]] workflow ended cancelled after effect draft_refund was applied*",
        "*last trace events:*",
        "*reproduce: crashpoint run *cancel_while_waiting_compensates_draft.yaml --crash none"
        " --engine variants.engines:NoCompensationOnCancel*",
    ])


def test_a_malformed_case_is_a_collection_error_not_a_skip(pytester: pytest.Pytester, project: Path) -> None:
    (project / "cases" / "broken.yaml").write_text("case_id: broken\nevents: []\nexpected: {final_status: maybe}\n")
    result = pytester.runpytest(str(project))
    result.assert_outcomes(errors=1)  # pytest stops at a collection error: nothing runs half-checked
    result.stdout.fnmatch_lines(["*broken.yaml:3: field expected.final_status: 'maybe' is not one of*"])
    assert "Traceback" not in result.stdout.str()


def _schedules(pytester: pytest.Pytester) -> tuple[int, dict]:
    cache = pytester.path / ".pytest_cache" / "v" / "crashpoint"
    return json.loads((cache / "seed").read_text()), json.loads((cache / "schedules").read_text())


def test_chaos_seed_last_draws_exactly_the_previous_schedules(pytester: pytest.Pytester, project: Path) -> None:
    args = (str(project / "cases" / SEED), "--chaos", "--crashpoint-schedules", "4", "-p", "cacheprovider",
            "-k", "schedules")  # only the search item (the 13 kill items are collected, not run)
    first = pytester.runpytest(*args)
    first.assert_outcomes(passed=1)
    seed, drawn = _schedules(pytester)
    first.stdout.fnmatch_lines([f"*crashpoint: chaos seed {seed}*"])
    assert len(drawn["approval_timeout_after_refund_draft"]) == 4
    again = pytester.runpytest(*args, "--chaos-seed", "last")
    again.stdout.fnmatch_lines([f"*crashpoint: chaos seed {seed}*"])
    assert _schedules(pytester) == (seed, drawn)
    other = pytester.runpytest(*args, "--chaos-seed", str((seed + 1) % 2**32))
    other.assert_outcomes(passed=1)
    assert _schedules(pytester)[1] != drawn


def test_a_failing_schedule_is_shrunk_written_and_given_a_one_line_repro(pytester: pytest.Pytester,
                                                                         project: Path) -> None:
    case = project / "cases" / "cancel_while_waiting_compensates_draft.yaml"
    result = pytester.runpytest(str(case), "--chaos", "--crashpoint-schedules", "5", "--chaos-seed", "11",
                                "--crashpoint-engine", "variants.engines:NoCompensationOnCancel", "-k", "schedules")
    result.assert_outcomes(failed=1)
    text = result.stdout.str()
    assert "FAILS with" in text and "after shrinking" in text
    line = next(x for x in text.splitlines() if "reproduce: crashpoint run" in x)
    assert ".crashpoint/repro/cancel_while_waiting_compensates_draft_gen_" in line
    assert line.rstrip().endswith("--crash none --engine variants.engines:NoCompensationOnCancel")
    assert "--chaos-seed 11" in text


def test_a_bad_chaos_seed_is_a_usage_error(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project / "cases" / SEED), "--chaos", "--chaos-seed", "soon")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--chaos-seed: expected an integer or 'last', got 'soon'*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()
