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
