"""A team's invariant that raises ``SystemExit`` or calls ``pytest.skip()`` (issue 27 item 2), on a real LangGraph
run: ``crashpoint run`` exits 1 naming the check ``unknown`` (before: no output at all and exit 0), and a
``crashpoint_sweep`` test under ``pytest --chaos`` fails (before: SKIPPED, the whole sweep taken for a skip)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from installed import needs

# slow: each starts crashpoint (a golden run of real LangGraph workers), 15-30 s apiece at load 5-10
pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]
pytest_plugins = ("pytester",)

GRAPH = '''
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
import crashpoint

@crashpoint.effect("pay", key="k")
def pay(order, k=None):
    return {"paid": order}

class S(TypedDict, total=False):
    order: str
    done: bool

def issue(s):
    pay(s["order"], k="p-" + s["order"])
    return {"done": True}

builder = StateGraph(S)
builder.add_node("issue", issue)
builder.add_edge(START, "issue")
builder.add_edge("issue", END)
'''

CHECKS = '''
import crashpoint

@crashpoint.invariant
def paid_once(run):
    {body}
'''

TARGET = '''target: strict
engine: langgraph
entry: strict_graph:builder
pythonpath: ["."]
inputs:
  - {thread: o1, input: {order: "1"}}
invariants: [strict_checks:paid_once]
budget_s: 60
'''


def _project(folder: Path, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "strict_graph.py").write_text(textwrap.dedent(GRAPH))
    (folder / "strict_checks.py").write_text(textwrap.dedent(CHECKS).replace("{body}", body))
    (folder / "target.yaml").write_text(TARGET)
    return folder / "target.yaml"


@pytest.mark.parametrize("body", ["raise SystemExit(0)", "import pytest; pytest.skip('later')"])
def test_crashpoint_run_with_an_invariant_that_exits_or_skips_exits_1_naming_it_unknown(tmp_path: Path,
                                                                                        body: str) -> None:
    path = _project(tmp_path / "team", body)
    done = subprocess.run([sys.executable, "-m", "crashpoint", "run", str(path), "--crash", "none"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 1, (done.returncode, done.stdout, done.stderr)
    assert "0 failed, 0 errors, 1 unknown" in done.stdout, done.stdout
    assert "error: target.invariant:paid_once: " in done.stdout, done.stdout


def test_the_same_target_with_a_check_that_returns_none_passes(tmp_path: Path) -> None:
    """The control: the run itself is fine, only the check's exit made it unknown."""
    path = _project(tmp_path / "team", "assert len(run.applied('pay')) == 1")
    done = subprocess.run([sys.executable, "-m", "crashpoint", "run", str(path), "--crash", "none"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert done.returncode == 0 and "1 passed, 0 failed, 0 errors, 0 unknown" in done.stdout, (done.stdout, done.stderr)


def test_a_sweep_test_whose_invariant_calls_pytest_skip_fails_not_skipped(pytester: pytest.Pytester) -> None:
    _project(pytester.path, "import pytest; pytest.skip('later')")
    pytester.makepyfile(test_team_sweep='''
        def test_sweep(crashpoint_sweep):
            result = crashpoint_sweep("target.yaml", crash="none")
            assert result.passed, result.summary
    ''')
    result = pytester.runpytest_subprocess("--crashpoint-chaos", "-p", "no:cacheprovider", timeout=300)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*unknown default [[]sync[]] at golden run*target.invariant:paid_once*Skipped*"])
