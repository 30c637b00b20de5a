"""crashpoint's own exceptions cross processes intact (issue 27 item 10): each pickles and unpickles to an exception
of its class with the same ``str()`` and attributes. Before, ``pickle.loads(pickle.dumps(EffectTimeout("x",
effect="e", retryable=True)))`` raised ``TypeError: EffectFault.__init__() missing 2 required keyword-only
arguments`` (and so did ``EffectFault`` and ``ToolError``); DBOS pickles a failed step's exception and raises it
again when it replays the workflow."""

from __future__ import annotations

import pickle

import pytest

import crashpoint
from crashpoint.errors import CaseError, CrashpointError, StoreError
from crashpoint.protocols import ToolError

# every module that defines one of crashpoint's exceptions, so that the walk below sees them all
import crashpoint.harness.run.certification  # noqa: F401,E402
import crashpoint.harness.run.target_driver  # noqa: F401,E402
import crashpoint.engine.definition  # noqa: F401,E402
import crashpoint.engine.engine  # noqa: F401,E402
import crashpoint.engine.states  # noqa: F401,E402

SAMPLES = {
    "EffectFault": lambda: crashpoint.EffectFault("pay: scripted fatal", effect="pay", retryable=False),
    "EffectTimeout": lambda: crashpoint.EffectTimeout("x", effect="e", retryable=True, maybe_applied=True),
    "EffectRateLimited": lambda: crashpoint.EffectRateLimited("pay: 429", effect="pay", retry_after=1.5),
    "ToolError": lambda: ToolError("refund api down", retryable=True, maybe_applied=True),
    "CaseError": lambda: CaseError("bad thread", file="t.yaml", line=7, field="inputs[0].thread"),
    "StoreError": lambda: StoreError("the ledger is damaged", file="/tmp/ledger.db"),
}


def _subclasses(cls: type) -> set[type]:
    found = set()
    for sub in cls.__subclasses__():
        found |= {sub} | _subclasses(sub)
    return found


def _sample(cls: type) -> BaseException:
    if cls.__name__ in SAMPLES:
        return SAMPLES[cls.__name__]()
    return cls("something went wrong")


ALL = sorted({CrashpointError, crashpoint.EffectFault} | _subclasses(CrashpointError)
             | _subclasses(crashpoint.EffectFault), key=lambda c: f"{c.__module__}.{c.__qualname__}")


@pytest.mark.parametrize("cls", [c for c in ALL if c.__module__.startswith("crashpoint")],
                         ids=lambda c: c.__qualname__)
def test_each_exception_pickles_and_unpickles_to_its_equal(cls: type) -> None:
    exc = _sample(cls)
    exc.__notes__ = ["a note"]  # attributes a handler added survive too
    back = pickle.loads(pickle.dumps(exc))
    assert type(back) is cls
    assert str(back) == str(exc) and back.args == exc.args
    assert vars(back) == vars(exc)


def test_the_issue_line_unpickles_to_the_timeout_it_was() -> None:
    back = pickle.loads(pickle.dumps(crashpoint.EffectTimeout("x", effect="e", retryable=True)))
    assert isinstance(back, TimeoutError) and isinstance(back, crashpoint.EffectFault)
    assert (str(back), back.effect, back.retryable, back.maybe_applied) == ("x", "e", True, False)


def test_an_invariant_clash_pickles_too() -> None:
    from crashpoint.api import InvariantClash

    back = pickle.loads(pickle.dumps(InvariantClash("paid_once", ["a:paid_once", "b:paid_once"])))
    assert (back.name, back.origins, str(back)) == ("paid_once", ["a:paid_once", "b:paid_once"],
                                                    str(InvariantClash("paid_once", ["a:paid_once", "b:paid_once"])))


def test_a_rate_limit_unpickles_with_what_a_teams_code_reads() -> None:
    exc = crashpoint.EffectRateLimited("pay: 429 Too Many Requests", effect="pay", retry_after=0.5)
    back = pickle.loads(pickle.dumps(exc))
    assert isinstance(back, crashpoint.EffectFault) and type(back) is crashpoint.EffectRateLimited
    assert (back.status, back.retry_after, back.retryable, back.maybe_applied, back.effect) == (429, 0.5, True, False,
                                                                                                   "pay")
    tool = pickle.loads(pickle.dumps(ToolError("x: 429", retryable=True, status=429, retry_after=30.0)))
    assert (tool.status, tool.retry_after) == (429, 30.0)
