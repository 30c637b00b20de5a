"""``crashpoint search TARGET.yaml`` for real on the LangGraph example (issue 23 item 4): generated kill schedules
find the no_key variant's double refund and shrink it to the one kill that shows it, whose repro file fails on its
own under ``crashpoint run``; the correct graph passes the same schedules (no false alarm)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.cli.main import main  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run import schedule_search as ss  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")
SEED = ss.case_seed(1, "approved[sync]")  # what `crashpoint search ... --seed 1` gives the unit approved[sync]


def test_a_kill_search_finds_and_shrinks_the_double_refund_of_no_key(tmp_path: Path, capsys) -> None:
    broken = dataclasses.replace(TARGET, entry="langgraph_refund.variants:no_key")
    r = ss.search_target_case(broken, broken.case("approved"), "sync", seed=SEED, budget=25, workdir=tmp_path / "s",
                              max_faults=3, kinds=["kill"])
    assert r.found is not None and r.golden_error is None, ss.summary_lines(r)
    assert 1 <= len(r.found.schedule) <= 3 and len(r.found.schedule) <= len(r.first or [])
    assert r.found.verdict == "failed" and "side_effects.at_most_once" in {f.rule for f in r.found.failures}
    assert all(f["kind"] == "kill" for f in r.found.schedule) and r.found.case.like_fault_free  # kills are masked
    path = ss.write_target_repro(r, broken, tmp_path / "repro")
    assert ss.write_target_repro(r, broken, tmp_path / "repro") == path  # the same repro again: the same file
    assert ss.target_repro_line(path) == f"crashpoint run {path} --crash none"
    capsys.readouterr()
    assert main(["run", str(path), "--crash", "none", "--workdir", str(tmp_path / "rerun")]) == 1  # fails alone
    assert "side_effects.at_most_once" in capsys.readouterr().out


def test_the_correct_graph_passes_the_same_kill_schedules(tmp_path: Path) -> None:
    r = ss.search_target_case(TARGET, TARGET.case("approved"), "sync", seed=SEED, budget=11, workdir=tmp_path / "s",
                              max_faults=3, kinds=["kill"])
    assert r.golden_error is None and r.found is None, ss.summary_lines(r)
    assert r.generated == r.runs >= 5 and r.vacuous < r.generated  # no shrinking: nothing failed
