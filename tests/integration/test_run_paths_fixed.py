"""Paths given to ``crashpoint run`` are resolved when it starts (issue 27 item 9: with ``--executor threads``, code
under test that changed directory sent ``--json out.json`` to ``/out.json``): here each run changes the process's
working directory (as client code running in a pool thread may), and ``--json``, ``--save-traces`` and
``--results-db`` still land where the command was started."""

from __future__ import annotations

import os
from pathlib import Path

from crashpoint.harness.cli.main import ExitCode, main
from crashpoint.harness.run import sweep as sweep_module

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "scenarios" / "refunds" / "cases" / "approval_timeout_after_refund_draft.json"


def test_a_chdir_in_a_run_moves_no_output(tmp_path: Path, monkeypatch) -> None:
    start, elsewhere = tmp_path / "start", tmp_path / "elsewhere"
    start.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(start)
    original = sweep_module._pack_run

    def moving(run_dir, *args):
        os.chdir(elsewhere)  # what a team's code in a pool thread may do
        return original(run_dir, *args)

    monkeypatch.setattr(sweep_module, "_pack_run", moving)
    code = main(["run", str(SEED), "--crash-point", "after_checkpoint:refund_draft", "--executor", "threads",
                 "--json", "out.json", "--save-traces", "traces", "--results-db", "sqlite:///results.db", "-q"])
    assert code == ExitCode.OK
    assert (start / "out.json").is_file() and (start / "results.db").is_file()
    assert list((start / "traces").iterdir())
    assert sorted(p.name for p in elsewhere.iterdir()) == []
