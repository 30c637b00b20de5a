"""One verdict path for targets: a run of a team's graph gets the same verdict and the same findings whether
it ran under ``crashpoint run TARGET.yaml`` or under ``pytest --chaos`` (the ``crashpoint_sweep`` fixture),
because both reach it through :func:`crashpoint.harness.judge.verdict.judge_target`."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.api import EffectCall  # noqa: E402
from crashpoint.harness.judge.verdict import judge_target  # noqa: E402
from crashpoint.harness.run.target_driver import TargetOutcome, TargetUnsupported  # noqa: E402
from crashpoint.harness.load.target import Target, TargetCase  # noqa: E402

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[2]
POINT = "after_effect:issue_refund"


def _target_file(folder: Path) -> Path:
    """The example's target, pointed at the ``no_key`` variant (the refund issued twice after a kill at POINT)."""
    text = (ROOT / "examples/langgraph_refund/target.yaml").read_text()
    text = text.replace("entry: langgraph_refund.graph:builder", "entry: langgraph_refund.variants:no_key")
    text = text.replace('pythonpath: [".."]', f"pythonpath: [{json.dumps(str(ROOT / 'examples'))}]")
    path = folder / "target.yaml"
    path.write_text(text)
    return path


def _verdicts(runs: list[dict]) -> list[tuple[str, str, list[str]]]:
    return [(r["crash_point"], r["verdict"], sorted({f["rule"] for f in r["failures"]})) for r in runs]


def test_the_cli_and_pytest_chaos_give_one_run_the_same_verdict(pytester: pytest.Pytester, tmp_path: Path) -> None:
    target = _target_file(tmp_path)
    report = tmp_path / "cli.json"
    cli = subprocess.run([sys.executable, "-m", "crashpoint", "run", str(target), "--case", "approved",
                          "--durability", "sync", "--crash-point", POINT, "--json", str(report)],
                         capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    from_cli = _verdicts(json.loads(report.read_text())["results"])

    out = pytester.path / "pytest.json"
    pytester.makepyfile(test_refund=f'''
import json

def test_sweep(crashpoint_sweep):
    result = crashpoint_sweep({str(target)!r}, cases=["approved"], durability=["sync"], crash_points=[{POINT!r}])
    from crashpoint.harness.judge.document import sweep_data
    with open({str(out)!r}, "w") as f:
        json.dump(sweep_data(result.result), f, default=str)
    assert result.passed, result.summary
''')
    run = pytester.runpytest_subprocess("--crashpoint-chaos", "-p", "no:ordeal", "-q")
    run.assert_outcomes(failed=1)
    from_pytest = _verdicts(json.loads(out.read_text())["results"])

    assert from_cli == from_pytest == [("none", "passed", []),
                                       (POINT, "failed", ["differential.same_effects", "side_effects.at_most_once",
                                                          "target.expected_effects"])  # the example's issue_refund: 1
                                       ], (from_cli, from_pytest)


def test_judge_target_decides_in_the_documented_order(tmp_path: Path) -> None:
    target = Target(name="t", entry="m:g", inputs=[{"thread": "a", "input": 1}])
    case = TargetCase()
    unsupported = judge_target(target, case, "sync", TargetUnsupported("no sync before 0.6"))
    broke = judge_target(target, case, "sync", RuntimeError("boom"))
    assert (unsupported.verdict, broke.verdict, broke.error) == ("unsupported", "error", "RuntimeError: boom")
    paid = EffectCall(1, "pay", "k-a", "d", {}, "applied", False, 1, "a", "n", None, True)
    quiet = TargetOutcome("default", "sync", None, tmp_path, threads={"a": {"status": "finished", "values": {}}},
                          calls=[paid])
    assert judge_target(target, case, "sync", quiet).verdict == "passed"
    idle = replace(quiet, calls=[])  # a golden run that called no effect tested none (as a pack's: vacuous)
    result = judge_target(target, case, "sync", idle)
    assert (result.verdict, result.error.split(":")[0]) == ("error", "the golden run made no tool call")
    typo = replace(quiet, faults_missed=["pay_refund fatal"])  # a case fault whose effect was never called
    result = judge_target(target, case, "sync", typo)
    assert (result.verdict, result.error) == ("error", "the case's faults never fired, so nothing was tested: "
                                                       "pay_refund fatal")
    missed = TargetOutcome("default", "sync", "node:a@x", tmp_path, threads=quiet.threads)
    assert judge_target(target, case, "sync", missed, crash_point="node:a@x", reached=False).verdict == "error"
    lonely = TargetOutcome("default", "sync", None, tmp_path, threads=quiet.threads, calls=[paid],
                           not_tested=["the duplicate start never overlapped"])
    result = judge_target(target, case, "sync", lonely)
    assert (result.verdict, result.error) == ("error", "the duplicate start never overlapped")


def test_the_fixture_sweeps_with_the_clis_default_crash_selection(pytester: pytest.Pytester) -> None:
    """``crashpoint_sweep(target)`` without ``crash`` makes the runs ``crashpoint run TARGET`` makes: before, it took
    ``sweep``'s default (``every``: no second kill during a recovery) where the CLI's is ``sampled``."""
    from crashpoint.harness.cli.main import build_parser

    cli_default = build_parser().parse_args(["run", "t.yaml"]).crash
    assert cli_default == "sampled"
    out = pytester.path / "options.json"
    pytester.makepyfile(test_default=f'''
import json
import crashpoint.harness.run.target_sweep as sweep_module
import crashpoint.harness.load.target_check as target_check
from crashpoint.harness.load.target import Target

class Done:
    passed, results = True, []
    def counts(self):
        return {{}}

def test_default(crashpoint_sweep, monkeypatch):
    seen = {{}}
    monkeypatch.setattr(sweep_module, "sweep", lambda target, **options: seen.update(options) or Done())
    monkeypatch.setattr(target_check, "check_target", lambda target, *a, **k: {{}})  # m:b imports nothing
    crashpoint_sweep(Target(name="t", entry="m:b", inputs=[{{"thread": "a", "input": 1}}]))
    crashpoint_sweep(Target(name="t", entry="m:b", inputs=[{{"thread": "a", "input": 1}}]), crash="every")
    with open({str(out)!r}, "w") as f:
        json.dump(seen["crash"], f)
    seen.clear()
    crashpoint_sweep(Target(name="t", entry="m:b", inputs=[{{"thread": "a", "input": 1}}]))
    with open({str(out)!r}, "a") as f:
        f.write(" " + json.dumps(seen["crash"]))
''')
    run = pytester.runpytest_subprocess("--crashpoint-chaos", "-p", "no:ordeal", "-q")
    run.assert_outcomes(passed=1)
    assert out.read_text().split() == ['"every"', f'"{cli_default}"']


def test_a_vacuous_golden_run_is_the_same_error_under_the_cli_and_pytest(pytester: pytest.Pytester,
                                                                          tmp_path: Path) -> None:
    """A target case whose fault never fires (a payment failure scripted on a path that never pays: the reviewer
    never answers) tested nothing: ``crashpoint run`` and ``pytest --chaos`` both call its golden run an ``error``
    with the same words, as a pack's case whose kill never fires is (test_one_verdict.py)."""
    text = _target_file(tmp_path).read_text().replace("langgraph_refund.variants:no_key", "langgraph_refund.graph:builder")
    text = text.replace("cases:\n", "cases:\n  - {name: idle-fault, human: {}, faults: [{effect: issue_refund, "
                                    "outcome: fatal}]}\n", 1)
    target = tmp_path / "target.yaml"
    target.write_text(text)
    report = tmp_path / "cli.json"
    cli = subprocess.run([sys.executable, "-m", "crashpoint", "run", str(target), "--case", "idle-fault",
                          "--crash", "none", "--json", str(report)], capture_output=True, text=True, timeout=600,
                         cwd=tmp_path)
    assert cli.returncode == 1, cli.stdout + cli.stderr
    (row,) = json.loads(report.read_text())["results"]
    out = pytester.path / "pytest.json"
    pytester.makepyfile(test_idle=f'''
import json

def test_sweep(crashpoint_sweep):
    result = crashpoint_sweep({str(target)!r}, cases=["idle-fault"], crash="none")
    (run,) = result.result.results
    with open({str(out)!r}, "w") as f:
        json.dump({{"verdict": str(run.verdict), "error": run.error}}, f)
    assert result.passed, result.summary
''')
    pytester.runpytest_subprocess("--crashpoint-chaos", "-q").assert_outcomes(failed=1)
    from_pytest = json.loads(out.read_text())
    assert (row["verdict"], row["error"]) == (from_pytest["verdict"], from_pytest["error"]) == (
        "error", "the case's faults never fired, so nothing was tested: issue_refund fatal"), (row, from_pytest)
