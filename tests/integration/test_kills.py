"""A crash point counts only when verified (issue 17 item 1, "Every verdict is earned").

Each misbehaving worker in ``tests/variants/kills.py`` passed every crash run before the harness
verified its kills; each must now give ``error`` ("the kill did not land") or a golden run that is
not ``passed``, while the reference engine's kills are recorded with the dead pid, its signal and
the new pid that resumed, in the result record and the JSON document.
"""

from __future__ import annotations

import os

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.certification import certify
from crashpoint.harness.process.kills import NOT_LANDED, check_worker
from crashpoint.harness.judge.metrics import aggregate
from crashpoint.harness.judge.record import stored_result
from crashpoint.harness.judge.document import sweep_data
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.process.crashpoints import ProbeEvent
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack
from variants import kills as variants
from verdicts import describe, unverified_kills

pytest_plugins = ("pytester",)

FATAL = "draft_fatal_failure"  # 6 crash points, one worker segment
HAPPY = "refund_approved_happy_path"  # an approval in the middle: two worker segments
POINT = "after_effect:refunds.draftRefundRequest"


def _sweep(adapter, case_id, tmp_path, only=(POINT,), crash_mode="kill"):
    pack, cases = load_target(builtin_pack("refunds"))
    return sweep(pack, [c for c in cases if c.case_id == case_id], adapter, only=only, jobs=2,
                 workdir=tmp_path, crash_mode=crash_mode)


def test_a_worker_that_never_calls_the_probe_is_not_a_pass(tmp_path):
    result = _sweep(variants.NeverProbes(), FATAL, tmp_path, only=())
    assert [r.verdict for r in result.results] == ["error"], describe(result.results)
    assert "passed no crash point" in result.results[0].error


def test_certify_on_a_worker_that_never_calls_the_probe_reaches_no_level(tmp_path):
    cert = certify("variants.kills:NeverProbes", builtin_pack("conformance"), jobs=2, workdir=tmp_path)
    assert cert["level"] == 0, [(c["claim"], c["verdict"]) for c in cert["claims"]]
    assert cert["summary"]["passed"] == 0 and cert["summary"]["kills_verified"] == 0
    assert not any(c["verdict"] == "passed" for c in cert["claims"])


def test_an_engine_that_truncates_the_crash_log_is_an_error(tmp_path):
    result = _sweep(variants.truncates_crash_log(), HAPPY, tmp_path)
    assert result.results and all(r.verdict == "error" for r in result.results), describe(result.results)
    assert all("the engine changed it" in r.error for r in result.results)


def test_a_probe_that_records_a_kill_without_dying_is_an_error(tmp_path):
    result = _sweep(variants.SurvivingProbeAdapter(), FATAL, tmp_path)
    golden, crashed = result.results
    assert golden.verdict == "passed"
    assert crashed.verdict == "error" and crashed.error.startswith(NOT_LANDED), describe(result.results)
    assert "exited with 0, not by SIGKILL" in crashed.error
    assert crashed.to_dict()["crash_fired"] is False and crashed.outcome.kill_log == []
    metrics = aggregate(result.results)["overall"]
    assert metrics["resume_success"] is None and metrics["crash_points_covered"] == 0


def test_a_kill_that_lands_on_a_supervisors_child_is_an_error(tmp_path):
    result = _sweep(variants.Supervisor(), FATAL, tmp_path)
    golden, crashed = result.results
    assert golden.verdict == "passed", describe(result.results)
    assert crashed.verdict == "error" and "the kill landed elsewhere" in crashed.error, describe(result.results)


@pytest.mark.parametrize("crash_mode", ["kill", "kill-cold"])
def test_every_kill_is_recorded_with_the_dead_pid_its_signal_and_the_new_pid(tmp_path, crash_mode):
    result = _sweep(ReferenceAdapter(), HAPPY, tmp_path, only=(POINT, "after_checkpoint:approval_request"),
                    crash_mode=crash_mode)
    assert [r.verdict for r in result.results] == ["passed"] * 3, describe(result.results)
    assert unverified_kills(result.results) == []
    document = sweep_data(result)
    for r, row in zip(result.results[1:], document["results"][1:]):
        (kill,) = row["kill_log"]
        assert kill["signal"] == "SIGKILL" and kill["crash_point"] == r.crash_point
        assert kill["resumed_by"] not in (None, kill["pid"], os.getpid())
        assert row["kill_problems"] == [] and stored_result(r)["kill_log"] == row["kill_log"]
    assert document["summary"]["kills_verified"] == 2


def test_a_simulated_crash_is_recorded_as_simulated(tmp_path):
    result = _sweep(ReferenceAdapter(), FATAL, tmp_path, crash_mode="inprocess")
    golden, crashed = result.results
    assert crashed.verdict == "passed", describe(result.results)
    (kill,) = crashed.to_dict()["kill_log"]
    assert kill["signal"] == "simulated" and kill["pid"] == kill["resumed_by"]


def test_check_worker_judges_each_way_a_kill_can_fail_to_land():
    log, problems = [], []
    assert check_worker(log, problems, 1, 100, -9, [ProbeEvent("start", 100), ProbeEvent("kill", 100, "p")])
    assert log == [{"worker": 1, "pid": 100, "signal": "SIGKILL", "crash_point": "p", "resumed_by": None}]
    assert not check_worker(log, problems, 2, 100, 0, [ProbeEvent("start", 100)])  # the same pid "resumed"
    assert "did not resume" in problems[-1]
    log, problems = [{"worker": 1, "pid": 100, "signal": "SIGKILL", "crash_point": "p", "resumed_by": None}], []
    assert not check_worker(log, problems, 2, 101, 0, [])  # a new pid that never started the probe
    assert "did not resume" in problems[-1]
    log, problems = [], []
    assert not check_worker(log, problems, 1, 100, 0, [ProbeEvent("kill", 100, "p")])
    assert check_worker(log, problems, 1, 100, -9, [ProbeEvent("kill", 101, "p")]) and log == []
    assert check_worker(log, problems, 1, 100, -9, [ProbeEvent("kill", 100, "p"), ProbeEvent("kill", 100, "q")])
    assert not check_worker(log, problems, 1, 100, -9, [ProbeEvent("simulate", 100, "p")])  # not asked to simulate
    assert len(problems) == 4 and log == []


def test_a_narrowed_certificate_says_so(tmp_path):
    from crashpoint.harness.run.certification import markdown

    case = builtin_pack("conformance") / "cases" / "cancel_while_waiting.yaml"
    cert = certify("crashpoint.harness.adapters.reference:ReferenceAdapter", case, only=["after_checkpoint:drafted"],
                   jobs=2, workdir=tmp_path)
    assert cert["narrowed_to"] == ["after_checkpoint:drafted"] and cert["summary"]["kills_verified"] == 1
    assert "**Narrowed** to 1 crash point(s)" in markdown(cert) and "not a certification" in markdown(cert)


def test_a_pytest_item_whose_crash_log_was_rewritten_fails(pytester):
    import shutil

    dst = pytester.path / "refunds"
    shutil.copytree(builtin_pack("refunds"), dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    shutil.copy(builtin_pack("refunds") / "cases" / f"{FATAL}.yaml", dst / "cases")
    result = pytester.runpytest(str(dst), "--crashpoint-chaos", "--crashpoint-schedules", "0",
                                "--crashpoint-engine", "variants.kills:TruncatesCrashLog")
    result.assert_outcomes(passed=1, failed=6)  # the golden run (one worker) is intact; every kill run is not
    result.stdout.fnmatch_lines([f"*{NOT_LANDED}: the run folder's crashpoints.log*the engine changed it*"])
