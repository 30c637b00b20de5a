"""The one case model: ``Case.to_data`` / ``Case.from_data`` are a round trip, and a case file written
from a case loads back as the same case (a hypothesis property over generated cases)."""

from __future__ import annotations

import dataclasses
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashpoint.errors import CaseError
from crashpoint.harness.load.loader import Case, load_case, load_target, workflow_tools
from crashpoint.harness.load.schedule import apply, case_data
from crashpoint.scenarios import builtin_pack

PACK, CASES = load_target(builtin_pack("refunds"))
WORKFLOW = PACK.workflows["refund"]
TASKS = [t["id"] for p in WORKFLOW["phases"] for t in p["tasks"]]
TOOLS = sorted(workflow_tools(WORKFLOW))

names = st.text(string.ascii_lowercase + string.digits + "_", min_size=1, max_size=12)
text = st.text(string.ascii_letters + string.digits + " .,:'-", max_size=30)
points = st.builds(lambda kind, name, n: f"{kind}:{name}" + (f"#{n}" if n > 1 else ""),
                   st.sampled_from(["before_effect", "after_effect", "after_checkpoint", "approval_request"]),
                   st.sampled_from([*TOOLS, "refund_draft", "refund_approval"]), st.integers(1, 3))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6), text)

tool_events = st.one_of(
    st.fixed_dictionaries({"type": st.just("tool_success"), "tool": st.sampled_from(TOOLS), "times": st.integers(1, 3)}),
    st.fixed_dictionaries({"type": st.just("tool_failure"), "tool": st.sampled_from(TOOLS), "times": st.integers(1, 3),
                           "retryable": st.booleans()}, optional={"message": text}),
    st.fixed_dictionaries({"type": st.just("tool_timeout"), "tool": st.sampled_from(TOOLS), "times": st.integers(1, 2)}),
    st.fixed_dictionaries({"type": st.just("tool_lost_response"), "tool": st.sampled_from(TOOLS),
                           "times": st.integers(1, 2)}),
    st.fixed_dictionaries({"type": st.just("tool_slow"), "tool": st.sampled_from(TOOLS), "times": st.integers(1, 2),
                           "seconds": st.floats(0.5, 10**5)}),
)
decision = st.fixed_dictionaries({"type": st.sampled_from(["approval_granted", "approval_denied"]),
                                  "approval_id": names, "deliveries": st.integers(1, 3), "before_wait": st.just(False)},
                                 optional={"by": text})
cancel = st.fixed_dictionaries({"type": st.just("cancel"), "deliveries": st.integers(1, 3)}, optional={"reason": text})
clock = st.fixed_dictionaries({"type": st.just("advance_clock"), "seconds": st.floats(0.001, 10**6)})
external = st.one_of(decision, cancel, clock, st.just({"type": "restart"}),
                     st.fixed_dictionaries({"type": st.just("approval_timeout"), "approval_id": names}))
held = st.one_of(decision, cancel, clock)
faults = st.one_of(
    st.builds(lambda at, twice: {"kind": "kill", "at": at, **({"twice": True} if twice else {})}, points, st.booleans()),
    st.fixed_dictionaries({"kind": st.just("hold"), "at": points, "event": held}),
    st.fixed_dictionaries({"kind": st.just("tool"), "tool": st.sampled_from(TOOLS), "call": st.integers(1, 5),
                           "outcome": st.sampled_from(["retryable", "fatal", "timeout", "lost_response"]),
                           "times": st.integers(1, 3)}),
)


@st.composite
def cases(draw: st.DrawFn) -> dict:
    """Case-file data of the refunds pack's ``refund`` workflow, every optional part drawn or not."""
    fs = draw(st.lists(faults, max_size=4))
    expected = draw(st.fixed_dictionaries({}, optional={
        "final_status": st.sampled_from(["succeeded", "failed", "cancelled", "waiting_or_escalated"]),
        "stop_reason": text, "must_not_issue_refund": st.booleans(),
        "effects": st.dictionaries(st.sampled_from(["draft_refund", "issue_refund"]), st.integers(0, 3)),
        "requires_checkpoint": st.lists(names, max_size=2),
        "required_trace_events": st.lists(st.sampled_from(["checkpoint", "tool_call", "approval_granted"]), max_size=2),
    }))
    if fs and draw(st.booleans()):
        expected["like_fault_free"] = True
    data = {"case_id": draw(names), "events": draw(st.lists(tool_events, max_size=3)) +
            draw(st.lists(external, max_size=4)), "expected": expected}
    optional = {"description": text.filter(bool), "workflow": st.just("refund"), "initial_step": st.sampled_from(TASKS),
                "input": st.dictionaries(names, scalars, max_size=4), "tags": st.lists(names, max_size=3)}
    for key, strategy in optional.items():
        if draw(st.booleans()):
            data[key] = draw(strategy)
    if fs:
        data["faults"] = fs
    return data


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=cases())
def test_load_of_dump_is_the_same_case(tmp_path: Path, data: dict) -> None:
    case = Case.from_data(data, PACK, path=tmp_path / "cases" / "c.yaml")
    assert Case.from_data(case.to_data(), PACK, path=case.path) == case
    path = PACK.cases_dir / "c.yaml"  # a case file must lie in its pack; nothing is written there
    loaded = Case.from_data(yaml.safe_load(yaml.safe_dump(case.to_data(), sort_keys=False)), PACK, path=path)
    assert loaded == dataclasses.replace(case, path=path)


def test_a_written_case_file_loads_as_the_case(pack_dir: Path) -> None:
    pack, _ = load_target(pack_dir)
    for base in CASES:
        case = apply(base, pack, [{"kind": "kill", "at": "after_effect:refunds.issueRefund", "twice": True},
                                  {"kind": "tool", "tool": "refunds.draftRefundRequest", "call": 1,
                                   "outcome": "slow", "seconds": 9.5}])
        path = pack_dir / "cases" / f"{case.case_id}.yaml"
        path.write_text(yaml.safe_dump(case.to_data(), sort_keys=False))
        assert load_case(path, pack) == dataclasses.replace(case, path=path)
        assert case_data(case)["faults"] == case.faults


def test_from_data_checks_like_a_case_file() -> None:
    good = CASES[0].to_data()
    with pytest.raises(CaseError) as err:
        Case.from_data({**good, "faults": [{"kind": "kill", "at": "x"}]}, PACK, path="memory.yaml")
    assert err.value.field == "faults[0].at" and "memory.yaml" in str(err.value)
    with pytest.raises(CaseError, match="missing required field 'workflow'"):
        Case.from_data({"case_id": "x", "events": [], "expected": {}})
    assert Case.from_data(good, path=CASES[0].path) == CASES[0]  # without the pack: the schema only
