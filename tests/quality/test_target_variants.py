"""Each broken variant of examples/langgraph_refund is caught by the rule named for it, 3 times of 3 (none by
luck), and the correct graph passes the same runs."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BASE = Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")

#: variant, case, durability, crash point (None: the golden run finds it), the rule that must catch it
VARIANTS = [
    ("no_key", "approved", "sync", "after_effect:issue_refund", "side_effects.at_most_once"),
    ("wall_clock", "approved", "sync", "after_effect:draft_refund", "differential.same_effects"),
    ("email_before_interrupt", "approved", "sync", None, "target.repeats_explained"),
    ("ignores_denial", "denied-then-approved", "sync", None, "target.approval_gate"),
    ("default_retry", "issue-flaky", "sync", None, "target.ends_within_budget"),
    ("trusts_any_answer", "approval-late", "sync", None, "target.approval_gate"),  # a late grant approves a re-ask
    ("builder", "approved", "exit", None, "target.durable_before_effect"),  # the correct graph, durability="exit"
]


@pytest.mark.parametrize("variant, case, mode, point, rule", VARIANTS, ids=[v[0] + "-" + v[2] for v in VARIANTS])
def test_the_named_rule_catches_the_variant_every_time(tmp_path: Path, variant: str, case: str, mode: str,
                                                       point: str | None, rule: str) -> None:
    module = "graph" if variant == "builder" else "variants"
    target = dataclasses.replace(BASE, entry=f"langgraph_refund.{module}:{variant}")
    golden = None
    if point is not None:
        golden = run_one(target, target.case(case), mode, tmp_path / "golden", None, None).outcome
        correct = run_one(BASE, BASE.case(case), mode, tmp_path / "correct", point,
                          run_one(BASE, BASE.case(case), mode, tmp_path / "correct-golden", None, None).outcome)
        assert correct.verdict == "passed", [f.message for f in correct.failures]
    for n in range(3):
        result = run_one(target, target.case(case), mode, tmp_path / f"run{n}", point, golden)
        assert result.verdict == "failed", result.error
        assert rule in {f.rule for f in result.failures}, [f.message for f in result.failures]
        if point is not None:
            assert result.kills == 1 and any(p["rc"] == -9 for p in result.pids)


def test_the_correct_graph_passes_the_golden_runs_that_catch_variants(tmp_path: Path) -> None:
    for case in ("approved", "denied-then-approved", "issue-flaky", "approval-late"):
        result = run_one(BASE, BASE.case(case), "sync", tmp_path / case, None, None)
        assert result.verdict == "passed", (case, [f.message for f in result.failures], result.error)


@pytest.mark.parametrize("kind", ["start", "answer"])
def test_two_live_processes_on_one_thread_are_caught_every_time(tmp_path: Path, kind: str) -> None:
    """LangGraph does not serialise two invocations of one thread: a start request or an approval delivered
    twice at once runs the same step in two live processes (the app must hold a lock per thread). The two
    processes meet inside the step (a rendezvous at each one's first effect call, the other pid verified a live
    worker of the run), so the overlap is certain, not a matter of timing (each process sets up the saver's
    tables before the barrier, one at a time: at once, one got ``database is locked`` and ran no node, about 1 try
    in 4 before; see test_target_langgraph::test_two_processes_opening_a_new_run_at_once_both_get_the_saver)."""
    from crashpoint.harness.load.target import TargetCase

    target = dataclasses.replace(BASE, cases=[TargetCase(f"twice-{kind}", duplicate=kind)])
    for n in range(3):  # every try: a try whose processes never overlapped is an `error` and fails here
        result = run_one(target, target.cases[0], "sync", tmp_path / str(n), None, None)
        assert result.verdict == "failed", result.error
        assert "target.single_live_process" in {f.rule for f in result.failures}
        assert sum(1 for p in result.pids if p.get("duplicate")) == 1
        (met,) = [d["met"] for d in result.outcome.deliveries if d["kind"] == "rendezvous"]
        pids = {p["pid"] for p in result.pids if p["phase"] == kind}
        assert len(pids) == 2 and met == {a: [b] for a, b in zip(sorted(pids), sorted(pids, reverse=True))}, met


def test_a_late_answer_reaches_the_thread_after_it_moved_on_and_the_correct_graph_asks_again(tmp_path: Path) -> None:
    """The reviewer's grant of ask 1 arrives after the deadline's denial sent the agent on to a revised draft:
    it is delivered to the re-ask (ask 2), which the example recognises as an answer to another ask."""
    result = run_one(BASE, BASE.case("approval-late"), "sync", tmp_path, None, None)
    assert result.verdict == "passed", [f.message for f in result.failures]
    out = result.outcome
    assert [(d["kind"], d.get("grants")) for d in out.deliveries] == [("answer", False), ("late_answer", None)]
    late = out.deliveries[1]
    assert late["to"] == "approve" and late["resume"] == {"approved": True, "ask": 1}
    assert [(d["granted"], d["by"]) for d in out.decisions] == [(False, "crashpoint"), (True, "crashpoint-late")]
    status = out.threads["order-1001"]
    assert status["status"] == "waiting" and status["values"]["log"][-1] == "approval:stale-ask-1"
    assert not [c for c in out.calls if c.effect == "issue_refund"]


def test_the_invoke_error_of_either_process_of_a_duplicate_is_kept(tmp_path: Path) -> None:
    """Both processes of a duplicated start write ``threads.json`` and the last one's report replaces the other's:
    an invoke that raised in the other process was lost (the note came or not, by which process ended last). Each
    process now records its own (``invoke-errors.log``): the note names the process, every time."""
    from crashpoint.harness.run.target_driver import run_target
    from crashpoint.harness.load.target import TargetCase

    (tmp_path / "twin_raises.py").write_text(
        "import sys\n"
        "from langgraph_refund import graph\n\n\n"
        "def draft(state):\n"
        "    made = graph.draft(state)\n"
        "    if '--duplicate' in sys.argv:  # the second delivery's process only, after the rendezvous\n"
        "        raise RuntimeError('the twin draft failed')\n"
        "    return made\n\n\n"
        "builder = graph.make_builder(nodes={'draft': draft})\n")
    target = dataclasses.replace(BASE, entry="twin_raises:builder", pythonpath=[*BASE.pythonpath, str(tmp_path)],
                                 cases=[TargetCase("twice-start", duplicate="start")])
    for n in range(2):
        out = run_target(target, target.cases[0], "sync", tmp_path / f"run{n}")
        starts = {p["pid"] for p in out.pids if p["phase"] == "start"}
        raised = [note for note in out.notes if "invoke raised RuntimeError: the twin draft failed" in note]
        assert len(raised) == 1 and any(f"pid {pid} of the duplicated start)" in raised[0] for pid in starts), out.notes
        assert [d["kind"] for d in out.deliveries][:2] == ["duplicate_start", "rendezvous"]
