"""LangGraph under crashpoint: with durability "sync" the conformance case survives kills; with the
default "async" the generic sweep finds lost checkpoints (a step re-run after the next one began).

A bounded subset of crash points keeps this under a minute; ``crashpoint certify`` runs them all.
"""

from __future__ import annotations

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.adapters.langgraph_adapter import LangGraphAdapter, LangGraphSync  # noqa: E402
from crashpoint.harness.load.loader import load_target  # noqa: E402
from crashpoint.harness.run.sweep import sweep  # noqa: E402
from crashpoint.scenarios import builtin_pack  # noqa: E402
from verdicts import unverified_kills  # noqa: E402

CASE = builtin_pack("conformance") / "cases" / "resume_every_checkpoint.yaml"
#: Kills right where a step begins (LangGraph's async writer may still hold the previous checkpoint),
#: plus the classic windows around an effect and a checkpoint.
POINTS = ["step_started:gate:order_approval", "step_started:issue_refund#1", "step_started:notify_customer#1",
          "step_started:finish", "after_effect:refunds.issueRefund", "before_checkpoint:issued"]


def _sweep(adapter, points, tmp_path):
    pack, cases = load_target(CASE)
    return sweep(pack, cases, adapter, only=points, jobs=2, workdir=tmp_path, keep=True, worker_timeout_s=60)


@pytest.mark.slow
def test_sync_durability_survives_every_kill(tmp_path):
    points = POINTS[1:2] + POINTS[3:]  # one point where a step begins, the last step, the effect/checkpoint windows
    result = _sweep(LangGraphSync(), points, tmp_path)
    bad = [(r.crash_point, r.error, [f.message for f in r.failures]) for r in result.results if r.verdict != "passed"]
    assert bad == []
    assert len(result.results) == len(points) + 1
    assert "langgraph" in result.engine_version
    assert unverified_kills(result.results) == []  # each kill landed on the worker; a new pid resumed


@pytest.mark.slow
def test_async_durability_loses_checkpoints_and_the_sweep_finds_it(tmp_path):
    # The loss is a race between LangGraph's background checkpoint writer and the next step: on a quiet machine
    # the writer usually wins (CI, load 1: 0 losses in 3 sweeps). A 300 ms write (a slow disk) keeps the previous
    # checkpoint unwritten while the next step begins, so a kill there loses it whatever the load.
    result = _sweep(LangGraphAdapter("async", write_latency_ms=300), POINTS[:4], tmp_path)
    golden = next(r for r in result.results if r.crash_point is None)
    assert golden.verdict == "passed", golden.failures  # fault-free, async looks fine
    lost = [r for r in result.results if any("lost its place" in f.message for f in r.failures)]
    assert lost, [(r.crash_point, r.verdict, [f.message for f in r.failures]) for r in result.results]
    assert all(r.crash_point.startswith("step_started:") for r in lost)


def test_unknown_durability_is_refused():
    with pytest.raises(ValueError, match="durability"):
        LangGraphAdapter("eventually")


def test_a_negative_write_latency_is_refused():
    with pytest.raises(ValueError, match="write_latency_ms"):
        LangGraphAdapter("async", write_latency_ms=-1)
