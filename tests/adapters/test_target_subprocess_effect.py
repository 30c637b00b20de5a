"""An effect called in a process the harness did not start as a worker (a node's subprocess) is not in the run's
ledger: crashpoint neither saw it nor could kill around it, so the run is an ``error`` naming the pid and the
effect, never a pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

EFFECTS = '''
import crashpoint

@crashpoint.effect("draft", key="k")
def draft(order, k=None):
    return {"drafted": order}

@crashpoint.effect("pay", key="k")
def pay(order, k=None):
    return {"paid": order}
'''

GRAPH = '''
import os, subprocess, sys
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from sub_effects import draft

CODE = {code!r}

class S(TypedDict, total=False):
    order: str
    done: bool

def issue(s):
    draft(s["order"], k="d-" + s["order"])
    if {spawn}:
        subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, %r); import sub_effects; "
                        "sub_effects.pay(%r, k='p-1')" % (CODE, s["order"])], check=True, env={env})
    return {"done": True}

builder = StateGraph(S)
builder.add_node("issue", issue)
builder.add_edge(START, "issue")
builder.add_edge("issue", END)
'''


#: The start of the note on a process started outside the ledger's view (effects.UNSEEN_NOTE).
UNSEEN = "a process started outside the ledger's view"


def _target(tmp_path: Path, spawn: bool, env: str = "None") -> Target:
    code = tmp_path / "code"
    code.mkdir()
    (code / "sub_effects.py").write_text(textwrap.dedent(EFFECTS))
    (code / "sub_graph.py").write_text(textwrap.dedent(GRAPH).replace("{code!r}", repr(str(code)))
                                       .replace("{spawn}", str(spawn)).replace("{env}", env))
    return Target.from_data({"target": "subproc", "engine": "langgraph", "entry": "sub_graph:builder",
                             "pythonpath": [str(code)], "inputs": [{"thread": "o1", "input": {"order": "1"}}],
                             "budget_s": 60})


def test_an_effect_called_in_a_subprocess_of_a_node_makes_the_run_an_error(tmp_path: Path) -> None:
    """Before, ``pay`` (called in the node's subprocess, where no effect session is installed) went through the
    decorator's pass-through: the ledger held ``draft`` alone and the golden run passed."""
    target = _target(tmp_path, spawn=True)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "error", (r.verdict, r.failures, r.notes)
    assert r.error.startswith("crashpoint.effect called in pid "), r.error
    assert "not a worker process: pay (key p-1" in r.error, r.error
    assert [c.effect for c in r.outcome.calls] == ["draft"]


def test_the_same_node_without_the_subprocess_passes(tmp_path: Path) -> None:
    """The control: the graph passes when the node makes no outside call."""
    target = _target(tmp_path, spawn=False)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "passed", (r.error, r.failures)


def test_a_subprocess_started_with_a_cleared_environment_is_named_in_the_runs_notes(tmp_path: Path) -> None:
    """The issue's case (item 7): the payment made in a subprocess started with a cleared environment (no
    CRASHPOINT_RUN_DIR) is invisible to the ledger and to the outside-effects log; the run cannot see it, so it says
    so: a note naming the pid, the command and the node that started it. Before, nothing said it (48 of 48 passed)."""
    target = _target(tmp_path, spawn=True, env="{'PATH': '/usr/bin:/bin'}")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    unseen = [n for n in r.notes if n.startswith(UNSEEN)]
    assert len(unseen) == 1, r.notes
    assert "in o1@issue: " in unseen[0] and " -c " in unseen[0] and "are not observed" in unseen[0], unseen
    assert [c.effect for c in r.outcome.calls] == ["draft"] and not r.outcome.outside
    from crashpoint.harness.engines.effects import unseen_summary

    assert unseen_summary([r])[0].startswith("not observed: 1 run(s) started a process outside the ledger's view")
    # and the run is an error, not a pass (issue 27's false PASS: 48 of 48 passed, two of them paid twice)
    assert r.verdict == "error" and "ran without the run's marker CRASHPOINT_RUN_DIR" in r.error, (r.verdict, r.error)
    assert "outside_ledger:" in r.error


def test_a_process_the_target_says_makes_no_effect_is_named_but_passes(tmp_path: Path) -> None:
    """``outside_ledger:`` names the commands a team knows make no side effect: the run passes, the note stays."""
    import dataclasses

    target = dataclasses.replace(_target(tmp_path, spawn=True, env="{'PATH': '/usr/bin:/bin'}"),
                                 outside_ledger=["* -c *"])
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "passed", (r.error, r.failures)
    assert [n for n in r.notes if n.startswith(UNSEEN)], r.notes


def test_a_subprocess_that_keeps_the_runs_marker_is_not_named_unseen(tmp_path: Path) -> None:
    """The control: an environment rebuilt from the worker's own keeps the marker (its effect is an outside call)."""
    target = _target(tmp_path, spawn=True, env="dict(os.environ)")
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert not [n for n in r.notes if n.startswith(UNSEEN)], r.notes
    assert r.verdict == "error" and "not a worker process: pay" in r.error
