"""A team's invariant (``crashpoint.invariant``) is judged strictly (issue 27 item 2): it passes only by returning
``None`` or ``True``; any other value fails (``numpy.False_``, ``0``, ``""``, a message, any object), and any
``BaseException`` it raises (``SystemExit``, ``KeyboardInterrupt``, pytest's skip and fail outcomes) is ``unknown``
with its text, never a pass, never a skip of the calling test, never an exit of the process.

Before: ``numpy.False_``, ``0``, ``""`` and an object passed; ``SystemExit``, ``KeyboardInterrupt`` and pytest's
outcomes left ``judge`` (a ``crashpoint run`` ended with exit 0 and no output, a ``crashpoint_sweep`` test was
SKIPPED)."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

from crashpoint.harness.judge.target_rules import judge
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome

_n = itertools.count()

CHECK = '''
import crashpoint

@crashpoint.invariant
def {name}(run):
{body}
'''


def _target(tmp_path: Path, body: str) -> tuple[Target, str]:
    """A target whose one invariant has ``body``, in a module of its own (a new name each time)."""
    module = f"strict_checks_{next(_n)}"
    name = f"check_{module}"
    (tmp_path / f"{module}.py").write_text(CHECK.format(name=name, body=textwrap.indent(textwrap.dedent(body), "    ")))
    target = Target.from_data({"target": "t", "engine": "langgraph", "entry": "nowhere:builder",
                               "pythonpath": [str(tmp_path)], "inputs": [{"thread": "a", "input": {}}],
                               "invariants": [f"{module}:{name}"]})
    return target, name


def _judge(tmp_path: Path, body: str) -> tuple[list, list[str], str]:
    target, name = _target(tmp_path, body)
    run = TargetOutcome("default", "sync", None, tmp_path, threads={"a": {"status": "finished", "values": {}}})
    failures, unknown = judge(target, run, None)
    return [f for f in failures if f.rule.startswith("target.invariant:")], unknown, name


@pytest.mark.parametrize("body", ["return None", "return True", "pass", "assert True"])
def test_none_and_true_pass(tmp_path: Path, body: str) -> None:
    failures, unknown, _ = _judge(tmp_path, body)
    assert failures == [] and unknown == []


@pytest.mark.parametrize(("body", "said"), [
    ("return False", "returned False"),
    ("import numpy\nreturn numpy.False_", "returned np.False_ (numpy.bool)"),
    ("import numpy\nreturn numpy.True_", "returned np.True_ (numpy.bool)"),
    ("return 0", "returned 0 (int)"),
    ("return 1", "returned 1 (int)"),
    ("return ''", "returned '' (str)"),
    ("return []", "returned [] (list)"),
    ("return object()", "(object)"),
    ("return 'refund too large'", "refund too large"),
    ("assert False, 'two refunds'", "two refunds"),
])
def test_any_other_value_fails(tmp_path: Path, body: str, said: str) -> None:
    failures, unknown, name = _judge(tmp_path, body)
    assert unknown == [] and len(failures) == 1, (failures, unknown)
    assert failures[0].rule == f"target.invariant:{name}" and said in failures[0].message, failures[0].message


@pytest.mark.parametrize(("body", "said"), [
    ("raise SystemExit(0)", "SystemExit: 0"),
    ("raise KeyboardInterrupt('stop')", "KeyboardInterrupt: stop"),
    ("import pytest\npytest.skip('not today')", "not today"),
    ("import pytest\npytest.fail('broken check')", "broken check"),
    ("raise ValueError('no run.calls')", "ValueError: no run.calls"),
    ("raise GeneratorExit()", "GeneratorExit"),
])
def test_any_exception_is_unknown_with_its_text(tmp_path: Path, body: str, said: str) -> None:
    failures, unknown, name = _judge(tmp_path, body)
    assert failures == [] and len(unknown) == 1, (failures, unknown)
    assert unknown[0].startswith(f"target.invariant:{name}: ") and said in unknown[0], unknown


@pytest.mark.parametrize("body", ["import os\nos._exit(0)", "import os\nos.abort()",
                                  "import os\ntry:\n    os._exit(0)\nexcept Exception:\n    return True"])
def test_a_check_that_would_end_crashpoints_process_is_unknown(tmp_path: Path, body: str) -> None:
    """``os._exit(0)`` in a check ended ``crashpoint run`` with exit 0 and no ``--json`` (an attack on issue 27 item
    2); now it raises in the check, and the judge says ``unknown`` with what was called."""
    failures, unknown, name = _judge(tmp_path, body)
    assert failures == [] and len(unknown) == 1, unknown
    assert "ProcessExitRefused" in unknown[0] and "crashpoint's own process" in unknown[0], unknown
    import os

    assert getattr(os._exit, "__wrapped__", None) is not None  # guarded, and the original kept for everyone else
