"""A target case's registered fault kinds, each in the one spelling ``{kind: ...}``, in real runs (issue 23 item 2): on
the LangGraph example a tool fault aimed at an effect's Nth call hits that call only, a case's own kill fires
(verified) before the sweep's, a masked case is judged against its fault-free run, the kill of a case finds the bug
of a broken variant, a duplicate start runs two live processes (caught), a deploy fault runs the next version; on
Temporal a server_crash fault SIGKILLs the server while the refund waits. (The workers kind in this spelling runs on
DBOS in tests/adapters/test_target_dbos_workers.py, ``fault-kind``.)"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

pytestmark = [pytest.mark.slow]

from crashpoint.harness.load.target import Target, TargetCase  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")
langgraph = needs("langgraph.checkpoint.sqlite")


def _run(case: TargetCase, run_dir: Path, crash_point: str | None = None, entry: str | None = None):
    """``case`` run once as the one case of a copy of the example (rules find a run's case in its target)."""
    target = dataclasses.replace(TARGET, cases=[case], entry=entry or TARGET.entry)
    return run_one(target, case, "sync", run_dir, crash_point, None)


@langgraph
def test_a_tool_fault_aims_at_the_nth_call_of_an_effect(tmp_path: Path) -> None:
    """``call: 2`` of notify_customer times out: the first notification (received) goes out, the second (refunded)
    fails once and its node's retry sends it; the thread finishes as without the fault."""
    case = TargetCase("second-notify", faults=[{"kind": "tool", "tool": "notify_customer", "call": 2,
                                                "outcome": "timeout"}])
    r = _run(case, tmp_path / "run")
    assert r.verdict == "passed", (r.error, r.failures)
    notify = [c.outcome for c in r.outcome.calls if c.effect == "notify_customer"]
    assert notify == ["applied", "failed", "applied"]
    missed = dataclasses.replace(case, name="third", faults=[{"kind": "tool", "tool": "notify_customer", "call": 3,
                                                               "outcome": "timeout"}])
    r = _run(missed, tmp_path / "missed")  # there is no third call: nothing tested
    assert (r.verdict, r.error) == ("error", "the case's faults never fired, so nothing was tested: "
                                             "notify_customer timeout"), r.failures


@langgraph
def test_a_cases_kill_fires_first_and_a_masked_case_ends_as_its_fault_free_run(tmp_path: Path) -> None:
    case = TargetCase("killed", faults=[{"kind": "kill", "at": "after_effect:issue_refund"}], like_fault_free=True)
    r = _run(case, tmp_path / "golden")
    assert r.verdict == "passed", (r.error, r.failures)
    assert r.outcome.fired == ["after_effect:issue_refund"] and r.outcome.kills == 1
    assert (tmp_path / "golden-fault-free").is_dir()  # the reference run, beside it
    both = _run(case, tmp_path / "pair", "after_effect:notify_customer#2")
    assert both.outcome.fired == ["after_effect:issue_refund", "after_effect:notify_customer#2"], both.error
    assert both.verdict == "passed", (both.error, both.failures)
    r = _run(case, tmp_path / "broken", entry="langgraph_refund.variants:no_key")
    assert r.verdict == "failed" and {f.rule for f in r.failures} >= {"side_effects.at_most_once"}, r.error


@langgraph
def test_like_fault_free_is_what_catches_a_key_from_the_wall_clock(tmp_path: Path) -> None:
    """The wall_clock variant drafts again under a new key after a kill: no property sees it (each key applied once);
    only the comparison with the fault-free run does, which like_fault_free asks for."""
    killed = TargetCase("killed", faults=[{"kind": "kill", "at": "after_effect:draft_refund"}])
    wall_clock = "langgraph_refund.variants:wall_clock"
    alone = _run(killed, tmp_path / "alone", entry=wall_clock)
    assert alone.verdict == "passed", (alone.error, alone.failures)
    compared = _run(dataclasses.replace(killed, like_fault_free=True), tmp_path / "compared", entry=wall_clock)
    assert compared.verdict == "failed" and "differential.same_effects" in {f.rule for f in compared.failures}


@langgraph
def test_a_duplicate_start_fault_runs_two_live_processes_at_once(tmp_path: Path) -> None:
    """``{kind: duplicate, event: start}``: the start request delivered twice at once; LangGraph does not serialise
    two invocations of one thread, so the two processes meet inside the step and the rule says so (as the older
    ``duplicate: start`` does, tests/quality/test_target_variants.py)."""
    case = TargetCase("twice", faults=[{"kind": "duplicate", "event": "start"}])
    assert case.duplicate == "start"
    r = _run(case, tmp_path / "run")
    assert r.verdict == "failed" and "target.single_live_process" in {f.rule for f in r.failures}, r.error
    assert [d["kind"] for d in r.outcome.deliveries][:2] == ["duplicate_start", "rendezvous"]
    assert len({p["pid"] for p in r.outcome.pids if p["phase"] == "start"}) == 2


@langgraph
def test_a_deploy_fault_runs_the_named_version_once_the_refund_waits(tmp_path: Path) -> None:
    """``{kind: deploy, version: v2}`` of examples/langgraph_refund/deploy.yaml: every worker after the wait runs v2
    (its new node ran) and the refund ends as v2 finishes it."""
    target = Target.from_file(ROOT / "examples/langgraph_refund/deploy.yaml")
    case = TargetCase("deploy-kind", faults=[{"kind": "deploy", "version": "v2"}])
    r = run_one(dataclasses.replace(target, cases=[case]), case, "sync", tmp_path / "run", None, None)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert [d["version"] for d in r.outcome.deliveries if d["kind"] == "deploy"] == ["v2"]
    assert "fraud:low" in r.outcome.threads["order-1001"]["values"]["log"]


@needs("temporalio")
def test_a_server_crash_fault_kills_the_temporal_server_while_the_refund_waits(tmp_path: Path) -> None:
    """``{kind: server_crash}`` on the Temporal example: the server is SIGKILLed (gone afterwards) while the refund
    waits for its approval, a new one starts on the same database, and the refund finishes."""
    from crashpoint.harness.engines.effects import alive
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    target = Target.from_file(ROOT / "examples/temporal_refund/target.yaml")
    case = TargetCase("server-crash-kind", faults=[{"kind": "server_crash"}])
    r = run_one(dataclasses.replace(target, cases=[case]), case, "sync", tmp_path / "run", None, None)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    [crash] = [d for d in r.outcome.deliveries if d["kind"] == "server_crash"]
    assert not alive(crash["killed"]) and crash["pid"] != crash["killed"]
    assert r.outcome.threads["refund-1001"]["status"] == "finished"
