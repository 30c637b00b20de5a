"""Every effect call is placed in its thread, node and step (issue 27 items 3 and 10), on the three engines:

* from a thread the team's node, DBOS step or Temporal activity starts (a ``ThreadPoolExecutor`` inside it, a
  ``threading.Thread``): the engine's context does not follow threads, crashpoint's record of it does. Before, such a
  call was "applied in None", and ``target.approval_gate`` failed the correct code ("pay applied in None while the
  approval of approve had no answer yet");
* from workflow code outside any step or activity (a DBOS workflow body, a Temporal signal handler): placed in its
  workflow with node ``workflow code``. Before, its thread and node were ``None``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from installed import needs

from crashpoint.harness.load.target import Target
from crashpoint.harness.run.target_sweep import run_one

# slow: golden runs of real workers on each engine (LangGraph 5-15 s, DBOS 10-25 s, Temporal 10-30 s at load 5-25)
pytestmark = pytest.mark.slow

LANGGRAPH = '''
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
import crashpoint

@crashpoint.effect("pay", key="k")
def pay(order, k=None):
    return {"paid": order}

@crashpoint.effect("log", key="k")
def log(order, k=None):
    return {"logged": order}

class S(TypedDict, total=False):
    order: str
    answer: dict
    done: bool

def approve(s):
    return {"answer": interrupt("ok?")}

def issue(s):
    if not s["answer"].get("approved"):
        return {"done": False}
    with ThreadPoolExecutor(max_workers=2) as pool:
        pool.submit(pay, s["order"], k="p-" + s["order"]).result()
    t = threading.Thread(target=log, args=(s["order"],), kwargs={"k": "l-" + s["order"]})
    t.start()
    t.join()
    return {"done": True}

builder = StateGraph(S)
builder.add_node("approve", approve)
builder.add_node("issue", issue)
builder.add_edge(START, "approve")
builder.add_edge("approve", "issue")
builder.add_edge("issue", END)
'''


def _code(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / "code").mkdir(exist_ok=True)
    (tmp_path / "code" / f"{name}.py").write_text(textwrap.dedent(text))
    return str(tmp_path / "code")


def _placed(result, effect: str) -> list[tuple]:
    return [(c.thread, c.node, c.outcome) for c in result.outcome.calls if c.effect == effect]


@needs("langgraph.checkpoint.sqlite")
def test_langgraph_an_effect_from_a_thread_the_node_starts_is_placed_in_the_node(tmp_path: Path) -> None:
    target = Target.from_data({
        "target": "threads-lg", "engine": "langgraph", "entry": "placed_graph:builder",
        "pythonpath": [_code(tmp_path, "placed_graph", LANGGRAPH)], "inputs": [{"thread": "o1", "input": {"order": "1"}}],
        "human": {"approve": [{"resume": {"approved": True}}]}, "gates": {"pay": "approve", "log": "approve"},
        "budget_s": 90})
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert _placed(r, "pay") == [("o1", "issue", "applied")] and _placed(r, "log") == [("o1", "issue", "applied")]


LANGGRAPH_POOL = '''
from multiprocessing.pool import ThreadPool
from typing import TypedDict
from langgraph.graph import END, START, StateGraph
import crashpoint

@crashpoint.effect("charge", key="k")
def charge(order, k=None):
    return {"charged": order}

_POOL = None

def pool():
    global _POOL
    if _POOL is None:  # made on first use, in the first thread's node
        _POOL = ThreadPool(1)
    return _POOL

class S(TypedDict, total=False):
    order: str
    receipt: dict

def pay(s):
    return {"receipt": pool().apply(charge, (s["order"],), {"k": "c-" + s["order"]})}

builder = StateGraph(S)
builder.add_node("pay", pay)
builder.add_edge(START, "pay")
builder.add_edge("pay", END)
'''


@needs("langgraph.checkpoint.sqlite")
def test_langgraph_a_thread_pool_made_in_one_threads_node_places_each_task_in_its_submitters_thread(
        tmp_path: Path) -> None:
    """attack 27 N3: the pool's worker thread, started in o1's node, placed o2's charge in o1 (before: "thread o1:
    charge applied 2 time(s)", a failed golden run of correct code)."""
    target = Target.from_data({
        "target": "threads-pool", "engine": "langgraph", "entry": "pool_graph:builder",
        "pythonpath": [_code(tmp_path, "pool_graph", LANGGRAPH_POOL)],
        "inputs": [{"thread": "o1", "input": {"order": "1"}}, {"thread": "o2", "input": {"order": "2"}}],
        "expect": {"o1": {"effects": {"charge": 1}}, "o2": {"effects": {"charge": 1}}}, "budget_s": 90})
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert sorted(_placed(r, "charge")) == [("o1", "pay", "applied"), ("o2", "pay", "applied")]


DBOS_APP = '''
from concurrent.futures import ThreadPoolExecutor
from dbos import DBOS
import crashpoint

@crashpoint.effect("pay", key="k")
def pay(order, k=None):
    return {"paid": order}

@crashpoint.effect("audit", key="k")
def audit(order, k=None):
    return {"audited": order}

@DBOS.step()
def issue(order):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(pay, order, k=f"pay-{DBOS.workflow_id}").result()

@DBOS.workflow()
def refund(order):
    decision = DBOS.recv("approval", timeout_seconds=3600)
    audit(order, k=f"audit-{DBOS.workflow_id}")  # the workflow's own code, outside any step
    if decision and decision.get("approved"):
        return {"order": order, "paid": issue(order)}
    return {"order": order, "paid": None}
'''


@needs("dbos")
def test_dbos_an_effect_from_a_thread_a_step_starts_and_one_from_the_workflow_body_are_placed(tmp_path: Path) -> None:
    target = Target.from_data({
        "target": "threads-dbos", "engine": "dbos", "entry": "placed_app:refund",
        "pythonpath": [_code(tmp_path, "placed_app", DBOS_APP)], "inputs": [{"thread": "wf-1", "input": "1"}],
        "human": {"approval": [{"resume": {"approved": True}}]}, "gates": {"pay": "approval"},
        "dbos": {"settle_s": 10}, "budget_s": 90})
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert _placed(r, "pay") == [("wf-1", "issue", "applied")]
    assert _placed(r, "audit") == [("wf-1", "workflow code", "applied")]


TEMPORAL = '''
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta

from temporalio import activity, workflow

import crashpoint


@crashpoint.effect("pay", key="k")
def pay(order: str, k: str | None = None) -> dict:
    return {"paid": order}


@crashpoint.effect("ack", key="k")
def ack(order: str, k: str | None = None) -> dict:
    return {"acked": order}


@activity.defn
def issue(order: str) -> dict:
    wf = activity.info().workflow_id
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(pay, order, k=f"pay-{wf}").result()


@workflow.defn(sandboxed=False)  # workflow code that calls an effect (the sandbox would refuse its file access)
class Refund:
    def __init__(self) -> None:
        self.decision = None

    @workflow.signal
    def approve(self, decision: dict) -> None:
        ack(str(decision), k=f"ack-{workflow.info().workflow_id}")  # workflow code: a signal handler
        self.decision = decision

    @workflow.run
    async def run(self, order: str) -> dict:
        await workflow.wait_condition(lambda: self.decision is not None)
        if not self.decision.get("approved"):
            return {"order": order, "paid": None}
        paid = await workflow.execute_activity(issue, order, start_to_close_timeout=timedelta(seconds=10))
        return {"order": order, "paid": paid}
'''


@needs("temporalio")
def test_temporal_an_effect_from_a_thread_an_activity_starts_and_one_from_a_signal_handler_are_placed(
        tmp_path: Path) -> None:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    target = Target.from_data({
        "target": "threads-temporal", "engine": "temporal", "entry": "placed_flows:Refund",
        "pythonpath": [_code(tmp_path, "placed_flows", TEMPORAL)], "inputs": [{"thread": "wf-1", "input": "1"}],
        "temporal": {"workflows": ["placed_flows:Refund"], "activities": ["placed_flows:issue"], "settle_s": 5},
        "human": {"approve": [{"resume": {"approved": True}}]}, "gates": {"pay": "approve"}, "budget_s": 90})
    r = run_one(target, target.cases[0], "sync", tmp_path / "run", None, None, keep=True)
    assert r.verdict == "passed", (r.error, [f.message for f in r.failures])
    assert _placed(r, "pay") == [("wf-1", "issue", "applied")]
    assert ("wf-1", "workflow code", "applied") in _placed(r, "ack"), _placed(r, "ack")
