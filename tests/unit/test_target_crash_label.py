"""A target sweep reports the crash selection it ran: ``crash="sampled"`` with ``crash_points`` runs those points
once each, no sampled recovery pairs (what ``every`` does), so its result (the CLI's second line, ``--json``'s
``crash``) says ``every``, not ``sampled`` (a pasted repro line printed ``--crash sampled: ... 0 kill(s) during a
recovery`` before)."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.engines.langgraph import LangGraph
from crashpoint.harness.run import target_sweep as sweep_mod
from crashpoint.harness.run.target_driver import TargetOutcome
from crashpoint.harness.model.results import RunResult, unit_id
from crashpoint.harness.run.target_sweep import sweep
from crashpoint.harness.load.target import Target

POINTS = [f"node:a@n{i}" for i in range(12)]


def _fake_run_one(target, case, durability, run_dir, crash_point, golden, repeat=1, **_):
    out = TargetOutcome(case.name, durability, crash_point, run_dir, threads={"a": {"status": "finished"}},
                        crash_points=list(POINTS), fired=[crash_point] if crash_point else [],
                        kills=len(crash_point.split(" >> ")) if crash_point else 0)
    return RunResult(unit_id(case.name, durability), crash_point, "passed", outcome=out, variant=durability,
                     repeat=repeat)


def _sweep(tmp_path: Path, monkeypatch, **kw):
    monkeypatch.setattr(sweep_mod, "run_one", _fake_run_one)
    monkeypatch.setattr(LangGraph, "version", lambda self: "langgraph test")
    target = Target(name="t", entry="m:g", inputs=[{"thread": "a", "input": 1}])
    return sweep(target, durability=["sync"], warm=False, workers=2, workdir=tmp_path, **kw)


def test_sampled_with_crash_points_is_reported_as_every(tmp_path: Path, monkeypatch) -> None:
    result = _sweep(tmp_path, monkeypatch, crash="sampled", crash_points=[POINTS[3]])
    assert result.runs_by_kind()["double"] == 0
    from crashpoint.harness.judge.document import sweep_data

    assert result.crash == "every" and sweep_data(result)["crash"] == "every"


def test_sampled_without_crash_points_stays_sampled(tmp_path: Path, monkeypatch) -> None:
    result = _sweep(tmp_path, monkeypatch, crash="sampled")
    assert result.crash == "sampled" and result.runs_by_kind()["double"] > 0
