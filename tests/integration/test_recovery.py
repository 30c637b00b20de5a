"""Recovery under concurrency: two workers started at once on one store never run the same step twice."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from crashpoint.engine import Engine, WorkflowDefinition
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.data import refund_input
from crashpoint.fakes.ledger import Ledger
from crashpoint.harness.process import crashpoints

WORKFLOW = Path(__file__).resolve().parents[2] / "scenarios" / "refunds" / "workflows" / "refund.yaml"
N = 8


class _NoTools:
    def call(self, tool, args, idempotency_key):  # pragma: no cover - client side never calls tools
        raise AssertionError(tool)


def _prepare(run_dir: Path) -> None:
    """N approved refund workflows, accepted but not started, in one store."""
    run_dir.mkdir()
    ledger = Ledger(run_dir / "ledger.db")
    engine = Engine(run_dir / "engine.db", _NoTools(), VirtualClock(ledger))
    engine.deploy(WorkflowDefinition.from_dict(yaml.safe_load(WORKFLOW.read_text())))
    for n in range(N):
        engine.start(f"wf-{n}", "refund", refund_input(n))
        engine.approve(f"wf-{n}", "refund_approval", granted=True, by="test")  # before the wait: kept in the inbox
        ledger.record_decision("refund_approval", True, "test", VirtualClock(ledger).now())
    engine.close()
    ledger.close()


def _two_workers(run_dir: Path, engine: str) -> list[int]:
    argv = [sys.executable, "-m", "crashpoint.engine.worker", "--db", str(run_dir / "engine.db"),
            "--world", "variants.worlds:slow", "--world-arg", str(run_dir), "--engine", engine,
            "--probe", "crashpoint.harness.process.crashpoints:probe", "--probe-arg", crashpoints.probe_arg(run_dir, None)]
    procs = [subprocess.Popen(argv + ["--worker-id", f"w{i}"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
             for i in range(2)]
    return [p.wait(timeout=120) for p in procs]


def _repeated_calls(run_dir: Path) -> Counter:
    ledger = Ledger(run_dir / "ledger.db")
    try:
        return Counter((c.tool, c.idempotency_key) for c in ledger.calls() if c.outcome != "applied")
    finally:
        ledger.close()


def test_two_recovering_workers_never_run_the_same_step(tmp_path: Path) -> None:
    _prepare(tmp_path / "run")
    assert _two_workers(tmp_path / "run", "crashpoint.engine.engine:Engine") == [0, 0]
    engine = Engine(tmp_path / "run" / "engine.db", _NoTools(), VirtualClock(tmp_path / "run" / "ledger.db"))
    assert {engine.status(f"wf-{n}").status for n in range(N)} == {"succeeded"}
    workers = {e["worker"] for n in range(N) for e in engine.trace(f"wf-{n}") if e["kind"] == "workflow_resumed"}
    engine.close()
    assert _repeated_calls(tmp_path / "run") == Counter()  # every call happened exactly once
    assert workers <= {"w0", "w1"}


def test_without_leases_two_workers_repeat_steps(tmp_path: Path) -> None:
    """The same test fails on an engine without leases: it is able to see the bug it looks for."""
    _prepare(tmp_path / "run")
    _two_workers(tmp_path / "run", "variants.engines:NoLease")
    assert sum(_repeated_calls(tmp_path / "run").values()) > 0


@pytest.mark.parametrize("first", ["after_effect:refunds.draftRefundRequest", "before_checkpoint:refund_issued"])
def test_a_killed_worker_leaves_no_lease_behind(tmp_path: Path, first: str) -> None:
    run_dir = tmp_path / "run"
    _prepare(run_dir)
    argv = [sys.executable, "-m", "crashpoint.engine.worker", "--db", str(run_dir / "engine.db"),
            "--world", "crashpoint.fakes.world:build", "--world-arg", str(run_dir),
            "--probe", "crashpoint.harness.process.crashpoints:probe", "--probe-arg", crashpoints.probe_arg(run_dir, first)]
    assert subprocess.run(argv, stdout=subprocess.DEVNULL).returncode == -9
    assert subprocess.run(argv, stdout=subprocess.DEVNULL).returncode == 0
    engine = Engine(run_dir / "engine.db", _NoTools(), VirtualClock(run_dir / "ledger.db"))
    assert {engine.status(f"wf-{n}").status for n in range(N)} == {"succeeded"}
    engine.close()


def test_crash_during_recovery_sweep_kills_twice_and_passes(tmp_path: Path) -> None:
    """``--crash recovery``: each run is killed at A, then at B while the new worker recovers."""
    from crashpoint.harness.adapters.reference import ReferenceAdapter
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.judge.document import sweep_data
    from crashpoint.harness.run.sweep import sweep

    pack, cases = load_target(WORKFLOW.parents[1] / "cases" / "refund_denied_compensates_draft.yaml")
    result = sweep(pack, cases, ReferenceAdapter(), crash="recovery", pairs=12, jobs=2)
    doubles = [r for r in result.results if r.crash_point and " >> " in r.crash_point]
    assert len(doubles) == 12
    assert all(r.outcome.kills == 2 and r.outcome.crash_fired for r in doubles)
    assert {r.verdict for r in result.results} == {"passed"}
    data = sweep_data(result)
    assert data["summary"]["recovery_pairs"] == 12
    assert data["summary"]["metrics"]["crash_points_covered"] == 1.0


def test_sampled_sweep_covers_each_crash_point_once_however_many_runs_kill_there() -> None:
    """``--crash sampled`` kills at some points more than once (a recovery pair, a recovery by 3
    workers); coverage counts distinct points, so a full sweep is 100%, never more (it printed 107.7%)."""
    from crashpoint.harness.adapters.reference import ReferenceAdapter
    from crashpoint.harness.judge.document import sweep_data
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.run.sweep import sweep

    pack, cases = load_target(WORKFLOW.parents[1] / "cases" / "refund_denied_compensates_draft.yaml")
    result = sweep(pack, cases, ReferenceAdapter(), crash="sampled", jobs=2)
    assert any(r.crash_point and (" >> " in r.crash_point or "||" in r.crash_point) for r in result.results)
    assert {r.verdict for r in result.results} == {"passed"}
    assert sweep_data(result)["summary"]["metrics"]["crash_points_covered"] == 1.0
