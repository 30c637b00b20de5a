"""Generated fault schedules: applying them, finding bugs with them, shrinking, and the repro case.

The search tests run fixed-seed searches against deliberately broken engines
(``tests/variants/engines.py``): each must be found within the stated budget, shrink to at
most 3 faults, and be written as a case file that fails on its own on that engine and passes
on the reference engine. The searches run concurrently (each waits on its own worker
processes), once per session.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
import yaml

from crashpoint.errors import CaseError
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.pack_driver import Driver, tool_script
from crashpoint.harness.run.schedule_search import SearchResult, resolve_seed, search, search_case, write_repro
from crashpoint.harness.load.loader import load_case, load_target
from crashpoint.harness.load.schedule import apply, case_data, is_masked
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack

PACK_DIR = builtin_pack("refunds")

#: (variant, base case, fault kinds searched, budget: schedules generated at most). The fault kind
#: each row shows is detected is in the comment; the figures are in README ("Generated fault schedules").
SEARCHES = {
    "NewKeyOnRetry": ("refund_approved_happy_path", ["tool"], 40),            # tool: response lost
    "TimeoutNotRetried": ("refund_approved_happy_path", ["tool"], 40),        # tool: timeout
    "LostArgOnResume": ("refund_approved_happy_path", ["kill"], 40),          # kill (crash point)
    "ApprovalInMemory": ("refund_approved_happy_path", ["kill"], 40),         # kill while waiting
    "IgnoresEarlyApproval": ("approval_denied_before_wait", ["insert"], 40),  # approval before the wait
    "RunsLatestVersion": ("refund_approved_happy_path", ["insert"], 40),      # new version deployed
    "NoCompensationOnCancel": ("refund_approved_happy_path", ["insert"], 40),  # cancellation
    "CancelIgnoresInFlight": ("issue_refund_response_lost_issued_once", ["hold"], 60),  # cancel at a crash point
    "DuplicateStartForks": ("refund_approved_happy_path", ["duplicate"], 20),  # duplicate delivery (start)
    "RetriesOffByOne": ("refund_approved_happy_path", ["tool"], 60),          # tool: retryable n times
    "FatalRetried": ("refund_approved_happy_path", ["tool"], 40),             # tool: fatal
    "DeadlineResetOnResume": ("refund_approved_happy_path", ["insert"], 60),  # clock jump / granted after timeout
    "SecondRecoveryNewKey": ("refund_approved_happy_path", ["kill"], 80),     # crash during recovery (2 kills)
}
SEED = 20261130


@pytest.fixture(scope="session")
def refunds():
    return load_target(PACK_DIR)


@pytest.fixture(scope="session")
def variant_searches(refunds, tmp_path_factory) -> dict[str, SearchResult]:
    """Every search of :data:`SEARCHES`, run concurrently once per session."""
    pack, cases = refunds
    by_id = {c.case_id: c for c in cases}
    root = tmp_path_factory.mktemp("searches")

    def one(name: str) -> SearchResult:
        case_id, kinds, budget = SEARCHES[name]
        return search_case(by_id[case_id], pack, ReferenceAdapter(engine=f"variants.engines:{name}"), seed=SEED,
                           budget=budget, workdir=root / name, max_faults=3, kinds=kinds)

    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip(SEARCHES, pool.map(one, SEARCHES)))


@pytest.mark.slow
@pytest.mark.parametrize("variant", list(SEARCHES))
def test_fixed_seed_search_finds_the_bug_shrinks_it_and_writes_a_repro_that_fails_alone(
        variant: str, variant_searches, refunds, tmp_path: Path) -> None:
    pack, _ = refunds
    result = variant_searches[variant]
    assert result.found is not None, f"{variant}: nothing found in {result.generated} schedules"
    assert result.generated <= SEARCHES[variant][2]
    assert 1 <= len(result.found.schedule) <= 3, result.found.schedule
    path = write_repro(result, pack, tmp_path / "repro")
    repro_pack, repro_cases = load_target(path)  # a valid case file of a valid pack
    assert [c.case_id for c in repro_cases] == [path.stem]
    on_variant = sweep(repro_pack, repro_cases, ReferenceAdapter(engine=f"variants.engines:{variant}"), crash="none",
                       workdir=tmp_path / "on-variant")
    assert [r.verdict for r in on_variant.results] != ["passed"], f"{variant}: the repro passes on its own"
    on_reference = sweep(repro_pack, repro_cases, ReferenceAdapter(), crash="none", workdir=tmp_path / "on-ref")
    assert [r.verdict for r in on_reference.results] == ["passed"], on_reference.results[0].failures


@pytest.mark.slow
def test_the_same_search_on_the_reference_engine_finds_nothing(refunds, tmp_path: Path) -> None:
    pack, cases = refunds
    chosen = [c for c in cases if c.case_id in ("refund_approved_happy_path", "cancel_while_waiting_compensates_draft",
                                                 "draft_response_lost_retried_with_same_key")]
    results = search(pack, chosen, ReferenceAdapter(), seed=SEED, budget=12, workdir=tmp_path, max_faults=4)
    assert [(r.case_id, r.found) for r in results if r.found or r.golden_error] == []
    assert sum(r.generated for r in results) == 36


def test_same_seed_draws_the_same_schedules(refunds, tmp_path: Path) -> None:
    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "approval_timeout_after_refund_draft")
    golden = Driver(ReferenceAdapter(), pack).run(case, tmp_path / "golden")
    a = search_case(case, pack, ReferenceAdapter(), seed=5, budget=3, workdir=tmp_path / "a", golden=golden)
    b = search_case(case, pack, ReferenceAdapter(), seed=5, budget=3, workdir=tmp_path / "b", golden=golden)
    c = search_case(case, pack, ReferenceAdapter(), seed=6, budget=3, workdir=tmp_path / "c", golden=golden)
    assert a.schedules == b.schedules and len(a.schedules) == 3
    assert a.schedules != c.schedules


def test_apply_places_every_fault_kind(refunds) -> None:
    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "refund_approved_happy_path")
    schedule = [{"kind": "duplicate", "event": 0, "times": 3},
                {"kind": "insert", "after": 1, "event": {"type": "cancel", "reason": "x"}},
                {"kind": "insert", "after": 0, "event": {"type": "approval_granted", "before_wait": True}},
                {"kind": "reorder", "event": 1},
                {"kind": "tool", "tool": "refunds.issueRefund", "call": 2, "outcome": "lost_response", "times": 1},
                {"kind": "kill", "at": "after_checkpoint:refund_draft"},
                {"kind": "hold", "at": "before_effect:refunds.issueRefund", "event": {"type": "cancel"}}]
    derived = apply(case, pack, schedule)
    kinds = [e["type"] for e in derived.events]
    assert kinds[0] == "start" and derived.events[0]["deliveries"] == 3
    assert tool_script(derived.events, [f for f in derived.faults if "tool" in f])[-2:] == [
        {"type": "tool_success", "tool": "refunds.issueRefund", "times": 1},
        {"type": "tool_lost_response", "tool": "refunds.issueRefund", "times": 1}]
    external = [e["type"] for e in derived.events if not e["type"].startswith("tool_")]
    assert external == ["start", "approval_granted", "cancel", "approval_granted"]  # early one first, then swapped
    assert derived.events[[e["type"] for e in derived.events].index("approval_granted")]["before_wait"] is True
    assert derived.faults == [{"kind": "tool", "tool": "refunds.issueRefund", "call": 2, "outcome": "lost_response",
                               "times": 1},
                              {"kind": "kill", "at": "after_checkpoint:refund_draft"},
                              {"kind": "hold", "at": "before_effect:refunds.issueRefund", "event": {"type": "cancel"}}]
    assert derived.expected == {} and "generated" in derived.tags and not is_masked(schedule)
    masked = apply(case, pack, schedule[-2:-1])
    assert masked.expected["like_fault_free"] is True and masked.expected["final_status"] == "succeeded"
    assert case.events != derived.events  # the base case is untouched
    with pytest.raises(ValueError, match="unknown fault kind"):
        apply(case, pack, [{"kind": "meteor"}])


def test_a_case_with_faults_loads_and_bad_faults_name_their_field(refunds, tmp_path: Path) -> None:
    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "refund_approved_happy_path")
    data = case_data(apply(case, pack, [{"kind": "kill", "at": "after_checkpoint:refund_draft"}]))
    good = tmp_path / "good.yaml"
    good.write_text(yaml.safe_dump(data))
    loaded = load_case(good, pack)
    assert loaded.faults == [{"kind": "kill", "at": "after_checkpoint:refund_draft"}] and loaded.expected["like_fault_free"]
    data["faults"] = [{"kill": "after checkpoint; rm -rf /"}]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(CaseError) as err:
        load_case(bad, pack)
    assert err.value.field.startswith("faults[0]") and "bad.yaml" in str(err.value)
    data["faults"] = []
    bad.write_text(yaml.safe_dump(data))
    with pytest.raises(CaseError, match="like_fault_free"):
        load_case(bad, pack)


def test_a_held_worker_receives_the_event_mid_step(refunds, tmp_path: Path) -> None:
    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "refund_approved_happy_path")
    derived = apply(case, pack, [{"kind": "hold", "at": "before_effect:refunds.draftRefundRequest",
                                  "event": {"type": "cancel", "reason": "held"}}])
    out = Driver(ReferenceAdapter(), pack).run(derived, tmp_path / "run")
    held = [d for d in out.deliveries_log if d.get("held_at")]
    assert held and held[0]["kind"] == "cancel" and held[0]["held_at"] == "before_effect:refunds.draftRefundRequest"
    # the draft was in flight when the cancel came: it is settled, then compensated
    assert out.status == "cancelled" and [c["tool"] for c in out.calls if c["outcome"] == "applied"] == [
        "refunds.draftRefundRequest", "refunds.cancelRefundDraft"]
    assert out.faults_missed == []


def test_a_generated_kill_keeps_the_cases_own_held_cancel(refunds, tmp_path: Path) -> None:
    # issue 17: `pytest --chaos --chaos-seed 12345 scenarios/refunds` failed the cancel_* cases' [schedules]
    # on the reference engine: apply() dropped the case's own `faults`, so a generated kill at
    # before_checkpoint:workflow_started ran without the case's hold-cancel and never got cancelled
    from crashpoint.harness.run.schedule_search import trial

    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "cancel_while_drafting_compensates_draft")
    kill = {"kind": "kill", "at": "before_checkpoint:workflow_started"}
    derived = apply(case, pack, [kill])
    assert derived.faults == [*case.faults, kill]
    assert derived.expected["final_status"] == "cancelled"
    assert "like_fault_free" not in derived.expected  # without its hold it would not be cancelled
    driver = Driver(ReferenceAdapter(), pack)
    golden = driver.run(case, tmp_path / "golden")
    result = trial(driver, case, pack, [kill], tmp_path / "run", golden)
    assert result.verdict == "passed", [f.message for f in result.failures]
    happy = next(c for c in cases if c.case_id == "refund_approved_happy_path")
    own_kill = apply(happy, pack, [{"kind": "kill", "at": "after_checkpoint:refund_draft"}])
    assert apply(own_kill, pack, [kill]).expected["like_fault_free"] is True  # all masked: ends like fault-free


def test_a_start_redelivered_after_a_deploy_renaming_its_step_is_a_duplicate(refunds, tmp_path: Path) -> None:
    # issue 17: `pytest --chaos --crashpoint-seed 19 scenarios/refunds` failed deploy_mid_run_keeps_pinned_version
    # [schedules] on the reference engine: the start delivered again after version 2 (draft_refund renamed)
    # was deployed raised "DefinitionError: workflow 'refund' v2 has no task 'draft_refund'" (the engine read
    # the latest definition before it saw the duplicate)
    from crashpoint.harness.run.schedule_search import trial

    pack, cases = refunds
    case = next(c for c in cases if c.case_id == "deploy_mid_run_keeps_pinned_version")
    again = {"kind": "duplicate", "event": 0, "times": 2, "after": 1}
    driver = Driver(ReferenceAdapter(), pack)
    golden = driver.run(case, tmp_path / "golden")
    result = trial(driver, case, pack, [again], tmp_path / "run", golden)
    assert result.verdict == "passed", (result.error, [f.message for f in result.failures])


def test_a_run_whose_faults_never_fired_is_vacuous_whatever_it_found() -> None:
    # issue 17: seed 4 of `pytest --chaos scenarios/refunds` failed cancel_while_draft_retrying[schedules] on
    # the reference engine with "expected final status cancelled": the generated 2-workers recovery never
    # delivered the case's held cancel ("the case's faults never fired"), and its findings counted as a failure
    from crashpoint.harness.model.rules import Finding
    from crashpoint.harness.judge.verdict import RunResult, is_vacuous

    found = [Finding("final_status", "expected final status cancelled, got waiting_approval")]
    missed = RunResult("c", None, "error", found, error="the case's faults never fired, so nothing was tested: "
                       "event cancel at after_effect:refunds.draftRefundRequest")
    assert is_vacuous(missed)
    assert not is_vacuous(RunResult("c", None, "error", found, error="EngineCrashed: worker exited with 1"))
    assert not is_vacuous(RunResult("c", None, "failed", found))


def test_seed_resolution(tmp_path: Path) -> None:
    from crashpoint.errors import UsageError

    with pytest.raises(UsageError, match="no previous seed"):
        resolve_seed("last", tmp_path)
    assert resolve_seed("42", tmp_path) == 42 and resolve_seed("last", tmp_path) == 42
    fresh = resolve_seed(None, tmp_path)
    assert resolve_seed("last", tmp_path) == fresh
    for bad in ("x", "-1", str(2**32)):
        with pytest.raises(UsageError):
            resolve_seed(bad, tmp_path)


def test_a_repro_written_again_with_the_same_contents_is_reused(refunds, tmp_path: Path) -> None:
    # issue 17: a second `pytest --chaos --chaos-seed S` crashed every [schedules] item with
    # "UsageError: ... already exists; a repro is never overwritten"
    from crashpoint.errors import UsageError
    from crashpoint.harness.run.schedule_search import Trial
    from crashpoint.harness.judge.pack_rules import Failure

    pack, cases = refunds
    schedule = [{"kind": "tool", "tool": "refunds.cancelRefundDraft", "call": 1, "outcome": "retryable", "times": 3}]
    found = Trial(schedule, apply(cases[0], pack, schedule), "failed", [Failure("side_effects", "never compensated")])

    def result() -> SearchResult:
        return SearchResult(cases[0].case_id, seed=12345, budget=3, found=found)

    first = write_repro(result(), pack, tmp_path)
    again = result()
    assert write_repro(again, pack, tmp_path) == first == again.repro
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.parents[1].name]  # no staging folder left
    first.write_text(first.read_text() + "\n# edited by hand\n")
    beside = write_repro(result(), pack, tmp_path)  # never overwritten, and never a crash of the item either
    assert first.read_text().endswith("# edited by hand\n")
    assert beside.parents[1].name == first.parents[1].name + "_2" and "edited" not in beside.read_text()
    # issue 17: seed 18 shrank to the schedule seed 19 had found; its repro (another seed in its note)
    # crashed the [schedules] item with "already exists with other contents"
    other_seed = SearchResult(cases[0].case_id, seed=18, budget=3, found=found)
    assert write_repro(other_seed, pack, tmp_path).parents[1].name == first.parents[1].name + "_3"
    assert write_repro(result(), pack, tmp_path) == beside  # the same contents again: reused
    import crashpoint.harness.run.schedule_search as generate

    generate_max, generate.MAX_REPRO_COPIES = generate.MAX_REPRO_COPIES, 3
    try:
        with pytest.raises(UsageError, match="already exist with other contents"):
            write_repro(SearchResult(cases[0].case_id, seed=17, budget=3, found=found), pack, tmp_path)
    finally:
        generate.MAX_REPRO_COPIES = generate_max
    assert not list(tmp_path.glob("*.partial"))
