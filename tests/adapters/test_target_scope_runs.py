"""On real LangGraph runs (issue 27 item 1, issue 24 item 4): an ``effects:`` entry the node imported by name before
the worker patched it is never called through crashpoint, and the golden run says so (before: it passed, the charge
unseen); a rejection path that makes no effect passes when its case says ``no_effect: true`` (before: no way to say
so, "the golden run made no tool call"); a fake provider that keeps its state in ``crashpoint.run_dir()`` keeps it per
run (a file in the working directory is shared by every run of a sweep)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from installed import needs

# slow: golden runs (and one sweep) of real LangGraph workers, 5-20 s each at load 5-25
pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one, sweep  # noqa: E402

PAYMENTS = '''
import json
from pathlib import Path
import crashpoint

def charge(order, key=None):
    """The team's provider call, named under effects: (no decorator). Its fake keeps state in the run's folder."""
    state = Path(crashpoint.run_dir() or ".") / "provider.json"
    seen = json.loads(state.read_text()) if state.exists() else []
    state.write_text(json.dumps(seen + [order]))
    return {"charged": order}
'''

GRAPH = '''
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
import crashpoint
import scope_payments
{import_line}

@crashpoint.effect("draft", key="k")
def draft(order, k=None):
    return {"drafted": order}

class S(TypedDict, total=False):
    order: str
    answer: dict
    done: bool

def approve(s):
    return {"answer": interrupt("ok?")}

def issue(s):
    if not s["answer"].get("approved"):
        return {"done": False}          # the rejection path: no side effect at all
    draft(s["order"], k="d-" + s["order"])
    {call}(s["order"], key="c-" + s["order"])
    return {"done": True}

builder = StateGraph(S)
builder.add_node("approve", approve)
builder.add_node("issue", issue)
builder.add_edge(START, "approve")
builder.add_edge("approve", "issue")
builder.add_edge("issue", END)
'''


def _target(tmp_path: Path, by_name: bool, both: bool = False, **extra) -> Target:
    """``by_name``: the node calls ``charge`` imported by name; ``both``: it calls it through its module, then by a
    name imported before the worker wrapped it (``_direct``, no key)."""
    code = tmp_path / "code"
    code.mkdir(exist_ok=True)
    (code / "scope_payments.py").write_text(textwrap.dedent(PAYMENTS))
    graph = textwrap.dedent(GRAPH).replace("{import_line}", "from scope_payments import charge" if by_name else
                                           "from scope_payments import charge as _direct" if both else "")
    call = "charge" if by_name else "scope_payments.charge"
    if both:
        call = '_direct(s["order"] + "-bonus")\n    ' + call
    (code / "scope_graph.py").write_text(graph.replace("{call}", call))
    return Target.from_data({"target": "scope", "engine": "langgraph", "entry": "scope_graph:builder",
                             "pythonpath": [str(code)], "inputs": [{"thread": "o1", "input": {"order": "1"}}],
                             "effects": [{"path": "scope_payments:charge", "key": "key"}], "human": {"approve": [{"resume": {"approved": True}}]},
                             "budget_s": 90, **extra})


def test_an_effects_entry_the_node_imported_by_name_is_never_called_and_the_golden_run_says_so(tmp_path: Path) -> None:
    target = _target(tmp_path, by_name=True)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "error", (r.verdict, r.error, [f.message for f in r.failures])
    # the worker names the module and global holding the original (before attack 27 N2: "the golden run never called
    # the effects: entry charge (scope_payments:charge)", which target_scope still says when no global is found)
    assert r.error.startswith("scope_graph.charge holds the effects: entry charge (scope_payments:charge) unwrapped"), \
        r.error


def test_an_effects_entry_also_called_by_a_name_imported_before_the_patch_makes_the_run_an_error(tmp_path: Path
                                                                                                   ) -> None:
    """attack 27 N2: one call through the module (seen), one through ``_direct`` (never seen): the run passed."""
    target = _target(tmp_path, by_name=False, both=True)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None)
    assert r.verdict == "error", (r.verdict, r.error, [f.message for f in r.failures])
    assert r.error.startswith("scope_graph._direct holds the effects: entry charge (scope_payments:charge) unwrapped: "
                              "calls through it are not observed"), r.error


def test_the_same_graph_looking_the_function_up_in_its_module_passes(tmp_path: Path) -> None:
    target = _target(tmp_path, by_name=False)
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert sorted(c.effect for c in r.outcome.calls) == ["charge", "draft"]


def test_a_rejection_path_that_makes_no_effect_passes_when_its_case_says_so(tmp_path: Path) -> None:
    denied = {"approve": [{"resume": {"approved": False}, "grants": False}]}
    target = _target(tmp_path, by_name=False, cases=[{"name": "silent", "human": denied},
                                                     {"name": "rejected", "human": denied, "no_effect": True}])
    silent = run_one(target, target.case("silent"), "sync", tmp_path / "silent", None, None)
    assert silent.verdict == "error" and silent.error.startswith("the golden run made no tool call"), silent.error
    rejected = run_one(target, target.case("rejected"), "sync", tmp_path / "rejected", None, None)
    assert rejected.verdict == "passed", (rejected.error, [f.message for f in rejected.failures])


def test_a_fake_provider_keeps_its_state_in_each_runs_own_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
                                                                 ) -> None:
    """A sweep's runs go two at a time: each run's provider.json (the golden run's two, two crash runs) holds that
    run's charges only (one each; a kill
    after the charge makes the recovery answer it by key, from the ledger), and none is written where the sweep
    was started."""
    monkeypatch.chdir(tmp_path)
    target = _target(tmp_path, by_name=False)
    result = sweep(target, crash_points=["after_effect:charge", "node:o1@issue"], workers=2,
                   workdir=tmp_path / "runs")
    assert [r.verdict for r in result.results] == ["passed"] * 3, [(r.crash_point, r.error) for r in result.results]
    files = sorted((tmp_path / "runs").rglob("provider.json"))
    assert len(files) == 4 and all(json.loads(f.read_text()) == ["1"] for f in files), \
        [(f, f.read_text()) for f in files]
    assert not (tmp_path / "provider.json").exists()
