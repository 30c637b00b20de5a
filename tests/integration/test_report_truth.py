"""Reports that do not mislead (issue 17, "Reports mislead"): the stored adapter is the real one, a
suggested command reproduces, failures are grouped, the weekly report keys by engine."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.cli.main import main
from crashpoint.reports.store import ResultStore
from crashpoint.scenarios import builtin_pack

REFUNDS = builtin_pack("refunds")


def test_stored_adapter_column_names_the_real_adapter_not_the_guard(tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.db"
    case = REFUNDS / "cases" / "refund_approved_happy_path.yaml"
    spec = "crashpoint.harness.adapters.reference:ReferenceAdapter"
    assert main(["run", str(case), "--crash", "none", "--adapter", spec, "--results-db", str(db),
                 "--no-progress"]) == 0
    store = ResultStore(str(db))
    run = store.load_run("latest")["run"]
    assert run["adapter"] == "ReferenceAdapter"
