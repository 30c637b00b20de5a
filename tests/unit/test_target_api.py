"""The target API (crashpoint.effect / crashpoint.invariant / Target) without an engine."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import crashpoint
import crashpoint.api as api
from crashpoint.errors import CaseError
from crashpoint.fakes.ledger import Ledger
from crashpoint.harness.engines.effects import EffectSession, read_calls

ROOT = Path(__file__).resolve().parents[2]


def test_importing_crashpoint_imports_no_harness_pandas_or_engine() -> None:
    code = ("import sys, crashpoint; crashpoint.effect('x')(len); "
            "print(sorted(m for m in sys.modules if m.startswith(('crashpoint.harness', 'crashpoint.fakes', "
            "'crashpoint.engine', 'pandas', 'langgraph', 'yaml', 'jsonschema', 'dbos', 'temporalio'))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_outside_a_run_an_effect_is_the_function() -> None:
    calls = []

    @crashpoint.effect("charge", key="key")
    def charge(amount: int, key: str | None = None) -> dict:
        calls.append(amount)
        return {"charged": amount}

    assert api._session is None
    assert charge(5, key="k") == {"charged": 5} and charge(5, key="k") == {"charged": 5}
    assert calls == [5, 5] and charge.__name__ == "charge"
    assert api.wrap(charge) is charge  # wrapping twice keeps one wrapper


def test_a_process_of_a_target_run_that_is_not_its_worker_notes_each_call_and_makes_it(tmp_path: Path) -> None:
    """A new interpreter whose environment names a target run's folder (a node's subprocess) appends each effect call
    to ``outside-effects.log`` and calls the function; a marker naming a folder without ``target.json`` (not a
    target run), like no marker, leaves the pass-through."""
    from crashpoint.harness.engines.effects import outside_calls

    code = ("import crashpoint; pay = crashpoint.effect('pay', key='k')(lambda order, k=None: order); "
            "print(pay('1', k='p-1'))")
    plain = tmp_path / "plain"
    plain.mkdir()
    env = {k: v for k, v in os.environ.items() if k != api.RUN_MARKER}
    for folder in (plain, None):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env=env | ({api.RUN_MARKER: str(folder)} if folder else {})).stdout
        assert out.strip() == "1"
    assert not (plain / api.OUTSIDE_FILE).exists()
    (plain / "target.json").write_text("{}")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env | {api.RUN_MARKER: str(plain)}).stdout
    assert out.strip() == "1"
    (text,) = outside_calls(plain)
    assert text.startswith("crashpoint.effect called in pid ") and "not a worker process: pay (key p-1;" in text


@pytest.fixture()
def session(tmp_path: Path):
    points: list[str] = []
    s = EffectSession(tmp_path / "ledger.db", points.append, lambda: {"thread": "t1", "node": "issue", "step": 3},
                      lambda thread: True)
    api._install(s)
    yield s, points
    api._install(None)


def test_inside_a_run_calls_go_to_the_ledger_and_a_repeated_key_is_not_applied_again(session) -> None:
    s, points = session
    ran = []

    @crashpoint.effect("issue_refund", key=lambda draft_id, **_: f"refund-{draft_id}")
    def issue(draft_id: str, amount: int) -> dict:
        ran.append(draft_id)
        return {"refund": draft_id, "amount": amount}

    assert issue("d1", 10) == {"refund": "d1", "amount": 10}
    assert issue("d1", 10) == {"refund": "d1", "amount": 10}  # answered from the ledger
    assert ran == ["d1"]
    calls = read_calls(s.ledger)
    assert [(c.effect, c.key, c.outcome, c.thread, c.node, c.step, c.durable) for c in calls] == [
        ("issue_refund", "refund-d1", "applied", "t1", "issue", 3, True),
        ("issue_refund", "refund-d1", "duplicate", "t1", "issue", 3, True)]
    assert calls[0].pid == calls[1].pid and calls[0].digest == calls[1].digest and not calls[1].live_others
    assert points == ["before_effect:issue_refund", "after_effect:issue_refund"]


@pytest.mark.parametrize("outcome, applied, error", [
    ("retryable", 0, crashpoint.EffectFault), ("fatal", 0, crashpoint.EffectFault),
    ("timeout", 0, crashpoint.EffectTimeout), ("lost_response", 1, crashpoint.EffectFault)])
def test_scripted_tool_faults(session, tmp_path: Path, outcome: str, applied: int, error: type) -> None:
    s, _ = session
    Ledger(tmp_path / "ledger.db").script("notify", outcome)
    ran = []
    notify = crashpoint.effect("notify")(lambda to: ran.append(to) or "sent")
    with pytest.raises(error) as info:
        notify("a@b")
    assert info.value.retryable is (outcome != "fatal")
    assert info.value.maybe_applied is (outcome == "lost_response")
    assert len(ran) == applied
    assert notify("a@b") == "sent"  # the script is consumed: the next call succeeds (no key: a new effect)
    assert [c.outcome for c in read_calls(s.ledger)] == (["applied", "applied"] if applied else ["failed", "applied"])


def test_invariant_registers_and_returns_the_function() -> None:
    def one_refund(run: crashpoint.RunView) -> None:
        assert len(run.applied("issue_refund")) <= 1

    assert crashpoint.invariant(one_refund) is one_refund
    assert api.registered_invariants()["one_refund"] is one_refund


def test_target_yaml_round_trip_and_errors(tmp_path: Path) -> None:
    target = crashpoint.Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")
    assert target.entry == "langgraph_refund.graph:builder" and target.gates == {"issue_refund": "approve"}
    again = crashpoint.Target.from_data(target.to_data(), file=target.file)
    assert again == target
    bad = tmp_path / "t.yaml"
    bad.write_text("target: x\nengine: langgraph\nentry: a:b\ninputs:\n  - {thread: t, input: 1}\ndurability: [fast]\n")
    with pytest.raises(CaseError) as info:
        crashpoint.Target.from_file(bad)
    assert str(info.value).startswith(f"{bad}:6: field durability[0]")


def _refusal(tmp_path: Path, text: str) -> tuple[Path, str]:
    """``(file, message)`` of the ``CaseError`` a target file of ``text`` raises."""
    bad = tmp_path / "t.yaml"
    bad.write_text("target: x\nengine: langgraph\nentry: a:b\ninputs:\n  - {thread: t, input: 1}\n" + text)
    with pytest.raises(CaseError) as info:
        crashpoint.Target.from_file(bad)
    return bad, str(info.value)


def test_a_deploy_whose_version_is_the_targets_own_entry_is_refused(tmp_path: Path) -> None:
    """A deploy to the same code tests no deploy: before, the run 'passed' as a deploy the new code took on."""
    bad, message = _refusal(tmp_path, "versions:\n  v2: a:b\ncases:\n  - {name: d, deploy: v2}\n")
    assert message.startswith(f"{bad}:7: field versions.v2: case 'd' deploys 'v2', whose entry 'a:b' is the "
                              "target's own"), message


def test_a_late_answer_needs_a_next_answer_of_its_node(tmp_path: Path) -> None:
    bad, message = _refusal(tmp_path, "cases:\n  - name: c\n    human:\n      approve:\n        - {resume: 1, late: true}\n")
    assert message.startswith(f"{bad}:10: field cases[0].human.approve[0].late: a late answer of approve "
                              "needs a next answer"), message
    ok = crashpoint.Target.from_file(ROOT / "examples/langgraph_refund/target.yaml")
    assert ok.answers(ok.case("approval-late"))["approve"][0] == {"grants": True, "late": True,
                                                                 "resume": {"approved": True, "ask": 1}}


def test_a_target_case_names_several_workers_with_the_registered_workers_fault_kind(tmp_path: Path) -> None:
    """``faults: [{kind: workers, count: K}]`` (the kind packs use) is the case's ``workers: K``; both at once must
    agree; an engine whose workers have no identity of their own refuses K >= 2 (it would run one: a pass not earned)."""
    import json

    from crashpoint.harness.faults.kinds import workers as workers_kind
    from crashpoint.harness.load import target as target_module

    head = "target: x\nengine: ENGINE\nentry: a:b\ninputs:\n  - {thread: t, input: 1}\ncases:\n"
    path = tmp_path / "t.yaml"
    path.write_text(head.replace("ENGINE", "dbos") + "  - name: c\n    faults:\n      - {kind: workers, count: 3}\n"
                    "      - {effect: pay, outcome: timeout}\n")
    case = crashpoint.Target.from_file(path).case("c")
    assert case.workers == 3 and case.faults == [{"kind": "workers", "count": 3},  # the one spelling, old ones read
                                                 {"kind": "tool", "tool": "pay", "call": 1, "outcome": "timeout",
                                                  "times": 1}]
    path.write_text(head.replace("ENGINE", "dbos") + "  - name: c\n    workers: 2\n    faults:\n"
                    "      - {kind: workers, count: 3}\n")
    with pytest.raises(CaseError) as info:
        crashpoint.Target.from_file(path)
    assert str(info.value).startswith(f"{path}:10: field cases[0].faults[0].count: case 'c': workers: 2 and a workers "
                                      "fault of count 3 disagree"), str(info.value)
    for engine in ("langgraph", "temporal"):
        path.write_text(head.replace("ENGINE", engine) + "  - {name: c, workers: 2}\n")
        with pytest.raises(CaseError) as info:
            crashpoint.Target.from_file(path)
        assert str(info.value).startswith(f"{path}:7: field cases[0].workers: case 'c': several workers at once (2) "
                                          f"need an engine whose workers have their own identity (dbos), not {engine}")
    schema = json.loads((ROOT / "scenarios/schemas/target.schema.json").read_text())["$defs"]["fault_workers"]
    assert target_module.WORKERS_KIND == workers_kind.Workers.name == schema["properties"]["kind"]["const"]
    assert schema["properties"]["count"]["maximum"] == workers_kind.MAX_TOGETHER
