"""The fast crash modes give the real kill's verdicts.

- ``kill`` (forked workers, crash runs from the golden snapshot) against ``kill-cold`` (a new
  interpreter per worker, every run from its start request): the same outcome, field by field.
- ``inprocess`` (simulated crashes) against ``kill``: the same verdict and the same failing oracles
  on every crash point of every built-in case, on the reference engine and on broken engines.
- And where the simulated crash is blind (state kept in the process), the real kill is not.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.harness.adapters import ReferenceAdapter
from crashpoint.harness.run.pack_driver import Driver
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import PACKS_DIR, builtin_pack

BUILTIN_PACKS = sorted(p.parent.name for p in PACKS_DIR.glob("*/pack.yaml"))

HAPPY = "refund_approved_happy_path"


def _verdicts(pack_name: str, tmp_path: Path, mode: str, engine: str | None = None,
              cases: list[str] | None = None) -> dict[tuple[str, str | None], tuple[str, tuple[str, ...]]]:
    pack, all_cases = load_target(builtin_pack(pack_name))
    chosen = [c for c in all_cases if cases is None or c.case_id in cases]
    adapter = ReferenceAdapter(engine) if engine else ReferenceAdapter()
    result = sweep(pack, chosen, adapter, crash_mode=mode, workdir=tmp_path / mode, executor="threads", jobs=2)
    return {(r.case_id, r.crash_point): (r.verdict, tuple(sorted({f.oracle for f in r.failures})))
            for r in result.results}


def _outcome_key(o):  # type: ignore[no-untyped-def]
    return (o.status, o.stop_reason, o.pending_approval, [(t["kind"], t.get("task"), t["at"]) for t in o.trace],
            [(c["tool"], c["idempotency_key"], c["outcome"], c["args"]) for c in o.calls], o.decisions,
            o.crash_points, o.crash_fired, o.workers, o.kills, o.deliveries, o.deliveries_log, o.notes, o.clock_now)


@pytest.mark.slow
def test_a_crash_run_from_the_golden_snapshot_is_the_crash_run_from_the_start(tmp_path: Path) -> None:
    pack, cases = load_target(builtin_pack("refunds"))
    chosen = [c for c in cases if c.case_id in (HAPPY, "cancel_while_waiting_compensates_draft",
                                                "draft_response_lost_retried_with_same_key")]
    fast, cold = Driver(ReferenceAdapter(), pack), Driver(ReferenceAdapter(), pack, crash_mode="kill-cold")
    compared = from_snapshot = 0
    for case in chosen:
        golden = fast.run(case, tmp_path / case.case_id / "golden")
        assert golden.snapshots, "a golden run keeps a snapshot before each worker segment"
        for n, point in enumerate(golden.crash_points[::3]):
            a = fast.run(case, tmp_path / case.case_id / f"fast{n}", point, golden)
            b = cold.run(case, tmp_path / case.case_id / f"cold{n}", point, golden)
            assert b.started_from is None
            from_snapshot += a.started_from is not None and a.started_from > 0
            assert _outcome_key(a) == _outcome_key(b), (case.case_id, point)
            compared += 1
    assert compared >= 15 and from_snapshot >= 5  # later segments really started from a snapshot


@pytest.mark.slow
@pytest.mark.parametrize("pack_name", [p for p in BUILTIN_PACKS if p != "ads_audit"])
def test_inprocess_verdicts_equal_real_kill_verdicts(pack_name: str, tmp_path: Path) -> None:
    real, simulated = _verdicts(pack_name, tmp_path, "kill"), _verdicts(pack_name, tmp_path, "inprocess")
    assert real.keys() == simulated.keys()
    assert len(real) > 100
    differ = {k: (real[k], simulated[k]) for k in real if real[k] != simulated[k]}
    assert not differ


@pytest.mark.slow
@pytest.mark.skipif("ads_audit" not in BUILTIN_PACKS, reason="the ads_audit pack is not built in yet")
def test_inprocess_verdicts_equal_real_kill_verdicts_on_ads_audit(tmp_path: Path) -> None:
    real, simulated = _verdicts("ads_audit", tmp_path, "kill"), _verdicts("ads_audit", tmp_path, "inprocess")
    assert real == simulated


# the fast loop keeps one broken engine (two sweeps each); the full suite runs all three
@pytest.mark.parametrize("engine", [pytest.param("variants.engines:LostArgOnResume", marks=pytest.mark.slow),
                                    "variants.engines:ApprovalInMemory",
                                    pytest.param("variants.engines:EffectBeforeCheckpointNoKey", marks=pytest.mark.slow)])
def test_inprocess_finds_what_the_real_kill_finds_on_broken_engines(engine: str, tmp_path: Path) -> None:
    cases = [HAPPY, "draft_response_lost_retried_with_same_key"]
    real = _verdicts("refunds", tmp_path, "kill", engine, cases)
    simulated = _verdicts("refunds", tmp_path, "inprocess", engine, cases)
    assert any(v[0] == "failed" for v in real.values())
    assert real == simulated


def test_state_kept_in_the_process_fools_the_simulated_crash_not_the_real_kill(tmp_path: Path) -> None:
    engine = "variants.misbehaving:GrantInProcessMemory"
    real = _verdicts("refunds", tmp_path, "kill", engine, [HAPPY])
    simulated = _verdicts("refunds", tmp_path, "inprocess", engine, [HAPPY])
    assert real[(HAPPY, None)][0] == "passed"  # in one process the bug does not show
    caught = [k for k, v in real.items() if v[0] == "failed"]
    assert caught and all(simulated[k][0] == "passed" for k in caught)


@pytest.mark.slow  # two sweeps of a case without snapshots (every crash run from the start); the full suite runs it
def test_a_golden_run_that_does_not_repeat_itself_keeps_no_snapshot(tmp_path: Path) -> None:
    """An engine that mints random keys cannot reach a golden state again: its crash runs replay the
    prefix, and the verdicts stay those of runs from the start (13 of 14 fail on the seed case)."""
    engine = "variants.engines:EffectBeforeCheckpointNoKey"
    pack, cases = load_target(builtin_pack("refunds"))
    case = next(c for c in cases if c.case_id == "approval_timeout_after_refund_draft")
    golden = Driver(ReferenceAdapter(engine), pack).run(case, tmp_path / "golden")
    assert golden.snapshots == [] and any("differed" in note for note in golden.notes)
    fast = _verdicts("refunds", tmp_path / "a", "kill", engine, [case.case_id])
    cold = _verdicts("refunds", tmp_path / "b", "kill-cold", engine, [case.case_id])
    assert fast == cold and sum(v[0] == "failed" for v in fast.values()) == 13
