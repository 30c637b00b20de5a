"""A kill after a DBOS step that failed on a scripted fault (issue 27 item 10): DBOS pickles the step's exception
(a ``crashpoint.EffectFault``) and raises it again when the recovering worker replays the workflow. Before, the
fault did not unpickle and the correct workflow, which catches the retryable fault and pays again, ended in DBOS
status ERROR: "EffectFault.__init__() missing 2 required keyword-only arguments: 'effect' and 'retryable'"
(failed: target.ends_within_budget, final_state_like_golden, effects_like_golden)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import run_one  # noqa: E402

APP = '''
from dbos import DBOS
import crashpoint


@crashpoint.effect("charge", key="key")
def charge(order_id, key=None):
    return {"charged": order_id}


@DBOS.step()
def pay(order_id):
    return charge(order_id, key=f"charge-{DBOS.workflow_id}")


@DBOS.workflow()
def checkout(order):
    for _ in range(3):
        try:
            return {"order_id": order["order_id"], "paid": pay(order["order_id"])}
        except crashpoint.EffectFault as exc:  # a retryable failure: pay again (a new step)
            if not exc.retryable:
                raise
    return {"order_id": order["order_id"], "paid": None}
'''


@pytest.mark.slow  # a golden run and a kill run of real DBOS workers: 10-20 s
def test_a_kill_after_a_step_that_failed_on_a_scripted_fault_recovers_on_correct_code(tmp_path: Path) -> None:
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "flaky_pay.py").write_text(textwrap.dedent(APP))
    target = Target.from_data({
        "target": "flaky-pay", "engine": "dbos", "entry": "flaky_pay:checkout", "pythonpath": [str(tmp_path / "code")],
        "inputs": [{"thread": "co-1", "input": {"order_id": "1"}}], "dbos": {"settle_s": 10}, "budget_s": 60,
        "cases": [{"name": "flaky", "faults": [{"effect": "charge", "outcome": "retryable"}]}]})
    case = target.cases[0]
    golden = run_one(target, case, "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    assert [c.outcome for c in golden.outcome.calls] == ["failed", "applied"]
    point = "after_result:co-1@pay"  # the failed step's error is recorded (pickled): then the kill
    assert point in golden.outcome.crash_points
    r = run_one(target, case, "sync", tmp_path / "kill", point, golden.outcome, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert r.outcome.kills == 1 and r.outcome.threads["co-1"]["values"]["output"]["paid"] == {"charged": "1"}


DECLINED = '''
from dbos import DBOS
import crashpoint


class PaymentDeclined(Exception):
    """A team's exception that DBOS cannot unpickle (its __init__ takes a keyword-only argument)."""

    def __init__(self, message, *, code):
        super().__init__(message)
        self.code = code


@crashpoint.effect("charge", key="key")
def charge(order_id, key=None):
    return {"charged": order_id}


@DBOS.step()
def pay(order_id):
    charge(order_id, key=f"charge-{DBOS.workflow_id}")
    raise PaymentDeclined(f"card declined for order {order_id}", code="do_not_honor")


@DBOS.workflow()
def checkout(order):
    return pay(order["order_id"])
'''


@pytest.mark.slow  # a golden run of real DBOS workers: 8-20 s
def test_a_workflow_error_dbos_stored_pickled_is_quoted_decoded(tmp_path: Path) -> None:
    """DBOS hands back a stored exception it cannot unpickle as its base64 pickle: the finding quoted
    'DBOS workflow status ERROR: gASVWQAAAAAAAACMB2Vycl9hcHCU...' before; now the class and message inside."""
    (tmp_path / "code").mkdir()
    (tmp_path / "code" / "declined_app.py").write_text(textwrap.dedent(DECLINED))
    target = Target.from_data({
        "target": "declined", "engine": "dbos", "entry": "declined_app:checkout", "pythonpath": [str(tmp_path / "code")],
        "inputs": [{"thread": "co-1", "input": {"order_id": "1"}}], "dbos": {"settle_s": 10}, "budget_s": 60})
    r = run_one(target, target.cases[0], "sync", tmp_path / "golden", None, None, keep=True)
    stuck = [f.message for f in r.failures if f.rule == "target.ends_within_budget"]
    assert r.verdict == "failed" and len(stuck) == 1, (r.error, [f.message for f in r.failures])
    assert stuck[0].startswith("thread co-1 is stuck: the engine raised DBOS workflow status ERROR: PaymentDeclined: "
                               "card declined for order 1 (stored pickled; not unpickled: TypeError:"), stuck[0]
