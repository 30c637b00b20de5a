"""Team code that misbehaves under crashpoint (a node that ends its own worker, ...): never a pass, never a
finding crashpoint made up; the run says what happened."""

from __future__ import annotations

import re
import textwrap
from dataclasses import replace
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.run.target_sweep import run_one, sweep  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

GRAPH = '''
import operator, os, sys
from typing import Annotated, TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
import crashpoint

@crashpoint.effect("pay", key="k")
def pay(order, k=None):
    return {"paid": order}

class S(TypedDict, total=False):
    order: str
    log: Annotated[list, operator.add]

def approve(s):
    return {"log": [f"answer:{interrupt('ok?')}"]}

def issue(s):
    pay(s["order"], k="p-" + s["order"])
    {ending}
    return {"log": ["paid"]}

builder = StateGraph(S)
builder.add_node("approve", approve)
builder.add_node("issue", issue)
builder.add_edge(START, "approve")
builder.add_edge("approve", "issue")
builder.add_edge("issue", END)
'''


def _target(tmp_path: Path, ending: str) -> Target:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "hostile_graph.py").write_text(textwrap.dedent(GRAPH).replace("{ending}", ending))
    return Target.from_data({"target": "hostile", "engine": "langgraph", "entry": "hostile_graph:builder",
                             "pythonpath": [str(tmp_path / "code")], "inputs": [{"thread": "o1", "input": {"order": "1"}}],
                             "human": {"approve": [{"resume": "yes"}]}, "budget_s": 60})


@pytest.mark.parametrize("ending", ["os._exit(0)", "sys.exit(0)"])
def test_a_node_that_ends_its_own_worker_after_an_answer_is_an_error_not_a_redelivery(tmp_path: Path,
                                                                                     ending: str) -> None:
    """The ``answer`` worker's node ends the process with status 0 before the worker writes its report: the run
    is an ``error`` naming the missing report. Before, the driver read the ``start`` worker's report (the thread
    waiting on the approval), took the answer for lost with a kill, delivered it 3 more times and failed
    ``target.repeats_explained`` ("pay called 4 times ... no kill or fault explains any repeat"): a finding
    crashpoint made up from a stale file."""
    target = _target(tmp_path, ending)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "error", (r.verdict, r.failures, r.notes)
    assert "worker 2 exited with 0 without writing its report" in r.error
    assert not r.failures and not any("lost with a kill" in n for n in r.notes)


def test_the_same_graph_without_the_exit_passes(tmp_path: Path) -> None:
    """The control: the graph passes when its node returns (so the test above fails for the exit alone)."""
    target = _target(tmp_path, "pass")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "passed", (r.error, r.failures)


def test_a_case_fault_on_an_effect_never_called_is_an_error_not_a_pass(tmp_path: Path) -> None:
    """A case's fault naming an effect the code never calls (here misspelt ``pay_refund`` for ``pay``) tests
    nothing: before, the golden run passed (``crashpoint run --crash none``: passed 1) as if the timeout had
    been survived."""
    target = _target(tmp_path, "pass")
    case = replace(target.cases[0], faults=[{"effect": "pay", "outcome": "slow", "seconds": 0.01},
                                            {"effect": "pay_refund", "outcome": "timeout"}])
    r = run_one(target, case, "sync", tmp_path / "run", None, None)
    assert (r.verdict, r.error) == ("error", "the case's faults never fired, so nothing was tested: "
                                             "pay_refund timeout"), r.failures


def test_a_run_folder_of_an_earlier_run_is_refused_and_a_reused_workdir_gets_new_folders(tmp_path: Path) -> None:
    """A second run in the folder of a first one ran nothing (the thread was finished in the old checkpoints, the
    old ledger answered for it) and passed; a kill run there found no kill and failed. A run now refuses such a
    folder (``error``), and a sweep into a ``workdir`` an earlier sweep filled (the ``crashpoint_sweep`` fixture
    called twice in one test: ``tmp_path / "runs"`` both times) gives its runs new folders."""
    target = _target(tmp_path, "pass")
    first = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    again = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert first.verdict == "passed" and again.verdict == "error", (first.error, again.verdict)
    assert "holds an earlier run (target.json, " in again.error
    sweeps = [sweep(target, crash="none", workdir=tmp_path / "runs", workers=1) for _ in range(2)]
    assert [[r.verdict for r in s.results] for s in sweeps] == [["passed"], ["passed"]]
    golden = sorted(p.name for p in (tmp_path / "runs").glob("*/golden*") if p.suffix != ".probe")
    assert golden == ["golden", "golden-again", "golden.2", "golden.2-again"], golden  # each golden run made twice


def test_a_node_that_never_ends_fails_within_the_budget_naming_it_in_tenths(tmp_path: Path) -> None:
    """A node that sleeps past ``budget_s``: ``target.ends_within_budget``, the worker's wait in tenths of a second.
    Before, the message carried the driver's raw float ("worker did not exit within 2.79057462200012 s")."""
    # 10 s: room for the worker to start at a load of 20 (at 6 s the budget was spent before the node began)
    target = replace(_target(tmp_path, "import time; time.sleep(300)"), budget_s=10)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "failed", (r.verdict, r.error)
    found = [f.message for f in r.failures if f.rule == "target.ends_within_budget"]
    found = found[0]
    assert re.fullmatch(r"the run did not end within 10 s: worker did not exit within \d+\.\d s \(killed with its "
                        r"process group\)", found), found
    assert r.wall_s < 300, r.wall_s  # ended by the budget, not by the node's own end (no timing asserted)
