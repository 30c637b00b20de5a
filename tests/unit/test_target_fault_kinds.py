"""A target's faults are registered fault kinds (issue 23 item 2): one spelling ``{kind: ...}`` shared with packs,
the target file's older fields read as those kinds, what an engine cannot do refused with file, line and field,
each kind's column in the target sweep's coverage matrix, and tool faults placed at their call."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from crashpoint.errors import CaseError
from crashpoint.fakes.ledger import Ledger
from crashpoint.harness.engines.base import engine_names
from crashpoint.harness.faults.kinds import FaultError
from crashpoint.harness.judge.document import sweep_data
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.model.results import RunResult
from crashpoint.harness.run.target_driver import kill_schedule, missed_faults, script_faults
from crashpoint.harness.run.target_sweep import subject_of

HEAD = {"target": "t", "engine": "langgraph", "entry": "m:g", "inputs": [{"thread": "a", "input": 1}],
        "versions": {"v2": "m:g2"}}


def _write(tmp_path: Path, cases: list[dict], **top) -> Path:
    path = tmp_path / "t.yaml"
    path.write_text(yaml.safe_dump({**HEAD, **top, "cases": cases}, sort_keys=False))
    return path


def test_the_older_spellings_are_the_kinds_a_pack_case_uses(tmp_path: Path) -> None:
    """``{effect, outcome}`` tool faults take the effect's calls in turn; ``duplicate``, ``deploy`` and
    ``server_crash`` are the kinds' faults; both files load as the same case, in the one spelling."""
    old = Target.from_file(_write(tmp_path, [{"name": "c", "duplicate": "start", "deploy": "v2", "faults": [
        {"effect": "pay", "outcome": "timeout"}, {"effect": "pay", "outcome": "lost_response", "times": 2},
        {"effect": "mail", "outcome": "slow", "seconds": 0.5}]}]))
    new = Target.from_file(_write(tmp_path, [{"name": "c", "faults": [
        {"kind": "tool", "tool": "pay", "call": 1, "outcome": "timeout"},
        {"kind": "tool", "tool": "pay", "call": 2, "outcome": "lost_response", "times": 2},
        {"kind": "tool", "tool": "mail", "call": 1, "outcome": "slow", "seconds": 0.5},
        {"kind": "duplicate", "event": "start"}, {"kind": "deploy", "version": "v2"}]}]))
    case = old.case("c")
    assert case == new.case("c")
    assert case.faults[:2] == [{"kind": "tool", "tool": "pay", "call": 1, "outcome": "timeout", "times": 1},
                               {"kind": "tool", "tool": "pay", "call": 2, "outcome": "lost_response", "times": 2}]
    assert case.faults[3:] == [{"kind": "duplicate", "event": "start", "times": 2},
                               {"kind": "deploy", "version": "v2"}]
    assert (case.duplicate, case.deploy, case.workers, case.server_crash) == ("start", "v2", 1, False)
    assert Target.from_data(old.to_data(), file=old.file) == old  # written back in the one spelling
    assert "duplicate" not in old.to_data()["cases"][0]
    with pytest.raises(FaultError, match="fault kind 'zombie' is not one a target's case can hold; a target's kinds: "
                                         "kill, duplicate, tool, workers, deploy, server_crash"):
        TargetCase("z", faults=[{"kind": "zombie", "at": "node:a@x"}])  # built in Python: no schema before it
    temporal = TargetCase("s", server_crash=True)
    assert temporal.faults == [{"kind": "server_crash"}] and temporal == TargetCase("s", faults=[{"kind": "server_crash"}])


#: The engines with a server, as the message lists them (the registry's: every engine module of the package)
SERVERS = ", ".join(engine_names(server=True))


@pytest.mark.parametrize("case, engine, field, message", [
    ({"name": "c", "faults": [{"kind": "hold", "at": "node:a@x", "event": {"type": "cancel"}}]}, "langgraph",
     "cases[0].faults[0].kind", "'hold' is not one of ['kill', 'duplicate', 'tool', 'workers', 'deploy', "
                                "'server_crash']"),
    ({"name": "c", "faults": [{"kind": "server_crash"}]}, "langgraph", "cases[0].faults[0]",
     f"server_crash needs an engine with a server ({SERVERS}), not langgraph"),
    ({"name": "c", "faults": [{"kind": "workers", "count": 2}]}, "temporal", "cases[0].faults[0]",
     "several workers at once (2) need an engine whose workers have their own identity (dbos), not temporal"),
    ({"name": "c", "workers": 3}, "langgraph", "cases[0].workers",
     "several workers at once (3) need an engine whose workers have their own identity (dbos), not langgraph"),
    ({"name": "c", "server_crash": True}, "dbos", "cases[0].server_crash",
     f"server_crash needs an engine with a server ({SERVERS}), not dbos"),
    ({"name": "c", "faults": [{"kind": "deploy", "version": "v9"}]}, "langgraph", "cases[0].faults[0].version",
     "deploys 'v9', which versions does not name"),
    ({"name": "c", "deploy": "v2", "faults": [{"kind": "deploy", "version": "v3"}]}, "langgraph",
     "cases[0].faults[0].version", "deploy: v2 and a deploy fault of version v3 disagree"),
    ({"name": "c", "faults": [{"kind": "duplicate", "event": "cancel"}]}, "langgraph", "cases[0].faults[0].event",
     "is not one of ['start', 'answer']"),
    ({"name": "c", "faults": [{"kind": "tool", "tool": "pay", "outcome": "fatal"}]}, "langgraph",
     "cases[0].faults[0].call", "missing required field 'call'"),
    # answers as real APIs give them: a stale read is for packs only, a made-up answer is refused
    ({"name": "c", "faults": [{"kind": "tool", "tool": "pay", "call": 1, "outcome": "stale_read"}]}, "langgraph",
     "cases[0].faults[0].outcome", "'stale_read' is not one of"),
    ({"name": "c", "faults": [{"kind": "tool", "tool": "pay", "call": 1, "outcome": "teapot_418"}]}, "langgraph",
     "cases[0].faults[0].outcome", "'teapot_418' is not one of"),
    ({"name": "c", "faults": [{"effect": "pay", "outcome": "half_answer"}]}, "langgraph",
     "cases[0].faults[0].outcome", "'half_answer' is not one of"),
    ({"name": "c", "faults": [{"kind": "tool", "tool": "pay", "call": 1, "outcome": "rate_limited", "seconds": 61}]},
     "langgraph", "cases[0].faults[0].seconds", "61"),
])
def test_a_fault_a_target_cannot_hold_names_its_file_line_and_field(tmp_path: Path, case: dict, engine: str,
                                                                     field: str, message: str) -> None:
    path = _write(tmp_path, [case], engine=engine)
    with pytest.raises(CaseError) as err:
        Target.from_file(path)
    assert err.value.field == field, str(err.value)
    assert message in str(err.value) and re.match(rf"{re.escape(str(path))}:\d+: field ", str(err.value)), str(err.value)


def test_each_kind_has_its_column_in_the_target_sweeps_coverage_matrix() -> None:
    """The result document's coverage matrix of a target sweep reads its units' faults through the kinds: before,
    a case with a tool fault in the target spelling made ``crashpoint run TARGET --json`` crash (ValueError: a fault
    needs a kind)."""
    target = Target(name="t", engine="temporal", entry="m:g", inputs=[{"thread": "a", "input": 1}],
                    cases=[TargetCase("flaky", faults=[{"effect": "issue_refund", "outcome": "timeout"}]),
                           TargetCase("twice", duplicate="start"),
                           TargetCase("crash", faults=[{"kind": "server_crash"}, {"kind": "kill", "at": "node:a@x"}])])
    subject = subject_of(target)
    results = [RunResult(unit, point, "passed") for unit in subject.units()
               for point in (None, "after_effect:issue_refund")]
    coverage = sweep_data(subject.result("every", results, {u: [] for u in subject.units()}, 1.0))["coverage"]
    assert coverage["issue_refund"]["tool_timeout"] == {"runs": 2, "passed": 2, "failed": 0}
    assert coverage["workflow"]["duplicate_delivery"]["runs"] == 2
    assert coverage["workflow"]["server_crash"]["runs"] == 2
    assert coverage["x"]["kill@node"]["runs"] == 2  # the case's own kill, at its node


def test_tool_faults_are_placed_at_their_call_and_missed_ones_named(tmp_path: Path) -> None:
    """``call: N`` aims at the Nth call of the effect (the calls before it succeed), as a pack's tool fault does."""
    case = TargetCase("c", faults=[{"kind": "tool", "tool": "pay", "call": 3, "outcome": "fatal"},
                                   {"effect": "mail", "outcome": "timeout"}])
    ledger = Ledger(tmp_path / "ledger.db")
    tool_faults = case.injection().tool_faults
    owners = script_faults(ledger, tool_faults)
    with ledger.transaction() as conn:
        took = [ledger.next_script(conn, "pay")[0] for _ in range(4)]
    assert took == ["success", "success", "fatal", "success"]  # beyond the script: success
    assert missed_faults(ledger, tool_faults, owners) == ["mail timeout"]  # mail was never called


def test_a_cases_kills_fire_before_the_sweeps() -> None:
    case = TargetCase("c", faults=[{"kind": "kill", "at": "node:a@x"}])
    assert kill_schedule(case, "after_effect:pay") == "node:a@x >> after_effect:pay"
    assert kill_schedule(case, None) == "node:a@x" and kill_schedule(TargetCase(), None) is None


def test_each_engine_declares_the_capabilities_the_kinds_need() -> None:
    """``Engine.capabilities()`` is what the driver hands :func:`~crashpoint.harness.faults.kinds.lacking`: the flags
    each engine declares, so a kind's ``needs`` is answered by the engine, not by its name."""
    from crashpoint.harness.engines.base import engine_for
    from crashpoint.harness.faults import kinds

    assert engine_for("temporal").capabilities() == {"server"}
    assert engine_for("dbos").capabilities() == {"worker_identities"}
    assert engine_for("langgraph").capabilities() == {"rendezvous"}
    faults = [{"kind": "tool", "tool": "pay", "call": 1, "outcome": "timeout"}, {"kind": "server_crash"},
              {"kind": "workers", "count": 2}, {"kind": "server_crash"}, {"kind": "duplicate", "event": "start"}]
    assert kinds.lacking(faults, {"rendezvous"}) == ["server_crash needs server", "workers needs worker_identities"]
    assert kinds.lacking(faults, {"server"}) == ["workers needs worker_identities"]
    assert kinds.lacking(faults, {"server", "worker_identities"}) == []


@pytest.mark.parametrize("engine, fault, missing", [
    ("langgraph", {"kind": "server_crash"}, "server_crash needs server"),
    ("dbos", {"kind": "server_crash"}, "server_crash needs server"),
    ("langgraph", {"kind": "workers", "count": 2}, "workers needs worker_identities"),
    ("temporal", {"kind": "workers", "count": 3}, "workers needs worker_identities"),
])
def test_a_run_of_a_fault_its_engine_lacks_is_unsupported_and_starts_no_worker(tmp_path: Path, engine: str,
                                                                               fault: dict, missing: str) -> None:
    """A case built in Python (no target file to refuse it: the file's validation exits 2 instead, above) holding a
    kind whose ``needs`` its engine lacks: its golden run and its crash runs are ``unsupported``, naming the kind and
    the capability, never passed (it would run without the fault) nor failed; no worker starts, no folder is made."""
    from crashpoint.harness.run.target_sweep import run_one

    target = Target(name="t", engine=engine, entry="m:g", inputs=[{"thread": "a", "input": 1}])
    case = TargetCase("lacking", faults=[{"kind": "tool", "tool": "pay", "call": 1, "outcome": "timeout"}, fault])
    for point in (None, "after_effect:pay"):
        r = run_one(target, case, "sync", tmp_path / "run", point, None)
        assert (r.verdict, r.failures) == ("unsupported", []), r.error
        assert r.error == f"engine {engine} cannot inject the case's faults: {missing}"
        assert not (tmp_path / "run").exists()


def test_the_answers_of_real_apis_are_accepted_and_a_stale_read_is_refused_by_the_kind_too(tmp_path: Path) -> None:
    """A target file may give ``rate_limited``, ``empty_answer`` and ``malformed_answer``; the kind itself refuses a
    ``stale_read`` on a target (a ``TargetCase`` built in Python, past the schema), naming the field."""
    from crashpoint.harness.faults import kinds
    from crashpoint.harness.faults.kinds import FaultError

    faults = [{"kind": "tool", "tool": "pay", "call": n, "outcome": o, **({"seconds": 0.5} if o == "rate_limited"
                                                                          else {})}
              for n, o in enumerate(["rate_limited", "empty_answer", "malformed_answer"], 1)]
    Target.from_file(_write(tmp_path, [{"name": "c", "faults": faults}], engine="langgraph"))
    with pytest.raises(FaultError) as err:
        kinds.get("tool").check_target({"kind": "tool", "tool": "pay", "call": 1, "outcome": "stale_read"})
    assert err.value.path == ("outcome",) and "packs only" in str(err.value)
