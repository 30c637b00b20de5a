"""The pack interpreter behind the DBOS / LangGraph / Temporal adapters, run by a tiny in-test driver.

Issue 17 (item 4): the interpreter lacked revise gates, phase timeouts, agent verdicts, ``on_error``
modes and trace events, and reported them as engine failures. Here each rule runs against scripted
tool answers, with no engine; ``tests/adapters/test_interpreter_on_langgraph.py`` runs the packs on
LangGraph. A case needing what an adapter declares it lacks is ``unsupported``, never ``failed``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Callable

import pytest

from crashpoint.harness.adapters.interpreter import (FEATURES, TRACE_KINDS, Commit, Receive, Step, features_used,
                                                     interpret)
from crashpoint.harness.adapters.runtime import InterpretedAdapter
from crashpoint.harness.adapters.support import lacking
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack

Answer = Callable[[dict[str, Any], float], dict[str, Any]]


def run(definition: dict[str, Any], tools: dict[str, list[dict[str, Any]]] | None = None,
        messages: list[dict[str, Any]] = (), wid: str = "wf") -> tuple[dict[str, Any], list[dict[str, Any]], list]:
    """Drive the interpreter: each call of a tool takes its next scripted answer (default ok, ``{}``); the
    clock moves 1 s per call plus ``not_before`` waits, ``deadline`` is honoured as the step runner does.
    Returns (outcome, trace events, calls made)."""
    scripts = copy.deepcopy(tools or {})
    inbox = list(messages)
    trace: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    now = 1000.0
    program = interpret(wid, definition, {"x": {"y": 7}}, None)
    request = next(program)
    while True:
        try:
            if isinstance(request, Step):
                trace += request.events
                call = request.call
                if not call:
                    answer = {"ok": True, "now": now, "began": now}
                else:
                    now = max(now, call.get("not_before") or now)
                    began = now
                    if call.get("deadline") is not None and now > call["deadline"]:
                        answer = {"ok": False, "error": call["deadline_error"], "retryable": False,
                                  "skipped_call": True, "now": now, "began": began}
                    else:
                        calls.append(call)
                        scripted = (scripts.get(call["tool"]) or [{}]).pop(0) if scripts.get(call["tool"]) else {}
                        now += scripted.get("takes_s", 1.0)
                        if scripted.get("error"):
                            answer = {"ok": False, "error": scripted["error"], "retryable": scripted.get("retryable",
                                                                                                         False),
                                      "now": now, "began": began}
                        else:
                            answer = {"ok": True, "result": scripted.get("result", {}), "now": now, "began": began}
                request = program.send(answer)
            elif isinstance(request, Receive):
                request = program.send(inbox.pop(0))
            else:
                assert isinstance(request, Commit)
                following = program.send(None)
                trace += request.events
                request = following
        except StopIteration as stop:
            trace += request.events if isinstance(request, Commit) else []
            return stop.value, trace, calls


def task(tid: str, **kw: Any) -> dict[str, Any]:
    return {"id": tid, "tool": f"t.{tid}", **kw}


def wf(*phases: dict[str, Any]) -> dict[str, Any]:
    return {"workflow": "w", "version": 1, "phases": list(phases)}


def moves(trace: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["from"], e["to"]) for e in trace if e["kind"] == "transition"]


def test_a_revise_gate_sends_the_analysis_back_and_asks_again_with_new_keys() -> None:
    # before: on_deny revise was not implemented, and the denial silently became `failed`
    gate = {"approval_id": "ok", "timeout_s": 100, "on_deny": "revise", "revise_from": "a", "max_revisions": 1}
    d = wf({"id": "a", "tasks": [task("analyse")], "human_gate": gate}, {"id": "b", "tasks": [task("apply")]})
    deny = {"kind": "approval", "granted": False, "by": "m", "key": "k1"}
    grant = {"kind": "approval", "granted": True, "by": "m", "key": "k2"}
    outcome, trace, calls = run(d, messages=[deny, grant])
    assert outcome == {"status": "succeeded", "stop_reason": "completed: 2 tasks done, 0 skipped"}
    assert [c["key"] for c in calls] == ["wf/analyse", "wf/approval/ok", "wf/analyse/r1", "wf/approval/ok/r1",
                                         "wf/apply"]
    assert [e["kind"] for e in trace].count("revision_started") == 1
    outcome, _, _ = run(d, messages=[deny, dict(deny, key="k3")])
    assert outcome["status"] == "failed"
    assert outcome["stop_reason"] == "approval 'ok' denied by m after 1 revision(s) (max_revisions 1)"


def test_a_phase_timeout_fails_the_next_task_without_calling_it() -> None:
    d = wf({"id": "p", "timeout_s": 60, "tasks": [task("slow"), task("next", critical=False)]})
    outcome, trace, calls = run(d, {"t.slow": [{"takes_s": 120}]})
    assert [c["tool"] for c in calls] == ["t.slow"]
    assert outcome["stop_reason"] == "completed: 1 tasks done, 1 skipped"
    skipped = next(e for e in trace if e["kind"] == "task_skipped")
    assert skipped["error"] == "phase 'p' exceeded its timeout of 60 s"


def test_an_unsure_agent_escalates() -> None:
    d = wf({"id": "p", "tasks": [task("think", agent=True, args={"a": "$input.x.y"}), task("act")]})
    outcome, _, calls = run(d, {"t.think": [{"result": {"verdict": "uncertain", "reason": "thin data"}}]})
    assert outcome == {"status": "escalated", "stop_reason": "escalated: agent step 'think' answered uncertain: "
                                                             "thin data"}
    assert [c["tool"] for c in calls] == ["t.think"] and calls[0]["args"] == {"a": 7}  # nested $input paths


@pytest.mark.parametrize("on_error, status, reason", [
    ("skip", "succeeded", "completed: 0 tasks done, 1 skipped"),
    ("escalate", "escalated", "escalated: task 'f' failed: boom"),
    ("abort", "failed", "task 'f' failed: boom"),
])
def test_on_error_modes(on_error: str, status: str, reason: str) -> None:
    d = wf({"id": "p", "on_error": on_error, "tasks": [task("f")]})
    assert run(d, {"t.f": [{"error": "boom"}]})[0] == {"status": status, "stop_reason": reason}


def test_the_phase_retry_budget_adds_to_the_tasks_and_backs_off_on_the_clock() -> None:
    d = wf({"id": "p", "on_error": "retry", "retries": 2, "tasks": [task("f", retries=1, backoff_s=10)]})
    outcome, trace, calls = run(d, {"t.f": [{"error": "503", "retryable": True}] * 3})
    assert outcome["status"] == "succeeded" and len(calls) == 4
    assert [e["delay_s"] for e in trace if e["kind"] == "retry_scheduled"] == [10, 20, 40]


def test_a_compensation_failing_retryably_is_retried_then_escalates_naming_the_effect_and_key() -> None:
    d = wf({"id": "p", "tasks": [task("draft", side_effect=True, compensation="t.undo"), task("boom")]})
    outcome, trace, _ = run(d, {"t.boom": [{"error": "fatal"}], "t.undo": [{"error": "503", "retryable": True}] * 3})
    assert outcome == {"status": "failed", "stop_reason": "task 'boom' failed: fatal; compensated: draft"}
    outcome, trace, _ = run(d, {"t.boom": [{"error": "fatal"}], "t.undo": [{"error": "503", "retryable": True}] * 9})
    assert outcome["status"] == "escalated"
    assert "effect 'draft' (key wf/draft) was not compensated" in outcome["stop_reason"]
    assert moves(trace)[-1] == ("compensating", "escalated")
    assert "compensation_started" in [e["kind"] for e in trace]


def test_every_transition_the_interpreter_writes_is_in_the_state_table() -> None:
    from crashpoint.engine.states import is_legal

    gate = {"approval_id": "ok", "timeout_s": 100}
    d = wf({"id": "a", "tasks": [task("draft", side_effect=True, compensation="t.undo")], "human_gate": gate})
    for message in ({"kind": "cancel", "reason": "r", "key": "c"}, {"kind": "timeout", "key": "t"},
                    {"kind": "approval", "granted": False, "by": "b", "key": "d"}):
        _, trace, _ = run(d, messages=[message])
        assert all(is_legal(a, b) for a, b in moves(trace)), (message, moves(trace))


def test_features_used_names_every_field_and_enum_value() -> None:
    d = wf({"id": "p", "on_error": "skip", "tasks": [task("t", agent=True)],
            "human_gate": {"approval_id": "a", "timeout_s": 1, "on_deny": "revise"}})
    assert {"phase.on_error: skip", "task.agent", "human_gate.on_deny: revise"} <= features_used(d)
    assert "task.brand_new_field" in features_used(wf({"id": "p", "tasks": [task("t", brand_new_field=1)]}))


#: Built-in cases the interpreter declares it cannot run: a cancel delivered at a step boundary (mid-step).
BEYOND = {"refunds": {c: ["hold: cancel"] for c in ("cancel_after_approval_before_issue",
                                                     "cancel_after_refund_issued_completes_forward",
                                                     "cancel_while_draft_retrying", "cancel_while_drafting_compensates_draft")},
          "conformance": {"drafting_cancelled_compensates": ["hold: cancel"],
                          "duplicate_start_while_drafting": ["hold: redeliver"],
                          "pivot_cancel_completes_forward": ["hold: cancel"],
                          "retrying_draft_cancelled_compensates": ["hold: cancel"]}}


@pytest.mark.parametrize("pack", ["refunds", "conformance", "ads_audit"])
def test_every_built_in_case_is_within_what_the_interpreter_supports_or_declared_beyond(pack: str) -> None:
    loaded, cases = load_target(builtin_pack(pack))
    assert {c.case_id: lacking(InterpretedAdapter(), c, loaded) for c in cases if
            lacking(InterpretedAdapter(), c, loaded)} == BEYOND.get(pack, {})


class NoRevise(InterpretedAdapter):
    """An interpreted adapter whose engine has no revise gates and never traces ``revision_started``."""

    name = "no-revise"
    worker_module = "crashpoint.this_worker_must_never_start"
    supported_features = FEATURES - {"human_gate.on_deny: revise"}
    trace_kinds = TRACE_KINDS - {"revision_started"}


def test_a_case_needing_a_feature_the_adapter_lacks_is_unsupported_naming_it(tmp_path: Path) -> None:
    pack, cases = load_target(builtin_pack("ads_audit") / "cases" / "gate_denied_past_max_revisions_compensates.yaml")
    result = sweep(pack, cases, NoRevise(), crash="every", executor="threads", jobs=1, workdir=tmp_path)
    assert [r.verdict for r in result.results] == ["unsupported"]
    assert result.results[0].error == ("adapter no-revise does not support: human_gate.on_deny: revise; "
                                       "trace event revision_started")
    assert not list(tmp_path.rglob("worker-*.log"))  # nothing ran


def test_an_unsupported_run_is_counted_shown_and_skipped_in_junit_never_passed(tmp_path: Path) -> None:
    from crashpoint.harness.judge.document import sweep_data
    from crashpoint.reports import junit
    from crashpoint.reports import terminal as text

    pack, cases = load_target(builtin_pack("ads_audit") / "cases" / "gate_denied_once_revised_then_granted.yaml")
    data = sweep_data(sweep(pack, cases, NoRevise(), crash="none", executor="threads", jobs=1, workdir=tmp_path))
    assert (data["summary"]["passed"], data["summary"]["unsupported"]) == (0, 1)
    assert "UNSUPPORTED gate_denied_once_revised_then_granted" in text.failures(data)
    assert "unsupported" in text.summary(data)
    xml = junit.render({"run": {"pack": "ads_audit"}, "results": data["results"]})
    assert '<skipped message="adapter no-revise does not support: human_gate.on_deny: revise' in xml
    assert "<failure" not in xml and "<error" not in xml


def test_a_cancel_delivered_mid_step_is_unsupported_by_the_interpreter_not_failed(tmp_path: Path) -> None:
    # the interpreter takes external messages at a gate's wait only; a cancel at a step boundary it cannot honour
    pack, cases = load_target(builtin_pack("refunds") / "cases" / "cancel_while_draft_retrying.yaml")
    assert lacking(InterpretedAdapter(), cases[0], pack) == ["hold: cancel"]
    assert lacking(InterpretedAdapter(), cases[0], pack) != [] and not lacking(object(), cases[0], pack)
