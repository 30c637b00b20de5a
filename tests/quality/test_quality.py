"""Quality: the harness catches deliberately broken engines (``tests/variants/engines.py``).

Each variant has one bug. A crash sweep over a few refund cases (golden run plus a real
SIGKILL at every crash point) must report at least one ``failed`` run whose failures name
the expected oracle and message; the reference engine must pass the very same sweeps, so
a catch is the bug's doing and not the case's. (After the ``quality/`` tests of Hypothesis,
which check that bugs are actually found.)

Every (case, crash point) run starts worker processes, so the module is marked ``slow``.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.load.loader import Case, Pack, load_target
from crashpoint.harness.run.sweep import RunResult, SweepResult, sweep
from verdicts import describe

pytestmark = pytest.mark.slow

PACK_DIR = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
HAPPY = "refund_approved_happy_path"
CANCEL = "cancel_while_waiting_compensates_draft"
FATAL = "draft_fatal_failure"


@lru_cache(maxsize=None)
def _target() -> tuple[Pack, dict[str, Case]]:
    pack, cases = load_target(PACK_DIR)
    return pack, {c.case_id: c for c in cases}


def run_sweep(engine: str, *case_ids: str) -> SweepResult:
    """Golden run plus every crash point of ``case_ids`` on ``engine`` (``MODULE:CLASS``)."""
    pack, cases = _target()
    return sweep(pack, [cases[c] for c in case_ids], ReferenceAdapter(engine=engine, name=engine),
                 crash="every", jobs=2)


def caught(result: SweepResult, oracle: str, fragment: str) -> list[RunResult]:
    """Failed runs with a failure from ``oracle`` whose message contains ``fragment``."""
    return [r for r in result.results if r.verdict == "failed"
            and any(f.oracle == oracle and fragment in f.message for f in r.failures)]


def assert_caught(result: SweepResult, oracle: str, fragment: str) -> list[RunResult]:
    hits = caught(result, oracle, fragment)
    assert hits, f"no failed run with [{oracle}] ...{fragment}...:\n{describe(result.results)}"
    broken = [r for r in result.results if r.verdict in ("error", "unknown")]
    assert not broken, f"runs that could not be judged:\n{describe(broken)}"
    return hits


def golden(result: SweepResult, case_id: str) -> RunResult:
    return next(r for r in result.results if r.case_id == case_id and r.crash_point is None)


def test_reference_engine_passes_the_same_sweeps() -> None:
    result = run_sweep("crashpoint.engine.engine:Engine", HAPPY, CANCEL, FATAL)
    assert len(result.results) > 3 * 5, "expected a golden run plus several crash points per case"
    assert all(r.crash_point is None or r.outcome.crash_fired for r in result.results)
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)


def test_fresh_idempotency_key_duplicates_effects_after_a_crash() -> None:
    result = run_sweep("variants.engines:EffectBeforeCheckpointNoKey", HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "a fault-free run cannot see this bug"
    hits = assert_caught(result, "side_effects",
                         "effect draft_refund (refunds.draftRefundRequest) applied 2 times; at most once is allowed")
    assert "after_effect:refunds.draftRefundRequest" in {r.crash_point for r in hits}
    assert_caught(result, "differential", "effects differ from the golden run: extra")


def test_approval_kept_in_memory_is_lost_after_a_crash() -> None:
    result = run_sweep("variants.engines:ApprovalInMemory", HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "a fault-free run cannot see this bug"
    hits = assert_caught(result, "differential", "golden run ended succeeded")
    assert "after_checkpoint:approval_decision" in {r.crash_point for r in hits}
    assert_caught(result, "final_status", "expected final status succeeded, got failed")
    assert any("refused: no granted approval" in (r.outcome.stop_reason or "") for r in hits)


def test_cancel_without_compensation_is_caught() -> None:
    result = run_sweep("variants.engines:NoCompensationOnCancel", CANCEL)
    assert_caught(result, "side_effects", "workflow ended cancelled after effect draft_refund was applied, "
                                          "but its compensation refunds.cancelRefundDraft was never applied")
    assert_caught(result, "side_effects", "expected effect draft_refund compensated")
    assert golden(result, CANCEL).verdict == "failed"


def test_terminal_state_without_stop_reason_is_caught() -> None:
    result = run_sweep("variants.engines:TerminalWithoutStopReason", FATAL)
    assert_caught(result, "trace", "terminal status failed has no stop reason")
    assert_caught(result, "trace", "has no workflow_finished event with that status and a stop reason")
    assert {r.verdict for r in result.results} == {"failed"}, describe(result.results)


def test_illegal_transition_is_caught() -> None:
    result = run_sweep("variants.engines:IllegalTransition", HAPPY)
    hits = assert_caught(result, "trace", "illegal transition waiting_approval -> checkpointed")
    assert golden(result, HAPPY) in hits


RESTART = "approval_granted_after_restart"


def run_golden(engine: str, *case_ids: str) -> SweepResult:
    """Only the golden runs of ``case_ids`` on ``engine``: enough for bugs a fault-free run shows."""
    pack, cases = _target()
    return sweep(pack, [cases[c] for c in case_ids], ReferenceAdapter(engine=engine, name=engine),
                 crash="none", jobs=2)


def test_reference_engine_passes_the_golden_runs_used_below() -> None:
    result = run_golden("crashpoint.engine.engine:Engine", HAPPY, RESTART)
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)
    restart = golden(result, RESTART).outcome
    assert restart.workers == 4 and [e["kind"] for e in restart.trace].count("workflow_resumed") == 3


def test_refund_issued_without_approval_is_caught() -> None:
    result = run_golden("variants.engines:IssueWithoutApproval", HAPPY)
    hits = assert_caught(result, "side_effects",
                         "effect issue_refund applied without a granted approval 'refund_approval' before it")
    assert golden(result, HAPPY) in hits
    assert golden(result, HAPPY).outcome.status == "succeeded", "the end state alone does not show this bug"


def test_approval_asked_again_after_a_restart_is_caught() -> None:
    result = run_golden("variants.engines:ReasksApprovalOnResume", RESTART)
    # asked by the first worker, then again by each of the three workers that resumed the waiting run
    hits = assert_caught(result, "side_effects", "approval 'refund_approval' was requested from a human 4 times")
    assert golden(result, RESTART) in hits
    assert golden(result, RESTART).outcome.status == "succeeded", "the end state alone does not show this bug"


def test_effect_without_checkpoint_is_caught() -> None:
    result = run_golden("variants.engines:NoCheckpointAfterEffect", HAPPY)
    hits = assert_caught(result, "trace", "no checkpoint after refunds.draftRefundRequest before the next step")
    assert golden(result, HAPPY) in hits
    assert "before_checkpoint:refund_draft" not in golden(result, HAPPY).outcome.crash_points


def test_approval_request_without_checkpoint_is_caught_even_when_a_decision_follows() -> None:
    """A missing ``approval_request`` checkpoint is not hidden by the next commit's checkpoint."""
    result = run_golden("variants.engines:NoCheckpointAfterApprovalRequest",
                        "cancel_while_waiting_compensates_draft")
    assert_caught(result, "trace", "no checkpoint after approval refund_approval before the next step")


def test_replay_from_start_is_caught_as_a_lost_place() -> None:
    pack, cases = _target()
    result = sweep(pack, [cases[HAPPY]], ReferenceAdapter(engine="variants.engines:ReplayFromStart"),
                   crash="every", jobs=2, only=["after_checkpoint:refund_issued"])
    assert_caught(result, "trace", "step issue_refund ran again after its result was checkpointed")
    assert_caught(result, "side_effects", "tool calls repeated an idempotency key after 1 kill(s)")


def test_argument_lost_on_resume_is_caught_by_the_differential_oracle() -> None:
    pack, cases = _target()
    result = sweep(pack, [cases[HAPPY]], ReferenceAdapter(engine="variants.engines:LostArgOnResume"),
                   crash="every", jobs=2, only=["after_checkpoint:refund_issued"])
    assert golden(result, HAPPY).verdict == "passed"  # one process does it right
    assert_caught(result, "differential", "effects differ from the golden run")


def test_notification_before_the_refund_is_caught_by_effect_order() -> None:
    result = run_golden("variants.engines:NotifyBeforeIssue", HAPPY)
    assert_caught(result, "side_effects", "effect notify_customer was applied before effect issue_refund")


# ------------------------------------------------------------------ bugs only the fault model's faults expose
# Each test runs the golden run of the case whose fault exposes the bug, next to a control case that
# does not have that fault (the variant passes it), so the catch is the fault's doing.

RETRY_503 = "draft_retryable_failure_then_success"
TIMEOUT_RETRIED = "draft_timeout_then_retry_succeeds"
DRAFT_LOST = "draft_response_lost_retried_with_same_key"
ISSUE_LOST = "issue_refund_response_lost_issued_once"
SLOW = "issue_refund_slow_exceeds_phase_timeout"
EARLY_GRANT = "approval_granted_before_wait"
EARLY_DENY = "approval_denied_before_wait"
DEPLOY = "deploy_mid_run_keeps_pinned_version"


def test_reference_engine_passes_the_fault_model_golden_runs() -> None:
    result = run_golden("crashpoint.engine.engine:Engine", TIMEOUT_RETRIED, DRAFT_LOST, ISSUE_LOST, SLOW,
                        EARLY_GRANT, EARLY_DENY, DEPLOY)
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)
    lost = golden(result, DRAFT_LOST).outcome
    assert [(c["outcome"], c["lost"]) for c in lost.calls if c["tool"] == "refunds.draftRefundRequest"] == \
        [("applied", True), ("duplicate", False)]
    assert golden(result, EARLY_GRANT).outcome.workers == 2  # the first worker already finished the run
    deployed = golden(result, DEPLOY).outcome
    assert {e.get("version") for e in deployed.trace if e["kind"].startswith("workflow_") and "version" in e} == {1}


def test_lost_response_retried_with_a_new_key_duplicates_the_effect() -> None:
    result = run_golden("variants.engines:NewKeyOnRetry", DRAFT_LOST, RETRY_503)
    assert golden(result, RETRY_503).verdict == "passed", "a failure that applied nothing cannot show this bug"
    hits = assert_caught(result, "side_effects",
                         "effect draft_refund (refunds.draftRefundRequest) applied 2 times; at most once is allowed")
    assert golden(result, DRAFT_LOST) in hits


def test_lost_response_of_the_irreversible_refund_is_caught_too() -> None:
    """The refund service refuses a second issue of one draft: the new key turns into a failed workflow."""
    result = run_golden("variants.engines:NewKeyOnRetry", ISSUE_LOST)
    assert_caught(result, "final_status", "expected final status succeeded, got failed")


def test_timeout_treated_as_fatal_is_caught() -> None:
    result = run_golden("variants.engines:TimeoutNotRetried", TIMEOUT_RETRIED, RETRY_503)
    assert golden(result, RETRY_503).verdict == "passed", "a 503 is still retried"
    hits = assert_caught(result, "final_status", "expected final status succeeded, got failed")
    assert golden(result, TIMEOUT_RETRIED) in hits
    assert "timeout" in (golden(result, TIMEOUT_RETRIED).outcome.stop_reason or "")


def test_phase_timeout_restarted_per_task_is_caught_by_a_slow_call() -> None:
    result = run_golden("variants.engines:PhaseTimeoutPerTask", SLOW, HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "without a slow call no phase runs out of time"
    hits = assert_caught(result, "side_effects", "expected effect notify_customer applied 0 time(s), got 1")
    assert golden(result, SLOW) in hits
    assert_caught(result, "trace", "required trace events missing: ['task_skipped']")


def test_slow_call_then_crash_keeps_the_issued_refund() -> None:
    """A kill after a slow irreversible call: the resumed worker reconciles the call before the phase timeout."""
    pack, cases = _target()
    result = sweep(pack, [cases[SLOW]], ReferenceAdapter(), crash="every", jobs=2,
                   only=["after_effect:refunds.issueRefund", "before_checkpoint:refund_issued"])
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)
    assert all(r.outcome.crash_fired for r in result.results if r.crash_point)


def test_early_approval_dropped_is_caught() -> None:
    result = run_golden("variants.engines:IgnoresEarlyApproval", EARLY_GRANT, HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "an approval that arrives while waiting is not dropped"
    hits = assert_caught(result, "final_status", "expected final status succeeded, got escalated")
    assert golden(result, EARLY_GRANT) in hits
    assert_caught(result, "trace", "forbidden trace events present: ['approval_timeout']")


def test_running_the_latest_version_after_a_deploy_is_caught() -> None:
    result = run_golden("variants.engines:RunsLatestVersion", DEPLOY, HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "with one version deployed the bug is invisible"
    hits = assert_caught(result, "trace", "the run changed definition version mid-run: it started on version 1, "
                                          "then ran version 2")
    assert golden(result, DEPLOY) in hits
    assert_caught(result, "final_status", "expected final status succeeded, got failed")


# ------------------------------------------------------------------ issue 15: what slipped through
# Each broken engine below passed every oracle before the rule (or fault kind) its docstring names.

ISSUE_15_CASES = ("approval_timeout_after_restart_escalates", "duplicate_start_while_waiting", "cancel_while_drafting_compensates_draft",
                  "cancel_while_draft_retrying", "cancel_after_approval_before_issue",
                  "cancel_after_refund_issued_completes_forward", "deploy_renaming_issue_step_keeps_pinned_version",
                  "refund_denied_after_restart_compensates_draft", "compensation_retryable_failure_then_compensated",
                  "compensation_response_lost_compensated_once", "compensation_refused_fails_with_reason")
OUTAGE = "draft_retries_exhausted"
COMP_LOST = "compensation_response_lost_compensated_once"
COMP_RETRY = "compensation_retryable_failure_then_compensated"
DEPLOY_RENAME = "deploy_renaming_issue_step_keeps_pinned_version"


def test_reference_engine_passes_the_issue_15_cases() -> None:
    result = run_golden("crashpoint.engine.engine:Engine", *ISSUE_15_CASES)
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)
    swept = run_sweep("crashpoint.engine.engine:Engine", "cancel_while_draft_retrying", OUTAGE)
    assert {r.verdict for r in swept.results} == {"passed"}, describe(swept.results)


def test_attempts_counted_anew_by_each_worker_exceed_the_retry_budget() -> None:
    result = run_sweep("variants.engines:AttemptsResetOnRestart", OUTAGE)
    assert golden(result, OUTAGE).verdict == "passed", "one worker process counts right"
    hits = assert_caught(result, "side_effects", "its retry budget allows 4 attempt(s)")
    assert all(r.outcome.status == "failed" for r in hits), "the end state alone does not show this bug"
    assert_caught(result, "trace", "went back from attempt")


def test_step_called_again_after_its_checkpoint_committed_is_caught() -> None:
    pack, cases = _target()
    result = sweep(pack, [cases[HAPPY]], ReferenceAdapter(engine="variants.engines:ReconfirmsLastEffectOnResume"),
                   crash="every", jobs=2, only=["after_checkpoint:refund_issued"])
    hits = assert_caught(result, "side_effects", "refunds.issueRefund was called again under key "
                                                 "wf-refund_approved_happy_path/issue_refund after the kill at "
                                                 "after_checkpoint:refund_issued")
    # one repeated call after one kill: within the old "one repeat per kill" allowance
    assert not caught(result, "side_effects", "tool calls repeated an idempotency key"), describe(hits)
    assert not caught(result, "differential", ""), "the tool deduplicated the key: the effects are right"


def test_compensation_retried_under_a_new_key_is_caught_by_a_lost_compensation_answer() -> None:
    result = run_golden("variants.engines:CompensationNewKeyOnRetry", COMP_LOST, COMP_RETRY)
    # a retry that cancelled nothing applies nothing twice (only its unaudited key shows in the trace)
    assert not [f for f in golden(result, COMP_RETRY).failures if f.oracle == "side_effects"]
    hits = assert_caught(result, "side_effects", "compensation refunds.cancelRefundDraft of draft_refund applied "
                                                 "2 times")
    assert golden(result, COMP_LOST) in hits


def test_latest_version_run_under_the_pinned_version_number_is_caught() -> None:
    result = run_golden("variants.engines:RunsLatestVersionTracesPinned", DEPLOY_RENAME, HAPPY)
    assert golden(result, HAPPY).verdict == "passed", "with one version deployed the bug is invisible"
    hits = assert_caught(result, "versions", "step send_refund ran, which version 1 (the run's version) does not have")
    assert golden(result, DEPLOY_RENAME) in hits
    assert not caught(result, "trace", "changed definition version"), "the trace claims the pinned version"


def test_decision_consumed_before_it_is_applied_is_lost_by_a_kill() -> None:
    pack, cases = _target()
    result = sweep(pack, [cases[HAPPY]], ReferenceAdapter(engine="variants.engines:DecisionConsumedBeforeApplied"),
                   crash="every", jobs=2, only=["before_checkpoint:approval_decision"])
    assert golden(result, HAPPY).verdict == "passed"
    (hit,) = assert_caught(result, "final_status", "expected final status succeeded, got waiting_approval")
    # the message points at the delivery and the kill after which the run stopped moving (issue 15 item 8)
    message = next(f.message for f in hit.failures if f.oracle == "final_status")
    assert "the run ended so after delivery step 1: approval refund_approval granted by alice (accepted); then " \
           "kill at before_checkpoint:approval_decision (worker 2" in message, message


def run_sampled(engine: str, *case_ids: str) -> SweepResult:
    """The default sweep (``crashpoint run``'s ``--crash sampled``) of ``case_ids`` on ``engine``."""
    pack, cases = _target()
    return sweep(pack, [cases[c] for c in case_ids], ReferenceAdapter(engine=engine, name=engine),
                 crash="sampled", jobs=2)


def test_reference_engine_passes_the_sampled_sweep() -> None:
    result = run_sampled("crashpoint.engine.engine:Engine", HAPPY, "cancel_while_draft_retrying")
    specs = [r.crash_point for r in result.results if r.crash_point]
    assert sum(" >> " in p and not p.endswith("workers") for p in specs) == 4, specs
    assert sum(p.endswith(" || worker") for p in specs) == 2 and sum(p.endswith(" >> 3 workers") for p in specs) == 2
    assert {r.verdict for r in result.results} == {"passed"}, describe(result.results)
    alongside = [r for r in result.results if (r.crash_point or "").endswith("|| worker")]
    assert all(r.outcome.workers >= 2 and any(d["kind"] == "worker" for d in r.outcome.deliveries_log)
               for r in alongside)


def run_together(engine: str, case_id: str, before: str, tmp_path: Path, rounds: int = 2) -> list[RunResult]:
    """The ``A >> 3 workers`` runs of ``case_id`` on ``engine`` (three workers recover at once from a kill at
    ``A``), judged, for every point ``A`` its golden run passes before ``before``, ``rounds`` times over, one
    after another in this process: from the second run on, every worker starts from a warm zygote, as in
    a long sampled sweep (a cold one lets the driver's own worker get everywhere first)."""
    from crashpoint.harness.judge.verdict import judge
    from crashpoint.harness.run.pack_driver import Driver

    pack, cases = _target()
    case = cases[case_id]
    driver = Driver(ReferenceAdapter(engine=engine, name=engine), pack)
    golden_run = driver.run(case, tmp_path / "golden")
    firsts = golden_run.crash_points[:golden_run.crash_points.index(before)]
    runs = []
    for n in range(rounds):
        for i, a in enumerate(firsts):
            spec = f"{a} >> 3 workers"
            runs.append(judge(case, pack, driver.run(case, tmp_path / f"r{n}-{i}", spec), crash_point=spec,
                              golden=golden_run))
    return runs


def test_workers_recovering_together_deliver_the_case_held_events(tmp_path: Path) -> None:
    # issue 17: in an "A >> 3 workers" run only the driver's own worker was held at the case's hold points; when
    # one of the two started beside it took the draft step, the held cancel was never delivered ("the case's
    # faults never fired": 4 of 6 runs here), so the run tested nothing and could not fail
    held = "after_effect:refunds.draftRefundRequest"
    runs = run_together("crashpoint.engine.engine:Engine", "cancel_while_draft_retrying", held, tmp_path / "ok")
    assert len(runs) == 6 and {r.verdict for r in runs} == {"passed"}, describe(runs)
    assert all(r.outcome.workers >= 4 and not r.outcome.faults_missed and
               [d["kind"] for d in r.outcome.deliveries_log if d.get("held_at") == held] == ["cancel"]
               for r in runs), describe(runs)
    broken = run_together("variants.engines:NoCompensationOnCancel", "cancel_while_draft_retrying", held,
                          tmp_path / "broken")
    assert {r.verdict for r in broken} == {"failed"}, describe(broken)
    assert all(any(f.oracle == "side_effects" for f in r.failures) for r in broken), describe(broken)


def test_recovery_claim_of_a_dead_worker_leaves_the_run_running() -> None:
    result = run_sampled("variants.engines:RecoveryClaimNeverExpires", HAPPY)
    singles = [r for r in result.results if r.crash_point and ">>" not in r.crash_point]
    assert {r.verdict for r in singles} == {"passed"}, "one kill is recovered: " + describe(singles)
    hits = assert_caught(result, "final_status", "expected final status succeeded, got running")
    assert all(">>" in r.crash_point for r in hits)


def test_second_live_worker_without_a_lease_is_caught_by_the_default_sweep() -> None:
    result = run_sampled("variants.engines:NoLease", HAPPY)
    hits = caught(result, "side_effects", "tool calls repeated an idempotency key after 0 kill(s)")
    assert hits and all(r.crash_point.endswith("|| worker") for r in hits), describe(result.results)
    assert not [r for r in result.results if " || " not in (r.crash_point or "") and " workers" not in
                (r.crash_point or "") and r.verdict != "passed"], "one worker at a time hides this bug"


def test_late_duplicate_start_forks_a_second_run() -> None:
    result = run_golden("variants.engines:LateDuplicateStartForks", "duplicate_start_while_waiting",
                        "duplicate_start_request")
    assert golden(result, "duplicate_start_request").verdict == "passed", "back-to-back duplicates are recognised"
    hits = assert_caught(result, "side_effects", "effect draft_refund (refunds.draftRefundRequest) applied 2 times")
    assert golden(result, "duplicate_start_while_waiting") in hits
