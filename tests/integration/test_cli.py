"""The command line: exit codes, bad input, the JSON document."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import ExitCode, main

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "scenarios" / "refunds"
SEED = PACK / "cases" / "approval_timeout_after_refund_draft.json"


@pytest.fixture()
def pack_copy(tmp_path: Path) -> Path:
    """A copy of the refunds pack with only the seed case, to break at will."""
    dst = tmp_path / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    shutil.copy(SEED, dst / "cases")
    return dst


def test_validate_builtin_pack_by_path_and_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(PACK)]) == ExitCode.OK
    assert main(["validate", "refunds"]) == ExitCode.OK
    assert "31 case(s) valid" in capsys.readouterr().out


def test_run_golden_only_writes_the_json_document(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert main(["run", str(SEED), "--crash", "none", "--json", str(out), "-q"]) == ExitCode.OK
    data = json.loads(out.read_text())
    assert set(data["summary"]) >= {"runs", "passed", "failed", "errors", "crash_points", "metrics"}
    assert data["summary"]["runs"] == 1 and data["summary"]["passed"] == 1
    assert data["summary"]["crash_points"] == 13  # listed by the golden run even when not swept
    (result,) = data["results"]
    assert result["case_id"] == "approval_timeout_after_refund_draft"
    assert result["crash_point"] == "none" and result["verdict"] == "passed" and result["failures"] == []
    assert result["final_status"] == "escalated"


def test_run_one_crash_point_kills_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    code = main(["run", str(SEED), "--crash-point", "after_checkpoint:refund_draft", "--json", str(out), "-q"])
    assert code == ExitCode.OK
    killed = [r for r in json.loads(out.read_text())["results"] if r["crash_point"] != "none"]
    assert len(killed) == 1
    assert killed[0]["crash_fired"] and killed[0]["kills"] == 1 and killed[0]["workers"] >= 3


def test_a_crash_point_never_reached_is_an_error_not_a_pass(tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    code = main(["run", str(SEED), "--crash-point", "after_checkpoint:nowhere", "--json", str(out), "-q"])
    assert code == ExitCode.FAILED
    (bad,) = [r for r in json.loads(out.read_text())["results"] if r["verdict"] != "passed"]
    assert bad["verdict"] == "error" and "never reached" in bad["error"]
    assert "reproduce: crashpoint run" in capsys.readouterr().out


BAD_CASES = {
    "syntax": ("case_id: broken\nevents: [\n  {type: restart\nexpected: {}\n", 4, None),
    "unknown_field": ("case_id: c1\nevents: []\nexpected:\n  final_status: succeeded\n  colour: red\n", 5,
                      "expected.colour"),
    "wrong_type": ("case_id: c1\nevents:\n  - {type: tool_failure, tool: refunds.issueRefund, retryable: 'yes'}\n"
                   "expected: {}\n", 3, "events[0].retryable"),
    "unknown_workflow": ("case_id: c1\nworkflow: payroll\nevents: []\nexpected: {}\n", 2, "workflow"),
}


@pytest.mark.parametrize("kind", sorted(BAD_CASES))
def test_bad_case_exits_2_names_file_line_field_and_writes_nothing(
        kind: str, pack_copy: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text, line, field = BAD_CASES[kind]
    bad = pack_copy / "cases" / "bad.yaml"
    bad.write_text(text)
    out = tmp_path / "r.json"
    assert main(["run", str(pack_copy), "--json", str(out)]) == ExitCode.USAGE
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert f"bad.yaml:{line}:" in err[0]
    if field:
        assert f"field {field}:" in err[0]
    assert not out.exists()
    assert main(["validate", str(bad)]) == ExitCode.USAGE


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    assert main(["run", str(tmp_path / "missing.yaml")]) == ExitCode.USAGE
    assert main(["run", "no-such-pack"]) == ExitCode.USAGE
    assert main(["run", str(SEED), "--crash", "sometimes"]) == ExitCode.USAGE
    assert main(["run", str(SEED), "--json", str(tmp_path / "no" / "dir.json")]) == ExitCode.USAGE
    assert main([]) == ExitCode.USAGE
