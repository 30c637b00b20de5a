"""A DBOS app that configures DBOS itself when its module is imported, as DBOS's quickstart does
(``DBOS(config={"name": ..., "system_database_url": "sqlite:///app.sqlite"})`` at module level), runs under crashpoint
as one whose ``main`` crashpoint replaces: the worker rebuilds DBOS with the team's options and the run's own system
database, pinned application version and executor id (what it does when it creates DBOS itself), and says so in the
run's notes. Before, the team's instance won (DBOS keeps the first one): every run used the team's
``app.sqlite`` in the project folder, left it there, and its golden run failed with misleading findings (``ended
pending ... application version 8c74...`` under the team's hashed version, ``target.durable_before_effect``:
crashpoint read an empty system database, ``an error ... never reached``)."""

from __future__ import annotations

import sqlite3
import textwrap
from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("dbos"), pytest.mark.slow]  # real DBOS workers, 10-30 s a run at load 5-25

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

APP = '''
from dbos import DBOS

import crashpoint

DBOS(config={"name": "team-app", "system_database_url": "sqlite:///team_app.sqlite", "application_version": "v7"})


@crashpoint.effect("refund_card", key="k")
def refund_card(order, k=None):
    return {"refunded": order}


@DBOS.step()
def refund(order):
    return refund_card(order, k=f"refund-{DBOS.workflow_id}")


@DBOS.workflow()
def cancel(order):
    verdict = DBOS.recv("manager", timeout_seconds=600)
    if verdict and verdict.get("ok"):
        return {"status": "cancelled", "refund": refund(order)}
    return {"status": "rejected"}
'''


def _project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Target]:
    project = tmp_path / "project"
    project.mkdir()
    (project / "team_app.py").write_text(textwrap.dedent(APP).lstrip())
    monkeypatch.chdir(project)  # crashpoint run from the team's folder: a relative sqlite URL would land here
    target = Target.from_data({
        "target": "team-config", "engine": "dbos", "entry": "team_app:cancel", "pythonpath": [str(project)],
        "inputs": [{"thread": "o1", "input": "77"}], "human": {"manager": [{"resume": {"ok": True}}]},
        "gates": {"refund_card": "manager"}, "expect": {"o1": {"status": "finished", "values": {"output": {
            "status": "cancelled"}}}}, "dbos": {"settle_s": 10}, "budget_s": 120})
    return project, target


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*") if "__pycache__" not in p.parts}


def test_a_module_level_dbos_config_runs_on_the_runs_own_database(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    project, target = _project(tmp_path, monkeypatch)
    run_dir = tmp_path / "run"
    r = run_one(target, target.cases[0], "sync", run_dir, None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures], r.notes)
    assert _files(project) == {"team_app.py"}, _files(project)  # nothing written into the team's folder
    with sqlite3.connect(run_dir / "dbos.sqlite") as db:  # the run's own system database, the pinned version
        rows = db.execute("SELECT workflow_uuid, status, application_version FROM workflow_status").fetchall()
    assert rows == [("o1", "SUCCESS", "crashpoint-pinned")], rows
    said = [n for n in r.notes if "DBOS(config=...)" in n]
    assert len(said) == 1 and "team_app.py:5" in said[0] and "sqlite:///team_app.sqlite" in said[0], r.notes


def test_a_module_level_dbos_config_recovers_after_a_kill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project, target = _project(tmp_path, monkeypatch)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", "after_effect:refund_card", None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures], r.notes)
    assert r.outcome.kills == 1 and [c.outcome for c in r.outcome.calls] == ["applied", "duplicate"], r.outcome.calls
    assert _files(project) == {"team_app.py"}, _files(project)


def test_a_module_that_launches_dbos_at_import_is_an_error_that_says_so(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    project, target = _project(tmp_path, monkeypatch)
    code = (project / "team_app.py").read_text()
    (project / "team_app.py").write_text(code.replace('"v7"})\n', '"v7"})\nDBOS.launch()\n', 1))
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "error", (r.verdict, r.error, [f.message for f in r.failures])
    assert "DBOS.launch() called at" in (r.error or "") and "team_app.py:6" in r.error, r.error
    assert _files(project) == {"team_app.py"}, _files(project)  # it never launched on the team's database
