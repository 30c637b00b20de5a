"""The ads-audit pack (``scenarios/ads_audit``): the seeded account, the fake ads API and scripted
agent, the engine's agent / revise / on_error retry / progress semantics, the escalation oracle
against a broken engine, and a bounded crash sweep (real SIGKILLs at a few points per case).

The full sweep (every crash point of every case) is ``test_full_sweep_passes_every_crash_point``,
marked ``slow``.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path
from typing import Any

import pytest

from crashpoint.engine.decide import retry_budget
from crashpoint.engine.definition import DefinitionError, WorkflowDefinition
from crashpoint.errors import CaseError
from crashpoint.fakes.data import ads_account, build_ads_account
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.tools import Toolbox
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.cli.main import ExitCode, main
from crashpoint.harness.load.loader import Case, Pack, load_pack, load_target
from crashpoint.harness.judge.pack_rules import agent_verdicts
from crashpoint.harness.run.sweep import RunResult, sweep
from crashpoint.protocols import ToolError
from crashpoint.scenarios import builtin_pack
from verdicts import describe

PACK_DIR = builtin_pack("ads_audit")
BROKEN = "variants.engines:IgnoresAgentVerdict"
#: Final status of each case's golden run.
EXPECTED = {
    "audit_approved_happy_path": "succeeded",
    "keyword_agent_uncertain_escalates": "escalated",
    "competitor_evidence_missing_escalates": "escalated",
    "gate_denied_once_revised_then_granted": "succeeded",
    "gate_denied_past_max_revisions_compensates": "failed",
    "competitor_analysis_fails_is_skipped": "succeeded",
    "analysis_phase_timeout_escalates": "escalated",
    "keyword_fetch_retries_use_phase_budget": "succeeded",
    "campaign_fetch_retries_exhausted_fails": "failed",
    "budget_change_refused_compensates_draft": "failed",
    "bid_change_refused_after_budgets_escalates": "escalated",
    "report_finalize_fails_is_skipped": "succeeded",
    "approval_timeout_escalates": "escalated",
}
#: A few crash points per case for the bounded sweep (each passed by that case's golden run).
POINTS = {
    "audit_approved_happy_path": ["after_effect:reports.draftReport", "before_checkpoint:approval_decision",
                                  "after_effect:ads.applyBudgetChanges"],
    "keyword_agent_uncertain_escalates": ["after_effect:agent.analyzeKeywords", "before_checkpoint:keyword_analysis"],
    "competitor_evidence_missing_escalates": ["after_checkpoint:fetch_ads", "after_effect:agent.analyzeCompetitors"],
    "gate_denied_once_revised_then_granted": ["after_checkpoint:approval_decision",
                                              "after_effect:agent.analyzeCampaigns#2",
                                              "after_effect:approvals.request#2"],
    "gate_denied_past_max_revisions_compensates": ["after_checkpoint:approval_decision#2",
                                                   "after_effect:reports.discardDraft"],
    "competitor_analysis_fails_is_skipped": ["after_effect:agent.analyzeCompetitors"],
    "analysis_phase_timeout_escalates": ["after_effect:agent.analyzeCampaigns", "before_checkpoint:keyword_analysis"],
    "keyword_fetch_retries_use_phase_budget": ["before_checkpoint:fetch_keywords#5", "after_effect:ads.keywordStats#6"],
    "campaign_fetch_retries_exhausted_fails": ["after_checkpoint:fetch_campaigns#6"],
    "budget_change_refused_compensates_draft": ["after_effect:ads.applyBudgetChanges",
                                                "after_effect:reports.discardDraft"],
    "bid_change_refused_after_budgets_escalates": ["after_effect:ads.applyBidChanges"],
    "report_finalize_fails_is_skipped": ["after_effect:reports.finalizeReport"],
    "approval_timeout_escalates": ["before_checkpoint:approval_timeout"],
}


@lru_cache(maxsize=None)
def _target() -> tuple[Pack, dict[str, Case]]:
    pack, cases = load_target(PACK_DIR)
    return pack, {c.case_id: c for c in cases}


@pytest.fixture(scope="module")
def golden() -> dict[str, RunResult]:
    """The golden run of every case on the reference engine, by case id."""
    pack, cases = _target()
    result = sweep(pack, list(cases.values()), ReferenceAdapter(), crash="none", jobs=2)
    return {r.case_id: r for r in result.results}


def kinds_of(run: RunResult, kind: str) -> list[dict[str, Any]]:
    return [e for e in run.outcome.trace if e["kind"] == kind]


# ------------------------------------------------------------------ the pack and the account

def test_pack_validates_by_name_and_path(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "ads_audit"]) == ExitCode.OK
    assert main(["validate", str(PACK_DIR)]) == ExitCode.OK
    assert f"{len(EXPECTED)} case(s) valid" in capsys.readouterr().out
    assert set(_target()[1]) == set(EXPECTED)


def test_account_is_large_and_identical_for_the_same_seed() -> None:
    built = build_ads_account(11)  # its build time is benchmarks/scale.py's, not a test's
    assert len(built.campaigns) >= 50 and len(built.keywords) >= 5000 and len(built.ads) >= 100
    assert len({k[0] for k in built.keywords}) == len(built.keywords)
    assert build_ads_account(11) == built
    assert ads_account(11) == built  # the cached copy (memory or JSON file) is the same account
    assert build_ads_account(12) != built


def test_account_is_identical_in_another_process() -> None:
    def digest(account: Any) -> str:
        return hashlib.sha1(json.dumps([account.campaigns, account.keywords, account.ads, account.competitors],
                                       sort_keys=True).encode()).hexdigest()

    code = ("import hashlib, json; from crashpoint.fakes.data import build_ads_account as b; a = b(11); "
            "print(hashlib.sha1(json.dumps([a.campaigns, a.keywords, a.ads, a.competitors], "
            "sort_keys=True).encode()).hexdigest())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "CRASHPOINT_CACHE_DIR": ""})
    assert out.stdout.strip() == digest(build_ads_account(11))


@pytest.fixture()
def box(tmp_path: Path) -> Toolbox:
    ledger = Ledger(tmp_path / "ledger.db")
    yield Toolbox(ledger)
    ledger.close()


def test_read_tools_return_summaries_and_take_virtual_time(box: Toolbox) -> None:
    before = box.clock.now()
    stats = box.call("ads.keywordStats", {"account_seed": 11, "top_n": 10}, "k1")
    assert stats["keywords"] == 5000 and len(stats["top_cost"]) == 10
    assert len(json.dumps(stats)) < 4000, "a summary, not the keywords"
    campaigns = box.call("ads.listCampaigns", {"account_seed": 11}, "k2")
    assert campaigns["campaigns"] == 50 and len(campaigns["top_spend"]) == 5
    assert box.clock.now() - before == 2400 + 900
    with pytest.raises(ToolError, match="invalid account_seed"):
        box.call("ads.listAds", {"account_seed": "x"}, "k3")


def test_write_tools_are_idempotent_side_effects(box: Toolbox) -> None:
    draft = box.call("reports.draftReport", {"account_id": "acc-11", "title": "t"}, "d1")
    assert box.call("reports.draftReport", {"account_id": "acc-11", "title": "t"}, "d1") == draft
    assert [c.outcome for c in box.ledger.calls("reports.draftReport")] == ["applied", "duplicate"]
    change = {"campaign_id": "cmp-001", "new_daily_budget_cents": 1000}
    assert box.call("ads.applyBudgetChanges", {"account_seed": 11, "changes": [change]}, "b1")["applied"] == 1
    with pytest.raises(ToolError, match="known campaign_id"):
        box.call("ads.applyBudgetChanges", {"account_seed": 11, "changes": [{"campaign_id": "nope"}]}, "b2")
    box.call("reports.discardDraft", {"result": draft}, "d1/compensate")
    with pytest.raises(ToolError, match="discarded"):
        box.call("reports.finalizeReport", {"draft_id": draft["draft_id"]}, "f1")


def test_scripted_agent_answers(box: Toolbox) -> None:
    evidence = [{"id": "cmp-001"}]
    first = box.call("agent.analyzeCampaigns", {"account_seed": 11, "evidence": evidence}, "a1")
    assert first["verdict"] == "confident" and first["budget_changes"] and first["revision"] == 0
    assert box.call("agent.analyzeCampaigns", {"account_seed": 11, "evidence": evidence}, "a1") == first
    revised = box.call("agent.analyzeCampaigns", {"account_seed": 11, "evidence": evidence}, "a1/r1")
    assert revised["revision"] == 1
    for old, new in zip(first["budget_changes"], revised["budget_changes"]):  # more conservative
        assert abs(new["new_daily_budget_cents"] - new["old_daily_budget_cents"]) <= \
            abs(old["new_daily_budget_cents"] - old["old_daily_budget_cents"])
    unsure = box.call("agent.analyzeKeywords", {"account_seed": 11, "evidence": evidence,
                                                "scripted_answer": "uncertain"}, "a2")
    assert unsure["verdict"] == "uncertain" and unsure["confidence"] < 0.5 and unsure["bid_changes"]
    missing = box.call("agent.analyzeCompetitors", {"account_seed": 11, "evidence": None}, "a3")
    assert missing["verdict"] == "evidence_missing" and missing["missing"] == ["evidence"]
    with pytest.raises(ToolError, match="unknown scripted answer"):
        box.call("agent.analyzeCompetitors", {"account_seed": 11, "evidence": evidence, "scripted_answer": "x"}, "a4")


# ------------------------------------------------------------------ definitions

def _workflow() -> dict[str, Any]:
    return json.loads(json.dumps(load_pack(PACK_DIR).workflows["ads_audit"]))


def test_definition_round_trips_and_checks_revise() -> None:
    data = _workflow()
    definition = WorkflowDefinition.from_dict(data)
    assert WorkflowDefinition.from_dict(definition.to_dict()) == definition
    assert [t.id for t in definition.phases[1].tasks if t.agent] == \
        ["campaign_analysis", "keyword_analysis", "competitor_analysis"]
    assert retry_budget(definition.phases[0], definition.phases[0].tasks[1]) == 3 + 2
    assert retry_budget(definition.phases[2], definition.phases[2].tasks[0]) == 2  # on_error abort: own only
    data["phases"][1]["human_gate"]["revise_from"] = "data_collection"  # would re-run the report draft
    with pytest.raises(DefinitionError, match="side effect"):
        WorkflowDefinition.from_dict(data)
    data["phases"][1]["human_gate"].update(revise_from="analysis", max_revisions=0)
    with pytest.raises(DefinitionError, match="max_revisions"):
        WorkflowDefinition.from_dict(data)


def test_loader_refuses_a_revision_that_reruns_a_side_effect(tmp_path: Path) -> None:
    import shutil

    pack = Path(shutil.copytree(PACK_DIR, tmp_path / "ads_audit"))
    wf = pack / "workflows" / "ads_audit.yaml"
    wf.write_text(wf.read_text().replace("revise_from: analysis", "revise_from: data_collection"))
    with pytest.raises(CaseError, match="open_report_draft.*side effect"):
        load_pack(pack)


# ------------------------------------------------------------------ golden runs

@pytest.mark.parametrize("case_id", sorted(EXPECTED))
def test_golden_run_ends_as_expected(golden: dict[str, RunResult], case_id: str) -> None:
    run = golden[case_id]
    assert run.verdict == "passed", describe([run])
    assert run.outcome.status == EXPECTED[case_id]


def test_escalation_oracle_catches_an_engine_that_ignores_the_verdict(golden: dict[str, RunResult]) -> None:
    pack, cases = _target()
    unsure = ["keyword_agent_uncertain_escalates", "competitor_evidence_missing_escalates"]
    broken = sweep(pack, [cases[c] for c in unsure], ReferenceAdapter(engine=BROKEN, name=BROKEN),
                   crash="none", jobs=2)
    for run in broken.results:
        assert run.outcome.status == "succeeded", "the broken engine acted on an unsure answer"
        (failure,) = agent_verdicts(cases[run.case_id], pack, run.outcome)
        assert failure.oracle == "agent" and "ended succeeded after the agent answered" in failure.message
        assert run.verdict == "failed" and any(f.oracle == "agent" for f in run.failures)
    for case_id in unsure:  # the reference engine escalates the same cases: nothing to report
        assert agent_verdicts(cases[case_id], pack, golden[case_id].outcome) == []
        assert golden[case_id].outcome.stop_reason.startswith("escalated: agent step")


def test_revision_loop_is_bounded_and_uses_new_keys(golden: dict[str, RunResult]) -> None:
    once = golden["gate_denied_once_revised_then_granted"]
    (revision,) = kinds_of(once, "revision_started")
    assert revision["revision"] == 1 and revision["from_phase"] == "analysis"
    assert revision["steps"] == ["campaign_analysis", "keyword_analysis", "competitor_analysis",
                                 "analysis.human_gate"]
    keys = [c["idempotency_key"] for c in once.outcome.calls if c["tool"] in ("approvals.request",
                                                                               "agent.analyzeCampaigns")]
    wid = once.outcome.workflow_id
    assert keys == [f"{wid}/campaign_analysis", f"{wid}/approval/budget_approval",
                    f"{wid}/campaign_analysis/r1", f"{wid}/approval/budget_approval/r1"]
    twice = golden["gate_denied_past_max_revisions_compensates"]
    assert len(kinds_of(twice, "revision_started")) == 1  # max_revisions: 1
    assert len(kinds_of(twice, "approval_requested")) == 2 and len(kinds_of(twice, "approval_denied")) == 2
    assert twice.outcome.status == "failed" and "max_revisions 1" in twice.outcome.stop_reason


def test_retry_uses_the_phase_budget(golden: dict[str, RunResult]) -> None:
    ok = golden["keyword_fetch_retries_use_phase_budget"]
    assert [e["attempt"] for e in kinds_of(ok, "retry_scheduled")] == [1, 2, 3, 4, 5]
    spent = golden["campaign_fetch_retries_exhausted_fails"]
    assert [e["attempt"] for e in kinds_of(spent, "retry_scheduled")] == [1, 2, 3, 4, 5]
    assert spent.outcome.status == "failed"


def test_progress_events_are_present_and_monotone(golden: dict[str, RunResult]) -> None:
    fields = {"percent", "phases_done", "phases_total", "tasks_done", "tasks_total", "eta_s", "task"}
    for case_id, run in golden.items():
        events = [e for e in run.outcome.trace if e["kind"] in ("progress", "revision_started")]
        progress = [e for e in events if e["kind"] == "progress"]
        finished = [e["task"] for e in run.outcome.trace
                    if e["kind"] == "step_result" and e["transition"] in ("continue", "complete")]
        assert [e["task"] for e in progress] == finished, f"{case_id}: one progress event per finished task"
        if not progress:
            assert case_id == "campaign_fetch_retries_exhausted_fails"  # no task ever finished
            continue
        assert all(fields <= set(e) for e in progress), case_id
        assert all(0 <= e["percent"] <= 100 and e["tasks_done"] <= e["tasks_total"] for e in progress)
        assert all(e["eta_s"] is None or e["eta_s"] >= 0 for e in progress)
        done = [e["tasks_done"] for e in progress]
        assert done == sorted(done), f"{case_id}: work done went back: {done}"
        previous = None
        for e in events:  # percent only drops where a revision adds work
            if e["kind"] == "revision_started":
                previous = None
            elif previous is not None:
                assert e["percent"] >= previous["percent"], f"{case_id}: {previous} then {e}"
                assert e["phases_done"] >= previous["phases_done"]
            if e["kind"] == "progress":
                previous = e
        if run.outcome.status == "succeeded":
            assert progress[-1]["percent"] == 100.0 and progress[-1]["eta_s"] == 0.0
            assert progress[-1]["phases_done"] == progress[-1]["phases_total"] == 4
    happy = [e for e in golden["audit_approved_happy_path"].outcome.trace if e["kind"] == "progress"]
    assert [e["tasks_done"] for e in happy] == list(range(1, 11))
    assert happy[0]["eta_s"] > 3600, "hours of virtual work are left after the first task"


def test_long_horizon_in_virtual_time(golden: dict[str, RunResult]) -> None:
    trace = golden["audit_approved_happy_path"].outcome.trace
    assert trace[-1]["at"] - trace[0]["at"] >= 4 * 3600, "the audit takes hours of virtual time"


# ------------------------------------------------------------------ crashes

@pytest.mark.slow
def test_bounded_crash_sweep_passes() -> None:
    pack, cases = _target()
    results: list[RunResult] = []
    for case_id, points in POINTS.items():
        swept = sweep(pack, [cases[case_id]], ReferenceAdapter(), crash="every", jobs=2, only=points)
        results += swept.results
    killed = [r for r in results if r.crash_point is not None]
    assert len(killed) == sum(len(p) for p in POINTS.values())
    assert all(r.outcome is not None and r.outcome.crash_fired for r in killed), describe(killed)
    assert {r.verdict for r in results} == {"passed"}, describe(results)


@pytest.mark.slow
def test_full_sweep_passes_every_crash_point() -> None:
    pack, cases = _target()
    result = sweep(pack, list(cases.values()), ReferenceAdapter(), crash="every", jobs=2)
    assert sum(len(p) for p in result.crash_points.values()) == len(result.results) - len(cases)
    assert {r.verdict for r in result.results} == {"passed"}, \
        describe([r for r in result.results if r.verdict != "passed"])
