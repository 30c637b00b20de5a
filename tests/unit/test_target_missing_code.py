"""A target run on a machine that lacks the team's code (a Dask worker without the target's ``pythonpath``
folders) or its engine's packages is an ``error`` naming the machine and what is missing, never an import
traceback or a run of something else."""

from __future__ import annotations

import socket
from pathlib import Path

from crashpoint.harness.load.target import Target
from crashpoint.harness.run import target_sweep
from crashpoint.harness.run.target_sweep import _target_run, missing_code

ROOT = Path(__file__).resolve().parents[2]


def _target() -> Target:
    return Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")


def test_a_run_where_the_teams_code_is_missing_is_an_error_naming_the_folder(tmp_path: Path) -> None:
    target = _target()
    gone = str(tmp_path / "not-shipped")
    result = _target_run(tmp_path / "run", target, target.case("approved"), "sync", "after_effect:issue_refund",
                         None, 1, {}, (gone,))
    assert result.verdict == "error" and result.case_id == "approved[sync]"
    assert result.crash_point == "after_effect:issue_refund" and result.variant == "sync"
    assert gone in result.error and socket.gethostname() in result.error and "pythonpath" in result.error
    assert not (tmp_path / "run").exists()  # nothing ran


def test_a_missing_engine_package_is_named(monkeypatch) -> None:
    target = _target()
    engine = target_sweep.engine_for(target.engine)
    monkeypatch.setattr(type(engine), "packages", ("no-such-package-crashpoint",))
    assert "the engine's package no-such-package-crashpoint" in missing_code(target, ())


def test_the_sweeps_own_machine_has_what_it_needs() -> None:
    target = _target()
    subject = target_sweep.subject_of(target)
    assert subject._code == tuple(target.pythonpath)
    assert missing_code(target, subject._code) is None
