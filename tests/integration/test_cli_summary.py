"""``crashpoint run`` prints a summary a person reads (issue 17, "Output a person reads": 564 lines for
an all-green ``crashpoint run refunds``, a table per case and a row per run): by default a row per
case, the coverage, the metrics and the failures grouped; the per-run tables with ``-v``."""

from __future__ import annotations

import pytest

from crashpoint.harness.cli.main import main
from crashpoint.scenarios import builtin_pack

CASE = str(builtin_pack("refunds") / "cases" / "duplicate_start_request.yaml")


def test_default_output_has_a_row_per_case_not_per_run(capsys) -> None:
    assert main(["run", CASE, "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "kill@" not in out and "golden (no kill)" not in out, "per-run rows in the default output"
    row = next(line for line in out.splitlines() if line.startswith("duplicate_start_request "))
    runs, passed = row.split()[1:3]
    assert int(runs) > 10 and runs == passed
    assert "durability coverage" in out and "resume success" in out
    assert len(out.splitlines()) < 50, f"{len(out.splitlines())} lines for one green case"


@pytest.mark.slow  # a second full sweep of the case (the default output's test stays in the fast loop)
def test_verbose_adds_the_per_run_tables(capsys) -> None:
    assert main(["run", CASE, "--no-progress", "-v"]) == 0
    out = capsys.readouterr().out
    assert "golden (no kill)" in out and out.count("kill@") > 10
