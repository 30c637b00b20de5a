"""The fault-kind registry (``crashpoint.harness.faults.kinds``): one module per kind, one spelling,
the schema and the docs' table in step with it, and case files of the old spelling still read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from crashpoint.errors import CaseError
from crashpoint.harness.faults import kinds
from crashpoint.harness.load.schedule import describe
from crashpoint.harness.load.loader import load_case, load_target
from crashpoint.scenarios import SCHEMA_DIR, builtin_pack

ROOT = Path(__file__).resolve().parents[2]
BUILT_IN = ["kill", "duplicate", "hold", "insert", "reorder", "tool"]


def test_every_module_of_the_package_registers_its_kind_in_order() -> None:
    modules = sorted(p.stem for p in (ROOT / "harness" / "faults" / "kinds").glob("*.py") if p.stem != "__init__")
    assert sorted(kinds.names()) == sorted(modules) == list(kinds.listed())
    names = list(kinds.names())
    assert [n for n in names if n in BUILT_IN] == BUILT_IN  # the generator's order, so seeds keep their schedules
    with pytest.raises(ValueError, match="unknown fault kind 'meteor'; known: kill, duplicate"):
        kinds.get("meteor")


def test_each_injected_kind_has_its_schema_definition_and_only_those_are_allowed_in_case_files() -> None:
    defs = json.loads((SCHEMA_DIR / "case.schema.json").read_text())["$defs"]
    injected = [k.name for k in kinds.all_kinds() if k.injected and "pack" in k.subjects]
    assert set(injected) >= {"kill", "hold", "tool"}
    assert defs["fault"]["then"]["properties"]["kind"]["enum"] == injected
    for name in injected:
        assert defs[f"fault_{name}"]["properties"]["kind"] == {"description": f"`{name}`.", "const": name}
        branch = {"if": {"properties": {"kind": {"const": name}}}, "then": {"$ref": f"#/$defs/fault_{name}"}}
        assert branch in defs["fault"]["then"]["allOf"]


def test_each_target_kind_has_its_schema_definition_and_only_those_are_allowed_in_target_files() -> None:
    """A target's case holds the kinds whose ``subjects`` name targets, each with ``$defs.fault_KIND`` in
    target.schema.json (the kill, tool, duplicate, workers, deploy and server_crash of issue 23)."""
    defs = json.loads((SCHEMA_DIR / "target.schema.json").read_text())["$defs"]
    on_targets = [k.name for k in kinds.for_subject("target")]
    assert on_targets == ["kill", "duplicate", "tool", "workers", "deploy", "server_crash"]
    assert defs["fault"]["then"]["properties"]["kind"]["enum"] == on_targets
    for name in on_targets:
        assert defs[f"fault_{name}"]["properties"]["kind"] == {"description": f"`{name}`.", "const": name}
        branch = {"if": {"properties": {"kind": {"const": name}}}, "then": {"$ref": f"#/$defs/fault_{name}"}}
        assert branch in defs["fault"]["then"]["allOf"]
        assert kinds.get(name).coverage  # each has its coverage column
    assert {"server"} <= set(kinds.get("server_crash").needs) and "worker_identities" in kinds.get("workers").needs


def test_the_docs_fault_kinds_table_is_the_registry_table() -> None:
    page = (ROOT / "docs" / "reference" / "fault-kinds.md").read_text()
    assert kinds.table() in page
    for kind in kinds.all_kinds():
        assert kind.summary and kind.__doc__


@pytest.mark.parametrize("fault, phrase", [
    ({"kind": "kill", "at": "after_checkpoint:a", "twice": True}, "kill at after_checkpoint:a, then at after_checkpoint:a#2"),
    ({"kill": "after_checkpoint:a"}, "kill at after_checkpoint:a"),
    ({"kind": "hold", "at": "before_effect:t", "event": {"type": "cancel"}}, "cancel while held at before_effect:t"),
    ({"kind": "duplicate", "event": 0, "times": 3}, "deliver external event 0 x3"),
    ({"kind": "reorder", "event": 1}, "swap external events 1 and 2"),
    ({"kind": "insert", "after": 1, "event": {"type": "approval_granted", "before_wait": True}},
     "insert approval_granted before the wait after external event 1"),
    ({"kind": "tool", "tool": "t", "call": 2, "outcome": "timeout"}, "t call 2: timeout x1"),
])
def test_every_kind_describes_itself(fault: dict, phrase: str) -> None:
    assert describe(fault) == phrase


def test_injection_collects_kills_holds_and_tool_faults_and_says_what_never_fired() -> None:
    into = kinds.injection([{"kind": "kill", "at": "after_effect:t", "twice": True},
                            {"at": "before_effect:t", "event": {"type": "cancel"}},
                            {"tool": "t", "call": 1, "outcome": "fatal"}])
    assert into.kills == ["after_effect:t", "after_effect:t#2"]
    assert into.holds == {"before_effect:t": [{"type": "cancel"}]}
    assert into.tool_faults == [{"kind": "tool", "tool": "t", "call": 1, "outcome": "fatal", "times": 1}]
    assert into.missed(["after_effect:t"], []) == ["kill at after_effect:t#2", "event cancel at before_effect:t"]
    with pytest.raises(ValueError, match="rewrites the case's events"):
        kinds.injection([{"kind": "reorder", "event": 1}])


OLD_AND_NEW = [
    ("{kill: 'after_checkpoint:refund_draft'}", {"kind": "kill", "at": "after_checkpoint:refund_draft"}),
    ("{at: 'before_effect:refunds.issueRefund', event: {type: cancel}}",
     {"kind": "hold", "at": "before_effect:refunds.issueRefund", "event": {"type": "cancel", "deliveries": 1}}),
    ("{tool: refunds.issueRefund, call: 1, outcome: lost_response}",
     {"kind": "tool", "tool": "refunds.issueRefund", "call": 1, "outcome": "lost_response", "times": 1}),
]


@pytest.mark.parametrize("old, new", OLD_AND_NEW)
def test_case_files_of_the_old_spelling_read_as_the_one_spelling(pack_dir: Path, old: str, new: dict) -> None:
    pack, _ = load_target(pack_dir)
    path = pack_dir / "cases" / "old.yaml"
    path.write_text(f"case_id: old\nevents: []\nfaults: [{old}]\nexpected: {{final_status: succeeded}}\n")
    spelled = pack_dir / "cases" / "new.yaml"
    spelled.write_text(yaml.safe_dump({"case_id": "new", "events": [], "faults": [new],
                                       "expected": {"final_status": "succeeded"}}))
    assert load_case(path, pack).faults == [new] == load_case(spelled, pack).faults


@pytest.mark.parametrize("fault, field, message", [
    ({"kind": "kill", "at": "nowhere"}, "faults[0].at", "does not match"),
    ({"kind": "kill", "at": "after_effect:x", "times": 2}, "faults[0].times", "unknown field 'times'"),
    ({"kind": "tool", "tool": "payments.charge", "call": 1, "outcome": "fatal"}, "faults[0].tool",
     "tool 'payments.charge' is not used by workflow 'refund'"),
    ({"kind": "hold", "at": "before_effect:x", "event": {"type": "approval_granted", "approval_id": "a",
                                                         "before_wait": True}},
     "faults[0].event", "cannot also be `before_wait`"),
    ({"kind": "reorder", "event": 1}, "faults[0].kind", "reorder"),
])
def test_a_bad_fault_names_its_file_line_and_field(pack_dir: Path, fault: dict, field: str, message: str) -> None:
    pack, _ = load_target(pack_dir)
    path = pack_dir / "cases" / "bad.yaml"
    path.write_text(yaml.safe_dump({"case_id": "bad", "events": [], "expected": {}, "faults": [fault]},
                                   sort_keys=False))
    with pytest.raises(CaseError) as err:
        load_case(path, pack)
    assert err.value.field == field and message in str(err.value) and "bad.yaml" in str(err.value)
    assert re.search(r"bad\.yaml:\d+", str(err.value))


def test_the_builtin_packs_load_with_the_registry(pack_dir: Path) -> None:
    pack, cases = load_target(builtin_pack("refunds"))
    assert cases and all(c.faults == [] or all("kind" in f for f in c.faults) for c in cases)
    assert any(c.faults for c in cases)  # the cancellations held at a crash point (issue 15)
