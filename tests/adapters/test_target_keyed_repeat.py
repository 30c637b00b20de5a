"""On real LangGraph runs (issue 27 item 6): an effect called before ``interrupt()`` runs again when the thread
resumes (LangGraph re-runs an interrupted node from its start, as documented). With no key the repeat applies
twice, and side_effects.at_most_once says so with a hint: "give it a key derived from the workflow's state".
Followed, the hint must lead to a passing run: the repeat is answered by its key (a ``duplicate``), the effect
happens once, and the run passes with a note naming LangGraph's behaviour. Before, target.repeats_explained failed
every run of the keyed graph, the golden one included ("no kill, fault or engine retry explains any repeat")."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from installed import needs

# slow: golden and crash runs of real LangGraph workers, 5-20 s each at load 5-25
pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

GRAPH = '''
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
import crashpoint

@crashpoint.effect("notify", key="key")
def notify(order, key=None):
    return {"sent": order}

class S(TypedDict, total=False):
    order: str
    answer: dict
    done: bool

def approve(s):
    notify(s["order"]{key})          # before interrupt(): runs again when the thread resumes
    return {"answer": interrupt("ok?")}

def issue(s):
    return {"done": bool(s["answer"].get("approved"))}

builder = StateGraph(S)
builder.add_node("approve", approve)
builder.add_node("issue", issue)
builder.add_edge(START, "approve")
builder.add_edge("approve", "issue")
builder.add_edge("issue", END)
'''

HINT = "give it a key derived from the workflow's state"
NOTE = ("LangGraph re-runs an interrupted node from its start on resume: 1 call(s) repeated, answered by its key "
        "(notify key=n-1 in o1@approve: applied once, 1 duplicate(s))")


def _target(tmp_path: Path, keyed: bool) -> Target:
    code = tmp_path / ("keyed" if keyed else "unkeyed")
    code.mkdir()
    (code / "repeat_graph.py").write_text(textwrap.dedent(GRAPH).replace(
        "{key}", ', key="n-" + s["order"]' if keyed else ""))
    return Target.from_data({"target": "repeat", "engine": "langgraph", "entry": "repeat_graph:builder",
                             "pythonpath": [str(code)], "inputs": [{"thread": "o1", "input": {"order": "1"}}],
                             "human": {"approve": [{"resume": {"approved": True}}]}, "budget_s": 90,
                             "expect": {"o1": {"status": "finished", "values": {"done": True}}}})


def test_the_unkeyed_repeat_fails_with_a_hint_and_following_it_passes(tmp_path: Path) -> None:
    unkeyed = _target(tmp_path, keyed=False)
    run = run_one(unkeyed, unkeyed.case("default"), "sync", tmp_path / "u-golden", None, None)
    assert run.verdict == "failed" and "side_effects.at_most_once" in run.rules, (run.error, run.rules)
    assert any(HINT in f.message for f in run.failures), [f.message for f in run.failures]

    keyed = _target(tmp_path, keyed=True)  # the hint followed
    golden = run_one(keyed, keyed.case("default"), "sync", tmp_path / "k-golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    assert [c.outcome for c in golden.outcome.calls] == ["applied", "duplicate"]
    assert NOTE in golden.notes, golden.notes
    for n, point in enumerate(["after_effect:notify", f"node:o1@issue"]):
        crash = run_one(keyed, keyed.case("default"), "sync", tmp_path / f"k-{n}", point, golden.outcome)
        assert crash.verdict == "passed" and crash.crash_fired, (point, crash.error,
                                                                  [f.message for f in crash.failures])
