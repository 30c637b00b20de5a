"""Exit codes of the ``crashpoint`` command: one test per code (docs/reference/cli.md, "Exit codes")."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crashpoint.errors import CaseError, EngineCrashed, StoreError, UsageError, WorkerTimeout
from crashpoint.fakes.ledger import Ledger
from crashpoint.harness.cli import main as cli
from crashpoint.harness.cli.main import ExitCode, exit_code_of, main
from crashpoint.reports.results_store import ResultStore

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "scenarios" / "refunds" / "cases" / "approval_timeout_after_refund_draft.json"


def test_the_codes_are_an_int_enum_with_the_documented_values() -> None:
    assert [(c.name, int(c)) for c in ExitCode] == [("OK", 0), ("FAILED", 1), ("USAGE", 2), ("INTERNAL", 3),
                                                    ("INTERRUPTED", 130)]
    page = (ROOT / "docs" / "reference" / "cli.md").read_text()
    for code in ExitCode:
        assert f"| {int(code)} |" in page, code


@pytest.mark.parametrize("exc, code", [
    (CaseError("bad", file="x.yaml", line=3, field="events"), ExitCode.USAGE),
    (UsageError("--jobs 0"), ExitCode.USAGE),
    (StoreError("r.db: damaged", file="r.db"), ExitCode.INTERNAL),
    (EngineCrashed("worker exited with 1"), ExitCode.FAILED),
    (WorkerTimeout("60 s"), ExitCode.FAILED),
    (RuntimeError("a bug"), ExitCode.INTERNAL),
])
def test_exit_code_of_each_kind_of_error(exc: BaseException, code: ExitCode) -> None:
    assert exit_code_of(exc) is code


def test_0_when_every_run_passed() -> None:
    assert main(["run", str(SEED), "--crash", "none", "-q"]) == ExitCode.OK


def test_1_when_a_run_did_not_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", str(SEED), "--crash-point", "after_checkpoint:nowhere", "-q"]) == ExitCode.FAILED
    assert "Traceback" not in capsys.readouterr().err


def test_2_for_bad_input_naming_file_line_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "nope.yaml")]) == ExitCode.USAGE
    assert main(["run", str(SEED), "--workers", "0"]) == ExitCode.USAGE
    (err,) = capsys.readouterr().err.strip().splitlines()[-1:]
    assert err == "crashpoint: error: --workers (--jobs) must be >= 1, got 0"


def _damaged_store(tmp_path: Path) -> Path:
    path = tmp_path / "r.db"
    store = ResultStore(str(path))
    store.begin_run({"engine": "reference"})
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("pragma wal_checkpoint(truncate)")
    raw = path.read_bytes()
    path.write_bytes(raw[:4096] + b"\xff" * (len(raw) - 4096))  # pages after the first overwritten
    return path


@pytest.mark.parametrize("argv", [["report", "--db", "{db}"], ["report", "--list", "--db", "{db}"],
                                  ["run", str(SEED), "--crash", "none", "-q", "--results-db", "{db}"]])
def test_3_for_a_store_that_cannot_be_read_or_written_with_one_line_naming_it(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = _damaged_store(tmp_path)
    assert main([a.replace("{db}", str(db)) for a in argv]) == ExitCode.INTERNAL
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"crashpoint: error: results database {db}: "), err


def test_a_damaged_ledger_is_a_store_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "ledger.db"
    path.write_bytes(b"this is no database" * 100)
    with pytest.raises(StoreError, match=f"{path}: not a usable ledger") as info:
        Ledger(path)
    assert info.value.file == str(path)


def test_3_with_a_traceback_for_a_bug(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    def broken(args: object) -> int:
        raise KeyError("oops")

    monkeypatch.setattr(cli, "_cmd_validate", broken)
    assert main(["validate", "refunds"]) == ExitCode.INTERNAL
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert err.strip().splitlines()[-1] == ("crashpoint: internal error (a bug in crashpoint; please report it with "
                                            "the traceback above): KeyError: 'oops'")
