"""Trace files, replay and incidents: a run kept as a file, re-driven on an engine, turned into a case."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from crashpoint.errors import CaseError
from crashpoint.harness.cli.main import ExitCode, main
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.traces.replay import decisions, recorded_answers, replay
from crashpoint.harness.traces.tracefile import FORMAT, read_trace, trace_name

ROOT = Path(__file__).resolve().parents[2]
PACK = ROOT / "scenarios" / "refunds"
CASES = PACK / "cases"
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "refund_happy.trace.json"


def _save_traces(tmp_path: Path, case: str, *extra: str) -> list[Path]:
    out = tmp_path / "traces"
    main(["run", str(CASES / f"{case}.yaml"), "--save-traces", str(out), "-q", "--jobs", "2", *extra])
    return sorted(out.glob("*.trace.json"))


# --------------------------------------------------------------------------- trace files

def test_the_golden_trace_is_self_contained() -> None:
    trace = read_trace(GOLDEN)
    assert trace["format"] == FORMAT
    assert trace["case"]["case_id"] == "refund_approved_happy_path"
    assert trace["case"]["input"]["order_id"] and trace["case"]["input_generated"] is True
    assert trace["workflow"]["workflow"] == "refund" and trace["engine"]["name"] == "reference"
    assert trace["crash_point"] == "none" and trace["run"]["verdict"] == "passed"
    assert [(d["step"], d["kind"]) for d in trace["deliveries"]] == [(0, "start"), (1, "approval")]
    approval = trace["deliveries"][1]
    assert approval["approval_id"] == "refund_approval" and approval["idempotency_key"] == "approval_granted:ap_1:0"
    assert [c["tool"] for c in trace["calls"]] == ["refunds.draftRefundRequest", "approvals.request",
                                                   "refunds.issueRefund", "notify.sendCustomerEmail"]
    assert trace["journal"][-1]["kind"] == "workflow_finished"


def test_save_traces_writes_one_file_per_run_named_after_the_crash_point(tmp_path: Path) -> None:
    files = _save_traces(tmp_path, "refund_approved_happy_path", "--crash-point", "after_checkpoint:refund_draft")
    assert [f.name for f in files] == ["refund_approved_happy_path__after_checkpoint_refund_draft.trace.json",
                                       "refund_approved_happy_path__none.trace.json"]
    killed = read_trace(files[0])
    assert killed["crash_point"] == "after_checkpoint:refund_draft" and killed["run"]["kills"] == 1
    assert [d["kind"] for d in killed["deliveries"]] == ["start", "kill", "approval"]
    assert trace_name("c", "A:x >> B:y#2") == "c__A_x____B_y_2.trace.json"


# --------------------------------------------------------------------------- replay

def test_the_golden_trace_replays_with_no_divergence(capsys: pytest.CaptureFixture[str]) -> None:
    result = replay(GOLDEN)
    assert result.ok and result.divergence is None
    assert result.decisions == 27 and result.status == "succeeded"
    assert main(["replay", str(GOLDEN)]) == ExitCode.OK
    assert "replay: 27 decisions, no divergence" in capsys.readouterr().out


def test_a_different_engine_shows_the_first_divergent_decision(capsys: pytest.CaptureFixture[str]) -> None:
    result = replay(GOLDEN, "variants.engines:NotifyBeforeIssue")
    assert not result.ok
    div = result.divergence
    assert div is not None and div.index == 17
    assert div.expected == {"kind": "tool_call", "tool": "refunds.issueRefund",
                            "idempotency_key": "wf-refund_approved_happy_path/issue_refund"}
    assert div.got is not None and div.got["tool"] == "notify.sendCustomerEmail"
    code = main(["replay", str(GOLDEN), "--engine", "variants.engines:NotifyBeforeIssue"])
    assert code == ExitCode.FAILED
    out = capsys.readouterr().out
    assert ("first divergence at decision #17: expected tool_call tool=refunds.issueRefund "
            "idempotency_key=wf-refund_approved_happy_path/issue_refund, got tool_call tool=notify.sendCustomerEmail"
            in out)
    assert "last common decision #16: checkpoint name=approval_decision" in out


def test_a_call_with_no_recorded_answer_is_a_divergence() -> None:
    trace = read_trace(GOLDEN)
    trace["calls"] = [c for c in trace["calls"] if c["tool"] != "notify.sendCustomerEmail"]
    result = replay(trace)
    assert not result.ok and result.divergence is not None
    assert "has no recorded answer" in result.divergence.message()
    assert result.divergence.got == {"kind": "tool_call", "tool": "notify.sendCustomerEmail",
                                     "idempotency_key": "wf-refund_approved_happy_path/notify_customer"}


def test_an_engine_that_raises_during_the_replay_is_a_divergence_not_a_crash() -> None:
    trace = read_trace(GOLDEN)
    trace["deliveries"][0]["workflow"] = "no_such_workflow"
    result = replay(trace)
    assert not result.ok and result.divergence is not None and result.divergence.index == 1
    assert "the engine raised during the replay: DefinitionError" in result.divergence.message()


@pytest.mark.parametrize(("case", "point"), [
    ("refund_approved_happy_path", "after_effect:refunds.draftRefundRequest"),
    ("refund_approved_happy_path", "before_checkpoint:approval_request"),
    # the kill takes an answer the engine never made durable: a scripted failure is not seen twice
    ("draft_retryable_failure_then_success", "before_checkpoint:refund_draft"),
])
def test_a_trace_of_a_killed_run_replays_too(tmp_path: Path, case: str, point: str) -> None:
    files = _save_traces(tmp_path, case, "--crash-point", point)
    killed = read_trace(next(f for f in files if not f.name.endswith("__none.trace.json")))
    assert killed["run"]["kills"] == 1
    result = replay(killed)
    assert result.ok, result.message()
    assert result.replayed == decisions(killed["journal"]) and result.decisions == len(result.replayed)


def test_answers_lost_to_a_kill_are_left_out() -> None:
    trace = {"run": {"kills": 1}, "calls": [
        {"tool": "t", "idempotency_key": "k", "outcome": "failed", "retryable": True, "error": "boom #1"},
        {"tool": "t", "idempotency_key": "k", "outcome": "applied", "result": {"id": 1}},
    ], "journal": [{"kind": "tool_result", "tool": "t", "idempotency_key": "k", "ok": True, "result": {"id": 1}}]}
    assert [a["ok"] for a in recorded_answers(trace)] == [True]
    trace["run"]["kills"] = 0  # not killed: every recorded answer, in order
    assert [a["ok"] for a in recorded_answers(trace)] == [False, True]


def test_decisions_ignore_time_sequence_numbers_resumes_and_repeated_calls() -> None:
    journal = [
        {"seq": 1, "at": 1.0, "kind": "tool_call", "tool": "t", "idempotency_key": "k", "attempt": 1},
        {"seq": 2, "at": 2.0, "kind": "workflow_resumed", "worker": "w2"},
        {"seq": 3, "at": 3.0, "kind": "tool_call", "tool": "t", "idempotency_key": "k", "attempt": 1},
        {"seq": 4, "at": 3.0, "kind": "checkpoint", "name": "c"},
        {"seq": 5, "at": 3.0, "kind": "workflow_finished", "status": "succeeded", "stop_reason": "x"},
    ]
    assert decisions(journal) == [{"kind": "tool_call", "tool": "t", "idempotency_key": "k"},
                                  {"kind": "checkpoint", "name": "c"},
                                  {"kind": "workflow_finished", "status": "succeeded"}]


# --------------------------------------------------------------------------- malformed trace files

def _golden_text() -> str:
    return GOLDEN.read_text(encoding="utf-8")


def _edit(data_edit) -> str:
    data = json.loads(_golden_text())
    data_edit(data)
    return json.dumps(data, indent=2)


def _line_of(text: str, needle: str) -> int:
    return text[:text.index(needle)].count("\n") + 1


@pytest.mark.parametrize(("name", "make", "field", "needle"), [
    ("syntax", lambda: _golden_text().replace('"kills": 0,', '"kills": 0', 1), None, '"workers"'),
    ("format", lambda: _edit(lambda d: d.update(format="crashpoint.results/1")), "format", '"format"'),
    ("missing", lambda: _edit(lambda d: d.pop("journal")), "journal", None),
    ("type", lambda: _edit(lambda d: d["run"].update(kills="1")), "run.kills", '"kills"'),
    ("nested_type", lambda: _edit(lambda d: d["calls"][2].update(idempotency_key=5)), "calls[2].idempotency_key",
     '"idempotency_key": 5'),
])
def test_a_malformed_trace_file_is_exit_2_naming_file_line_and_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, make, field: str | None,
        needle: str | None) -> None:
    path = tmp_path / f"{name}.trace.json"
    text = make()
    path.write_text(text, encoding="utf-8")
    line = _line_of(text, needle) if needle else 1
    with pytest.raises(CaseError) as err:
        read_trace(path)
    assert err.value.file == str(path) and err.value.line == line and err.value.field == field
    for command in (["replay", str(path)], ["incident", str(path), "--out", str(tmp_path / "x.yaml")]):
        assert main(command) == ExitCode.USAGE
        message = capsys.readouterr().err
        assert f"{path}:{line}:" in message
        if field:
            assert f"field {field}:" in message
    assert not (tmp_path / "x.yaml").exists()


def test_not_a_trace_file_at_all(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "list.json").write_text("[1, 2]\n")
    assert main(["replay", str(tmp_path / "list.json")]) == ExitCode.USAGE
    assert "top level is a JSON list" in capsys.readouterr().err
    assert main(["replay", str(tmp_path / "missing.json")]) == ExitCode.USAGE
    assert "trace file not found" in capsys.readouterr().err


# --------------------------------------------------------------------------- incidents

def test_an_incident_case_fails_on_the_buggy_engine_and_passes_on_the_reference(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    buggy = "variants.engines:NoCompensationOnCancel"
    (trace_file,) = _save_traces(tmp_path, "cancel_while_waiting_compensates_draft", "--crash", "none",
                                 "--engine", buggy)
    assert read_trace(trace_file)["run"]["verdict"] == "failed"
    pack = tmp_path / "refunds"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("cases"))
    (pack / "cases").mkdir()
    capsys.readouterr()
    out = pack / "cases" / "incident.yaml"
    assert main(["incident", str(trace_file), "--out", str(out)]) == ExitCode.OK
    assert f"incident case written to {out}" in capsys.readouterr().out

    data = yaml.safe_load(out.read_text())
    assert data["case_id"].startswith("incident_cancel_while_waiting_compensates_draft_")
    assert data["tags"][0] == "incident"
    original = yaml.safe_load((CASES / "cancel_while_waiting_compensates_draft.yaml").read_text())
    assert data["expected"] == original["expected"]
    assert data["input"] == read_trace(trace_file)["case"]["input"]
    assert [e["type"] for e in data["events"]] == [e["type"] for e in original["events"]]
    assert trace_file.name in data["description"] and "compensation" in data["description"]
    assert f"--crash none --engine {buggy}" in data["description"]

    assert main(["validate", str(pack)]) == ExitCode.OK
    _, (case,) = load_target(pack)
    assert case.case_id == data["case_id"]
    assert main(["run", str(out), "--crash", "none", "-q", "--engine", buggy]) == ExitCode.FAILED
    assert main(["run", str(out), "--crash", "none", "-q"]) == ExitCode.OK

    # never overwritten; a passing run is no incident
    assert main(["incident", str(trace_file), "--out", str(out)]) == ExitCode.USAGE
    assert "already exists" in capsys.readouterr().err
    assert main(["incident", str(GOLDEN), "--out", str(tmp_path / "y.yaml")]) == ExitCode.USAGE
    assert "passed" in capsys.readouterr().err and not (tmp_path / "y.yaml").exists()


def test_incident_defaults_to_the_case_id_in_the_working_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    trace = json.loads(_golden_text())
    trace["run"].update(verdict="failed", failures=[{"oracle": "final_status", "message": "boom", "evidence": []}])
    path = tmp_path / "t.trace.json"
    path.write_text(json.dumps(trace, indent=2))
    monkeypatch.chdir(tmp_path)
    assert main(["incident", str(path)]) == ExitCode.OK
    (made,) = tmp_path.glob("incident_refund_approved_happy_path_*.yaml")
    assert len(made.stem.rsplit("_", 1)[1]) == 8
    assert main(["incident", str(path)]) == ExitCode.USAGE  # same trace, same name: refused


def test_an_incident_of_a_case_with_faults_keeps_them_and_still_fails(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16's "done when": the trace of a case with ``faults`` keeps them, and so does its incident case,
    which fails on the engine it came from (a second kill during recovery) and passes on the reference."""
    buggy = "variants.engines:SecondRecoveryNewKey"
    pack = tmp_path / "refunds"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("cases"))
    (pack / "cases").mkdir()
    faults = [{"kind": "kill", "at": "before_effect:refunds.draftRefundRequest", "twice": True}]
    source = pack / "cases" / "killed_twice.yaml"
    source.write_text(yaml.safe_dump({"case_id": "killed_twice", "events": [
        {"type": "approval_granted", "approval_id": "ap_1", "by": "alice"}], "faults": faults,
        "expected": {"final_status": "succeeded", "like_fault_free": True}}))
    traces = tmp_path / "traces"
    assert main(["run", str(source), "--crash", "none", "-q", "--engine", buggy, "--save-traces", str(traces)]) \
        == ExitCode.FAILED
    (trace_file,) = traces.glob("*.trace.json")
    assert read_trace(trace_file)["case"]["faults"] == faults
    source.unlink()
    out = pack / "cases" / "incident.yaml"
    assert main(["incident", str(trace_file), "--out", str(out)]) == ExitCode.OK
    data = yaml.safe_load(out.read_text())
    assert data["faults"] == faults and data["expected"]["like_fault_free"] is True
    assert main(["validate", str(pack)]) == ExitCode.OK
    capsys.readouterr()
    assert main(["run", str(out), "--crash", "none", "-q", "--engine", buggy]) == ExitCode.FAILED
    assert "differential" in capsys.readouterr().out  # the rule that catches the second recovery's new key
    assert main(["run", str(out), "--crash", "none", "-q"]) == ExitCode.OK


def test_an_incident_of_an_adapter_run_reruns_that_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """issue 17: the trace of a ``run --adapter`` run recorded no adapter, so ``crashpoint incident`` printed a
    reproduce line on the reference engine, which passes: it did not reproduce."""
    import shlex

    adapter = "variants.adapters:no_compensation_on_cancel"
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    (trace_file,) = _save_traces(tmp_path, "cancel_while_waiting_compensates_draft", "--crash", "none",
                                 "--adapter", adapter)
    trace = read_trace(trace_file)
    assert trace["run"]["verdict"] == "failed" and trace["engine"]["adapter"] == adapter
    pack = tmp_path / "refunds"
    shutil.copytree(PACK, pack, ignore=shutil.ignore_patterns("cases"))
    (pack / "cases").mkdir()
    out = pack / "cases" / "incident.yaml"
    capsys.readouterr()
    assert main(["incident", str(trace_file), "--out", str(out)]) == ExitCode.OK
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("reproduce: ")]
    words = shlex.split(line.removeprefix("reproduce: "))
    assert words[-2:] == ["--adapter", adapter] and f"--adapter {adapter}" in yaml.safe_load(out.read_text())[
        "description"]
    assert main(words[1:] + ["-q"]) == ExitCode.FAILED  # the pasted line reproduces, on that adapter
    assert main(["run", str(out), "--crash", "none", "-q"]) == ExitCode.OK  # the reference engine passes it


def test_a_trace_of_an_adapter_run_replays_on_that_adapter(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """issue 17: ``crashpoint replay`` of a ``run --adapter`` trace replayed on the reference engine, which
    decides otherwise (it compensates on cancel): a divergence that says nothing of the adapter. It now
    replays on the adapter the trace recorded; ``--engine``/``--adapter`` still choose another."""
    adapter = "variants.adapters:no_compensation_on_cancel"
    monkeypatch.syspath_prepend(str(ROOT / "tests"))
    (trace_file,) = _save_traces(tmp_path, "cancel_while_waiting_compensates_draft", "--crash", "none",
                                 "--adapter", adapter)
    assert read_trace(trace_file)["engine"]["adapter"] == adapter
    capsys.readouterr()
    assert main(["replay", str(trace_file)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "no divergence" in out and "on engine no-compensation-on-cancel" in out, out
    assert main(["replay", str(trace_file), "--engine", "crashpoint.engine.engine:Engine"]) == ExitCode.FAILED
    assert main(["replay", str(trace_file), "--adapter", adapter]) == ExitCode.OK
