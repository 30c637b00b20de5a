"""The code-deploy fault on LangGraph and DBOS targets (issue 14 item 2): once the run first rests with the refund
waiting for its approval, every later worker runs the version the case names (the target's ``versions``). A
compatible change (a node or step added after the wait) passes; an incompatible one (the waiting node renamed, a
step moved before the wait) is a finding that says what the engine did, quoting its own error where it has one."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.errors import CaseError
from crashpoint.harness.run.target_sweep import run_one
from crashpoint.harness.load.target import Target

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _golden(path: Path, case: str, tmp_path: Path):
    target = Target.from_file(path)
    return run_one(target, target.case(case), "sync", tmp_path, None, None, keep=True)


def _deployed(r) -> list[str]:
    return [d["version"] for d in r.outcome.deliveries if d["kind"] == "deploy"]


@pytest.mark.slow  # a golden run with a deploy: 7 to 15 s
def test_a_node_added_after_the_wait_resumes_in_the_new_graph(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    r = _golden(EXAMPLES / "langgraph_refund/deploy.yaml", "deploy-v2", tmp_path)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert _deployed(r) == ["v2"]
    assert "fraud:low" in r.outcome.threads["order-1001"]["values"]["log"]  # the v2 node ran


@pytest.mark.slow  # a golden run with a deploy: 7 to 15 s
def test_the_waiting_node_renamed_drops_the_thread_and_says_so(tmp_path: Path) -> None:
    pytest.importorskip("langgraph")
    r = _golden(EXAMPLES / "langgraph_refund/deploy.yaml", "deploy-v2-renamed", tmp_path)
    assert r.verdict == "failed" and _deployed(r) == ["v2-renamed"]
    [found] = [f for f in r.failures if f.rule == "target.ends_within_budget"]
    assert "node(s) approve that this graph does not have" in found.message
    assert not any(c.effect == "issue_refund" for c in r.outcome.calls)
    # the worker's trap report reaches the run's notes: a recovery loop trusting next == () drops this thread
    assert any("get_state().next == () although the thread has not finished" in n for n in r.outcome.notes), \
        r.outcome.notes


@pytest.mark.slow  # a golden run with a deploy: 7 to 15 s
def test_a_dbos_step_added_after_the_wait_replays(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    r = _golden(EXAMPLES / "dbos_refund/dbos_deploy.yaml", "deploy-v2", tmp_path)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert _deployed(r) == ["v2"]
    assert r.outcome.threads["refund-1001"]["status"] == "finished"


@pytest.mark.slow  # a golden run with a deploy: 7 to 15 s
def test_a_dbos_step_moved_before_the_wait_is_refused_by_dbos(tmp_path: Path) -> None:
    pytest.importorskip("dbos")
    r = _golden(EXAMPLES / "dbos_refund/dbos_deploy.yaml", "deploy-v2-reordered", tmp_path)
    assert r.verdict == "failed" and _deployed(r) == ["v2-reordered"]
    [stuck] = [f for f in r.failures if f.rule == "target.ends_within_budget"]
    assert "Check that your workflow is deterministic" in stuck.message  # DBOS's own words
    [path] = [f for f in r.failures if f.rule == "target.replay_deterministic"]
    assert "a deploy (v2-reordered) changed the workflow's steps" in path.message


def test_a_deploy_of_a_langgraph_target_must_name_one_of_its_versions() -> None:
    data = Target.from_file(EXAMPLES / "langgraph_refund/deploy.yaml").to_data()
    data["cases"] = [{"name": "d", "deploy": "v9"}]
    with pytest.raises(CaseError, match="which versions does not name"):
        Target.from_data(data)


# ---------------------------------------------------------------- a deploy while a workflow sleeps on a durable timer
SLEEPING = EXAMPLES / "temporal_refund/sleeping_deploy.yaml"


def _sleeping(timeout_s: float) -> Target:
    """The sleeping-deploy example with an approval deadline of ``timeout_s`` (time compressed: about a second)."""
    data = Target.from_file(SLEEPING).to_data()
    data["inputs"][0]["input"]["approval_timeout_s"] = timeout_s
    return Target.from_data(data, file=str(SLEEPING))


def test_a_deploy_at_a_crash_point_is_written_in_the_case() -> None:
    target = Target.from_file(SLEEPING)
    case = target.case("deploy-v2-unpatched-while-sleeping")
    injected = case.injection()
    assert (injected.deploy, injected.deploy_at) == ("v2-unpatched", "timer_fired:refund-1004")
    assert injected.kills == ["timer_fired:refund-1004"]  # the old code's worker is stopped there


@pytest.mark.slow  # two golden runs with a deploy: 10 to 20 s each
@pytest.mark.parametrize("timeout_s", [40, 3600])
def test_a_deploy_while_the_workflow_sleeps_replays_on_the_new_code(tmp_path: Path, timeout_s: float) -> None:
    """The new code's worker is there when the timer fires (40 s or an hour, default options): the unpatched v2 fails
    with Temporal's nondeterminism error, the patched one replays and expires. Before: with ``deploy: NAME`` the
    deploy waited for the run to rest, so a 40 s timer fired with no worker alive (the run ended waiting), and a
    compressed one fired before the deploy (it never happened)."""
    pytest.importorskip("temporalio")
    target = _sleeping(timeout_s)
    bad = run_one(target, target.case("deploy-v2-unpatched-while-sleeping"), "sync", tmp_path / "bad", None, None,
                  keep=True)
    assert bad.verdict == "failed" and _deployed(bad) == ["v2-unpatched"], (bad.error, bad.outcome.notes)
    [stuck] = [f for f in bad.failures if f.rule == "target.ends_within_budget"]
    assert "[TMPRL1100] Nondeterminism error" in stuck.message, stuck.message
    good = run_one(target, target.case("deploy-v2-patched-while-sleeping"), "sync", tmp_path / "good", None, None,
                   keep=True)
    assert good.verdict == "passed", (good.error, [f.message for f in good.failures])
    assert _deployed(good) == ["v2-patched"]
    assert good.outcome.threads["refund-1004"]["values"]["result"]["status"] == "expired"


def test_a_sweep_kills_only_where_the_run_goes_after_the_cases_own_kills() -> None:
    """A sweep's kill fires during the recovery from the case's own kills (a deploy's ``at``): the points its golden
    run passed before them are never reached again (before: 11 of the 40 runs of the patched case were ``error``,
    "crash point activity:refund-1004@draft was never reached")."""
    from crashpoint.harness.run.target_sweep import subject_of

    subject = subject_of(Target.from_file(SLEEPING))
    unit = next(u for u, (c, _) in subject._of.items() if c.name == "deploy-v2-patched-while-sleeping")
    log = ["activity:refund-1004@draft", "timer_fired:refund-1004", "task_done:refund-1004#3"]
    assert subject.sweepable(unit, log) == ["task_done:refund-1004#3"]
