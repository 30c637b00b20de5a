"""Tests of crashpoint.harness.load.loader: packs, workflows and cases, and their error messages."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from crashpoint.errors import CaseError, UsageError
from crashpoint.harness.load import loader
from crashpoint.harness.load.loader import Locator, find_pack_dir, load_case, load_pack, load_target, load_yaml
from crashpoint.scenarios import PACKS_DIR, SCHEMA_DIR, builtin_pack

SEED = "approval_timeout_after_refund_draft.json"

GOOD_CASE = """\
case_id: draft_then_grant
description: the happy path
input: {order_id: o1, amount_cents: 500}
events:
  - type: tool_success
    tool: refunds.draftRefundRequest
  - type: approval_granted
    approval_id: refund_approval
expected:
  final_status: succeeded
  effects: {draft_refund: 1, issue_refund: 1}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def case_error(path: Path, pack: loader.Pack) -> CaseError:
    with pytest.raises(CaseError) as info:
        load_case(path, pack)
    return info.value


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


# ---------------------------------------------------------------- the built-in pack

def test_builtin_pack_loads_with_defaults_filled() -> None:
    pack = load_pack(builtin_pack("refunds"))
    assert (pack.name, pack.version, pack.default_workflow) == ("refunds", "1.0.0", "refund")
    assert set(pack.effects) == {"draft_refund", "issue_refund", "notify_customer"}
    assert pack.effect_for_tool("refunds.issueRefund") == "issue_refund"
    assert pack.effect_for_tool("approvals.request") is None
    assert pack.cases_dir == builtin_pack("refunds") / "cases"
    assert pack.workflow_files["refund"].name == "refund.yaml"
    phases = pack.workflows["refund"]["phases"]
    assert [t["id"] for p in phases for t in p["tasks"]] == ["draft_refund", "issue_refund", "notify_customer"]
    assert phases[1]["human_gate"] is False                 # default filled
    assert phases[0]["tasks"][0]["irreversible"] is False   # default filled
    assert phases[1]["tasks"][1]["checkpoint"] == "customer_notified"
    assert "refunds.cancelRefundDraft" in pack.tools("refund")


def test_seed_json_case_loads_intact() -> None:
    path = builtin_pack("refunds") / "cases" / SEED
    raw = json.loads(path.read_text(encoding="utf-8"))
    case = load_case(path, load_pack(builtin_pack("refunds")))
    assert case.case_id == raw["case_id"]
    assert (case.workflow, case.initial_step) == ("refund", "draft_refund")
    assert case.expected == raw["expected"]
    assert case.events == [dict(raw["events"][0], times=1), raw["events"][1]]
    assert case.input == {} and case.tags == ()
    assert case.line_of["events[1].approval_id"] == 6


def test_load_target_builtin_pack_and_single_file() -> None:
    pack, cases = load_target(builtin_pack("refunds"))
    assert pack.name == "refunds"
    assert SEED.removesuffix(".json") in [c.case_id for c in cases]
    _, one = load_target(builtin_pack("refunds") / "cases" / SEED)
    assert [c.path.name for c in one] == [SEED]


def test_builtin_pack_paths() -> None:
    assert (SCHEMA_DIR / "case.schema.json").is_file()
    assert builtin_pack("refunds") == PACKS_DIR / "refunds"
    with pytest.raises(UsageError, match="no built-in pack 'nope'; built-in packs: .*refunds"):
        builtin_pack("nope")


def test_good_yaml_case_fills_defaults(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "good.yaml", GOOD_CASE + "tags: [happy]\n")
    case = load_case(path, pack)
    assert case.events == [
        {"type": "tool_success", "tool": "refunds.draftRefundRequest", "times": 1},
        {"type": "approval_granted", "approval_id": "refund_approval", "deliveries": 1, "before_wait": False},
    ]
    assert case.tags == ("happy",) and case.input["amount_cents"] == 500
    assert case.description == "the happy path"


def test_json_with_tab_indentation_loads(pack_dir: Path, pack: loader.Pack) -> None:
    raw = {"case_id": "tabs", "events": [{"type": "restart"}], "expected": {}}
    path = pack_dir / "cases" / "tabs.json"
    path.write_text(json.dumps(raw, indent="\t"), encoding="utf-8")
    assert load_case(path, pack).events == [{"type": "restart"}]


# ---------------------------------------------------------------- YAML-level errors

def test_yaml_syntax_error_line(tmp_path: Path) -> None:
    path = write(tmp_path / "bad.yaml", """\
        case_id: x
        events:
          - type: restart
        expected: {final_status: succeeded
        """)
    with pytest.raises(CaseError) as info:
        load_yaml(path)
    err = info.value
    assert err.file == str(path) and err.line == 5
    assert str(err).startswith(f"{path}:5: YAML syntax error: ")


def test_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "dup.yaml", """\
        case_id: x
        events: []
        expected:
          final_status: failed
          final_status: succeeded
        """)
    with pytest.raises(CaseError) as info:
        load_yaml(path)
    assert str(info.value) == (f"{path}:5: field expected.final_status: "
                               "duplicate key 'final_status' (first at line 4)")


def test_non_string_key_is_an_error(tmp_path: Path) -> None:
    path = write(tmp_path / "k.yaml", "expected:\n  effects:\n    1: 2\n")
    with pytest.raises(CaseError, match=r":3: field expected.effects: keys must be strings, got int 1"):
        load_yaml(path)


def test_missing_file_and_folder(tmp_path: Path, pack: loader.Pack) -> None:
    with pytest.raises(CaseError, match="nope.yaml: file not found"):
        load_case(tmp_path / "nope.yaml", pack)
    with pytest.raises(CaseError, match="not a file"):
        load_case(tmp_path, pack)


@pytest.mark.parametrize("text, got", [("- a\n- b\n", "a list"), ("", "an empty file"), ("42\n", "a int")])
def test_top_level_must_be_a_mapping(pack_dir: Path, pack: loader.Pack, text: str, got: str) -> None:
    err = case_error(write(pack_dir / "cases" / "top.yaml", text), pack)
    assert err.line == 1 and f"must be a mapping at the top level, got {got}" in err.message


def test_locator_falls_back_to_nearest_ancestor(tmp_path: Path) -> None:
    _, loc = load_yaml(write(tmp_path / "a.yaml", "# comment\na:\n  b:\n    - x\n    - y\n"))
    assert loc.line(("a", "b", 1)) == 5
    assert loc.line(("a", "b", 7, "z")) == 3
    assert loc.line(("zzz",)) == 1 == Locator().line(("q",))
    assert loader.dotted(("events", 1, "type")) == "events[1].type"


# ---------------------------------------------------------------- schema errors

def test_unknown_top_level_field(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "typo.yaml", """\
        case_id: typo
        events: []
        expectd:
          final_status: failed
        """)
    err = case_error(path, pack)
    assert (err.file, err.line, err.field) == (str(path), 3, "expectd")
    assert err.message.startswith("unknown field 'expectd'; allowed: case_id, description, events, expected,")
    assert str(err).startswith(f"{path}:3: field expectd: unknown field 'expectd'")


def test_unknown_event_field(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "colour.yaml", """\
        case_id: colour
        events:
          - type: tool_success
            tool: refunds.draftRefundRequest
            colour: red
        expected: {}
        """)
    err = case_error(path, pack)
    assert str(err) == f"{path}:5: field events[0].colour: unknown field 'colour'; allowed: times, tool, type"


def test_field_of_another_event_type_is_unknown(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "ev.yaml", """\
        case_id: ev
        events:
          - {type: restart}
          - {type: tool_success, tool: refunds.issueRefund, retryable: false}
        expected: {}
        """)
    err = case_error(path, pack)
    assert (err.line, err.field) == (4, "events[1].retryable")
    assert err.message == "unknown field 'retryable'; allowed: times, tool, type"


def test_wrong_type_names_the_field(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "type.yaml", """\
        case_id: wrong_type
        events:
          - type: tool_failure
            tool: refunds.issueRefund
            retryable: "yes"
        expected: {}
        """)
    err = case_error(path, pack)
    assert str(err) == f"{path}:5: field events[0].retryable: 'yes' is not of type 'boolean'"


def test_missing_required_field(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "req.yaml", """\
        case_id: req
        events:
          - type: restart
          - type: tool_failure
            retryable: false
        expected: {}
        """)
    err = case_error(path, pack)
    assert (err.line, err.field, err.message) == (4, "events[1].tool", "missing required field 'tool'")


@pytest.mark.parametrize("text, field, message", [
    ("case_id: Bad-Id\nevents: []\nexpected: {}", "case_id", "'Bad-Id' does not match '^[a-z0-9_]+$'"),
    ("case_id: ok\nevents: []\nexpected: {final_status: done}", "expected.final_status", "'done' is not one of"),
    ("case_id: ok\nevents: []\nexpected: {effects: {draft_refund: -1}}", "expected.effects.draft_refund",
     "-1 is less than the minimum of 0"),
    ("case_id: ok\nevents: []\nexpected: {must_not_issue_refund: 1}", "expected.must_not_issue_refund",
     "1 is not of type 'boolean'"),
    ("case_id: ok\nevents: [{type: explode}]\nexpected: {}", "events[0].type", "'explode' is not one of"),
    ("case_id: ok\nevents: [{type: advance_clock, seconds: 0}]\nexpected: {}", "events[0].seconds",
     "0 is less than or equal to the minimum of 0"),
    ("case_id: ok\nevents: [{type: cancel, deliveries: 0}]\nexpected: {}", "events[0].deliveries",
     "0 is less than the minimum of 1"),
])
def test_schema_errors(pack_dir: Path, pack: loader.Pack, text: str, field: str, message: str) -> None:
    err = case_error(write(pack_dir / "cases" / "s.yaml", text + "\n"), pack)
    assert err.field == field and err.message.startswith(message), str(err)


# ---------------------------------------------------------------- semantic case errors

def test_unknown_workflow(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "wf.yaml", """\
        case_id: wf
        description: runs a workflow the pack lacks
        workflow: chargeback
        events: []
        expected: {}
        """)
    err = case_error(path, pack)
    assert str(err) == f"{path}:3: field workflow: unknown workflow 'chargeback'; pack 'refunds' has: refund"


def test_unknown_initial_step(pack_dir: Path, pack: loader.Pack) -> None:
    err = case_error(write(pack_dir / "cases" / "s.yaml", "case_id: s\ninitial_step: nope\nevents: []\nexpected: {}\n"), pack)
    assert (err.line, err.field) == (2, "initial_step")
    assert "'nope' is not a task of workflow 'refund'" in err.message


def test_unknown_tool(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "tool.yaml", """\
        case_id: tool
        events:
          - type: tool_success
            tool: refunds.draftRefundRequest
          - type: tool_failure
            tool: payments.charge
        expected: {}
        """)
    err = case_error(path, pack)
    assert (err.file, err.line, err.field) == (str(path), 6, "events[1].tool")
    assert err.message.startswith("tool 'payments.charge' is not used by workflow 'refund'; tools: approvals.request,")


def test_unknown_effect_in_must_not(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "eff.yaml", """\
        case_id: eff
        events: []
        expected:
          final_status: failed
          must_not_charge_card: true
        """)
    err = case_error(path, pack)
    assert str(err).startswith(f"{path}:5: field expected.must_not_charge_card: unknown effect 'charge_card'; "
                               "pack 'refunds' effects: draft_refund, issue_refund, notify_customer")


@pytest.mark.parametrize("expected, line, field", [
    ("  effects:\n    draft_refund: 1\n    teleport: 0\n", 6, "expected.effects.teleport"),
    ("  compensated:\n    - draft_refund\n    - teleport\n", 6, "expected.compensated[1]"),
])
def test_unknown_effect_in_effects_and_compensated(pack_dir: Path, pack: loader.Pack, expected: str,
                                                    line: int, field: str) -> None:
    path = write(pack_dir / "cases" / "e.yaml", "case_id: e\nevents: []\nexpected:\n" + expected)
    err = case_error(path, pack)
    assert (err.line, err.field) == (line, field) and "unknown effect 'teleport'" in err.message


def test_start_must_be_first(pack_dir: Path, pack: loader.Pack) -> None:
    ok = write(pack_dir / "cases" / "ok.yaml", "case_id: ok\nevents: [{type: start, deliveries: 2}]\nexpected: {}\n")
    assert load_case(ok, pack).events == [{"type": "start", "deliveries": 2}]
    path = write(pack_dir / "cases" / "late.yaml", "case_id: late\nevents:\n  - type: restart\n  - type: start\nexpected: {}\n")
    err = case_error(path, pack)
    assert (err.line, err.field) == (4, "events[1].type") and "only allowed as the first event" in err.message


# ---------------------------------------------------------------- load_target

def test_duplicate_case_id_across_files(pack_dir: Path) -> None:
    write(pack_dir / "cases" / "a_first.yaml", GOOD_CASE)
    second = write(pack_dir / "cases" / "b_second.yml", GOOD_CASE)
    with pytest.raises(CaseError) as info:
        load_target(pack_dir)
    err = info.value
    assert (err.file, err.line, err.field) == (str(second), 1, "case_id")
    assert err.message == f"duplicate case_id 'draft_then_grant' (first in {pack_dir / 'cases' / 'a_first.yaml'}:1)"


def test_load_target_raises_on_one_bad_case(pack_dir: Path) -> None:
    write(pack_dir / "cases" / "a_good.yaml", GOOD_CASE)
    bad = write(pack_dir / "cases" / "b_bad.yaml", "case_id: bad\nevents: []\n")
    write(pack_dir / "cases" / "notes.txt", "not a case")  # other suffixes are not cases
    with pytest.raises(CaseError) as info:
        load_target(pack_dir)
    assert (info.value.file, info.value.field) == (str(bad), "expected")
    bad.unlink()
    _, cases = load_target(pack_dir)
    assert [c.path.name for c in cases] == ["a_good.yaml", SEED]
    _, cases = load_target(pack_dir / "cases")  # a folder inside the pack
    assert len(cases) == 2


def test_find_pack_dir(pack_dir: Path, tmp_path: Path) -> None:
    assert find_pack_dir(pack_dir / "cases" / SEED) == pack_dir.absolute()
    assert find_pack_dir(pack_dir) == pack_dir.absolute()
    lonely = write(tmp_path / "elsewhere" / "c.yaml", GOOD_CASE)
    with pytest.raises(CaseError, match="no pack.yaml"):
        find_pack_dir(lonely)
    with pytest.raises(CaseError, match="no pack.yaml"):
        load_target(lonely)


# ---------------------------------------------------------------- pack and workflow errors

def pack_error(pack_dir: Path) -> CaseError:
    with pytest.raises(CaseError) as info:
        load_pack(pack_dir)
    return info.value


def test_pack_unknown_field_and_missing_workflow_file(pack_dir: Path) -> None:
    edit(pack_dir / "pack.yaml", "cases: cases", "cases: cases\nowner: me")
    err = pack_error(pack_dir)
    assert (err.field, err.line) == ("owner", 26) and err.message.startswith("unknown field 'owner'")
    edit(pack_dir / "pack.yaml", "\nowner: me", "")
    edit(pack_dir / "pack.yaml", "workflows/refund.yaml", "workflows/gone.yaml")
    err = pack_error(pack_dir)
    assert (err.file, err.line, err.field) == (str(pack_dir / "pack.yaml"), 8, "workflows.refund")
    assert "workflow file not found" in err.message


@pytest.mark.parametrize("old, new, field, message", [
    ("default_workflow: refund", "default_workflow: refnud", "default_workflow", "unknown workflow 'refnud'"),
    ("tool: notify.sendCustomerEmail", "tool: notify.sms", "effects.notify_customer.tool",
     "tool 'notify.sms' is used by no workflow"),
    ("gated_by: refund_approval", "gated_by: boss_approval", "effects.issue_refund.gated_by",
     "no workflow has a human_gate with approval_id 'boss_approval'"),
    ('version: "1.0.0"', "version: 1.0", "version", "1.0 is not of type 'string'"),
])
def test_pack_errors(pack_dir: Path, old: str, new: str, field: str, message: str) -> None:
    edit(pack_dir / "pack.yaml", old, new)
    err = pack_error(pack_dir)
    assert err.file == str(pack_dir / "pack.yaml") and err.field == field and message in err.message, str(err)


@pytest.mark.parametrize("old, new, line, field, message", [
    ("      - id: notify_customer", "      - id: issue_refund", 40, "phases[1].tasks[1].id",
     "duplicate id 'issue_refund' (first at line 31)"),
    ("  - id: issue\n", "  - id: draft\n", 26, "phases[1].id", "duplicate id 'draft' (first at line 6)"),
    ("    human_gate:\n      approval_id", "    human_gate_off:\n      approval_id", 10, "phases[0].human_gate_off",
     "unknown field 'human_gate_off'"),
    ("        side_effect: true\n        compensation", "        side_effect: false\n        compensation", 24,
     "phases[0].tasks[0].compensation", "has a compensation but no side_effect"),
    ("        retries: 1", "        retries: -1", 43, "phases[1].tasks[1].retries", "-1 is less than the minimum of 0"),
    ("draft_id: \"$result.draft_refund.draft_id\"", "draft_id: \"$result.issue_refund.x\"", 33,
     "phases[1].tasks[0].args.draft_id", "which is not an earlier task"),
    ("    on_error: abort\n", "    on_error: abort\n    human_gate: true\n", 30, "phases[1].human_gate",
     "must be false or a mapping, got True"),
    ("      on_timeout: escalate", "      on_timeout: shrug", 14, "phases[0].human_gate.on_timeout",
     "'shrug' is not one of"),
])
def test_workflow_errors(pack_dir: Path, old: str, new: str, line: int, field: str, message: str) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    edit(wf, old, new)
    err = pack_error(pack_dir)
    assert (err.file, err.line, err.field) == (str(wf), line, field), str(err)
    assert message in err.message, str(err)


def test_irreversible_task_needs_an_earlier_gate(pack_dir: Path) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    text = wf.read_text(encoding="utf-8")
    start, end = text.index("    human_gate:"), text.index("    tasks:")
    wf.write_text(text[:start] + text[end:], encoding="utf-8")  # drop the gate
    err = pack_error(pack_dir)
    assert (err.field, err.line) == ("phases[1].tasks[0].irreversible", 38 - 6)
    assert "irreversible task 'issue_refund' needs a human_gate in an earlier phase" in err.message


# ---------------------------------------------------------------- the fault model's newer event types

def test_new_fault_events_load_with_defaults(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "faults.yaml", """\
        case_id: faults
        events:
          - {type: approval_granted, approval_id: ap_1, before_wait: true}
          - {type: tool_timeout, tool: refunds.draftRefundRequest}
          - {type: tool_lost_response, tool: refunds.issueRefund, times: 2}
          - {type: tool_slow, tool: notify.sendCustomerEmail, seconds: 1.5}
          - {type: deploy, version: 2}
          - {type: deploy, version: 3, rename_tasks: {notify_customer: tell_customer}}
        expected: {}
        """)
    case = load_case(path, pack)
    assert case.events == [
        {"type": "approval_granted", "approval_id": "ap_1", "before_wait": True, "deliveries": 1},
        {"type": "tool_timeout", "tool": "refunds.draftRefundRequest", "times": 1},
        {"type": "tool_lost_response", "tool": "refunds.issueRefund", "times": 2},
        {"type": "tool_slow", "tool": "notify.sendCustomerEmail", "seconds": 1.5, "times": 1},
        {"type": "deploy", "version": 2, "rename_tasks": {}},
        {"type": "deploy", "version": 3, "rename_tasks": {"notify_customer": "tell_customer"}},
    ]


@pytest.mark.parametrize("events, line, field, message", [
    ("[{type: tool_slow, tool: refunds.issueRefund}]", 2, "events[0].seconds", "missing required field 'seconds'"),
    ("[{type: tool_slow, tool: refunds.issueRefund, seconds: 0}]", 2, "events[0].seconds",
     "0 is less than or equal to the minimum of 0"),
    ("[{type: tool_timeout, tool: refunds.issueRefund, retryable: false}]", 2, "events[0].retryable",
     "unknown field 'retryable'; allowed: times, tool, type"),
    ("[{type: tool_lost_response, tool: payments.charge}]", 2, "events[0].tool",
     "tool 'payments.charge' is not used by workflow 'refund'"),
    ("[{type: restart}, {type: approval_granted, approval_id: a, before_wait: true}]", 2, "events[1].before_wait",
     ("an approval with before_wait: true is delivered right after the start request, so it must come before "
      "every other event but tool events and start (event 0 is a restart)")),
    ("[{type: deploy, version: 1}]", 2, "events[0].version", "1 is less than the minimum of 2"),
    ("[{type: deploy, version: 3}, {type: deploy, version: 3}]", 2, "events[1].version",
     "deploy version 3 must be greater than 3"),
    ("[{type: deploy, version: 2, rename_tasks: {nope: x}}]", 2, "events[0].rename_tasks.nope",
     "rename_tasks: 'nope' is not a task of workflow 'refund'"),
    ("[{type: deploy, version: 2, rename_tasks: {notify_customer: issue_refund}}]", 2, "events[0].rename_tasks",
     "rename_tasks: the new version would use the id 'issue_refund' twice"),
    ("[{type: deploy, version: 2, rename_tasks: {notify_customer: a.b}}]", 2, "events[0].rename_tasks.notify_customer",
     "'a.b' does not match"),
])
def test_new_fault_event_errors(pack_dir: Path, pack: loader.Pack, events: str, line: int, field: str,
                                message: str) -> None:
    err = case_error(write(pack_dir / "cases" / "f.yaml", f"case_id: f\nevents: {events}\nexpected: {{}}\n"), pack)
    assert (err.line, err.field) == (line, field) and err.message.startswith(message), str(err)


def test_redeployed_renames_tasks_and_their_result_references(pack: loader.Pack) -> None:
    wf = pack.workflows["refund"]
    v2 = loader.redeployed(wf, 2, {"draft_refund": "create_draft"})
    assert (v2["version"], wf["version"]) == (2, 1)  # a copy: the pack's own data is untouched
    draft, issue = v2["phases"][0]["tasks"][0], v2["phases"][1]["tasks"][0]
    assert (draft["id"], draft["checkpoint"]) == ("create_draft", "refund_draft")
    assert issue["args"]["draft_id"] == "$result.create_draft.draft_id"
    assert wf["phases"][1]["tasks"][0]["args"]["draft_id"] == "$result.draft_refund.draft_id"
    assert loader.first_gate(v2)["approval_id"] == "refund_approval"


def test_two_gates_with_one_approval_id_are_refused(tmp_path: Path) -> None:
    """One human grant would answer both gates, so the second would never be asked: exit 2 naming the
    file, the line and the field."""
    import shutil

    import yaml

    pack_dir = tmp_path / "ads_audit"
    shutil.copytree(builtin_pack("ads_audit"), pack_dir)
    path = pack_dir / "workflows" / "ads_audit.yaml"
    data = yaml.safe_load(path.read_text())
    gate = next(p["human_gate"] for p in data["phases"] if p.get("human_gate"))
    data["phases"][0]["human_gate"] = {"approval_id": gate["approval_id"], "timeout_s": 100, "checkpoint": "early"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    with pytest.raises(CaseError, match="duplicate human_gate approval_id") as info:
        load_pack(pack_dir)
    assert info.value.file == str(path) and info.value.field.endswith("human_gate.approval_id") and info.value.line
