"""A pack that brings its own world (``pack.yaml`` ``world``): its tools module and input generator,
in a temporary folder, under ``crashpoint run`` (real kills, forked and cold workers) and
``pytest --chaos``; a workflow calling a tool no world provides is refused by ``validate``."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from crashpoint.fakes.tools import BUILTIN_TOOLS
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.cli.main import ExitCode, main
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.pack_driver import Driver

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[2]
DESK = ROOT / "tests" / "data" / "desk_pack"


@pytest.fixture()
def desk(tmp_path: Path) -> Path:
    """A copy of the desk pack (tools.py, desk.py, inputs.py) in a temporary folder."""
    return Path(shutil.copytree(DESK, tmp_path / "somewhere" / "desk"))


def test_a_pack_with_its_own_tools_runs_with_real_kills_from_any_folder(desk: Path, tmp_path: Path) -> None:
    """``crashpoint run`` as a new process in an unrelated working directory: the workers (forked from
    the warm parent, and new interpreters) import the pack's tools module from the run folder alone."""
    out = tmp_path / "r.json"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    points = ["before_effect:crm.openTicket", "after_effect:crm.openTicket", "after_effect:crm.assignAgent"]
    for mode in ("kill", "kill-cold"):
        argv = [sys.executable, "-m", "crashpoint.harness.cli.main", "run", str(desk), "-q", "--json", str(out),
                "--crash-mode", mode] + [a for p in points for a in ("--crash-point", p)]
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        proc = subprocess.run(argv, cwd=elsewhere, env=env, capture_output=True, text=True, timeout=300)
        assert proc.returncode == ExitCode.OK, proc.stdout + proc.stderr
        results = json.loads(out.read_text())["results"]
        killed = [r for r in results if r["crash_point"] != "none"]
        # the lost-response and refusal cases call crm.openTicket; only the happy case reaches every point
        assert {r["crash_point"] for r in killed} == set(points)
        assert all(r["verdict"] == "passed" and r["crash_fired"] and r["kills"] == 1 for r in killed), killed


def test_the_pack_tools_get_the_ledger_faults_keys_and_crash_points(desk: Path, tmp_path: Path) -> None:
    pack, cases = load_target(desk)
    by_id = {c.case_id: c for c in cases}
    driver = Driver(ReferenceAdapter(), pack)
    golden = driver.run(by_id["ticket_opened_and_assigned"], tmp_path / "golden")
    assert golden.status == "succeeded"
    assert {"before_effect:crm.openTicket", "after_effect:crm.openTicket",
            "before_effect:crm.assignAgent", "after_effect:crm.assignAgent"} <= set(golden.crash_points)
    opened, assigned = golden.calls
    assert opened["args"]["customer_id"].startswith("cus_gen_")  # the pack's input generator made the input
    assert assigned["result"]["queue"] in ("billing", "support")  # desk.py, imported next to tools.py
    lost = driver.run(by_id["open_response_lost_opened_once"], tmp_path / "lost")
    assert [c["outcome"] for c in lost.calls if c["tool"] == "crm.openTicket"] == ["applied", "duplicate"]
    assert lost.calls[0]["lost"] and lost.calls[0]["idempotency_key"] == lost.calls[1]["idempotency_key"]
    refused = driver.run(by_id["assign_refused_closes_ticket"], tmp_path / "refused")
    assert refused.status == "failed"
    assert [c["tool"] for c in refused.calls if c["outcome"] == "applied"] == ["crm.openTicket", "crm.closeTicket"]


def test_an_engine_that_loses_keys_fails_on_the_pack_tools(desk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The oracles read the pack's tools in the ledger like the built-in ones: a fresh key on the retry
    after a lost answer opens a second ticket, and the sweep says so."""
    case = desk / "cases" / "open_response_lost_opened_once.yaml"
    code = main(["run", str(case), "--crash", "none", "-q", "--engine", "variants.engines:EffectBeforeCheckpointNoKey"])
    assert code == ExitCode.FAILED
    assert "open_ticket" in capsys.readouterr().out


def test_pytest_chaos_runs_a_pack_with_its_own_tools(pytester: pytest.Pytester, desk: Path) -> None:
    case = desk / "cases" / "ticket_opened_and_assigned.yaml"
    result = pytester.runpytest(str(case), "--crashpoint-chaos", "--crashpoint-schedules", "0", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) >= 9 and not outcomes.get("failed") and not outcomes.get("error"), outcomes
    result.stdout.fnmatch_lines(["*ticket_opened_and_assigned[[]kill@after_effect:crm.openTicket[]] PASSED*"])


def test_validate_refuses_a_workflow_calling_a_tool_no_world_provides(
        desk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workflow = desk / "workflows" / "ticket.yaml"
    text = workflow.read_text()
    workflow.write_text(text.replace("tool: crm.assignAgent", "tool: crm.asignAgent"))
    line = 1 + text.splitlines().index("        tool: crm.assignAgent")
    assert main(["validate", str(desk)]) == ExitCode.USAGE
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"crashpoint: error: {workflow}:{line}: field phases[1].tasks[0].tool: "
                          "unknown tool 'crm.asignAgent': no world provides it; did you mean crm.assignAgent?")
    assert str(desk / "tools.py") in err
    # without the pack's tools module, its own tools are unknown too: the first one is named
    (desk / "pack.yaml").write_text(re.sub(r"world:\n(  .*\n)+", "", (desk / "pack.yaml").read_text()))
    workflow.write_text(text)
    assert main(["validate", str(desk)]) == ExitCode.USAGE
    err = capsys.readouterr().err
    assert f"{workflow}:{1 + text.splitlines().index('        tool: crm.openTicket')}: field phases[0].tasks[0].tool: " \
           "unknown tool 'crm.openTicket'" in err and "pack.yaml world.tools" in err


@pytest.mark.parametrize("world, message", [
    ("world: {tools: nope.py}", "field world.tools: {desk}/nope.py: no such file"),
    ("world: {tools: ../outside.py}", "field world.tools: '../outside.py' points outside the pack folder"),
    ("world: {tools: desk.py}", "field world.tools: tools module {desk}/desk.py: cannot load it: TypeError: "
                                "{desk}/desk.py: defines no TOOLS dict"),
    ("world: {tools: broken.py}", "field world.tools: tools module {desk}/broken.py: cannot load it: "
                                  "ZeroDivisionError: division by zero"),
    ("world: {tools: builtin_clash.py}", "redefines built-in tool(s) refunds.issueRefund"),
    ("world: {tools: tools.py, inputs: {payroll: inputs.py:ticket_input}}",
     "field world.inputs.payroll: unknown workflow 'payroll'; workflows: ticket"),
    ("world: {tools: tools.py, inputs: {ticket: inputs.py:nothing}}",
     "field world.inputs.ticket: {desk}/inputs.py has no function 'nothing'"),
    ("world: {tools: tools.py, inputs: {ticket: inputs.py}}", "field world.inputs.ticket: "),
])
def test_a_bad_world_section_is_refused_naming_pack_yaml_line_and_field(
        world: str, message: str, desk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (desk / "broken.py").write_text("1 / 0\n")
    (desk / "builtin_clash.py").write_text("TOOLS = {'refunds.issueRefund': lambda box, args, ref: {}}\n")
    pack_yaml = desk / "pack.yaml"
    text = re.sub(r"world:\n(  .*\n)+", world + "\n", pack_yaml.read_text())
    pack_yaml.write_text(text)
    line = 1 + text.splitlines().index(world)
    assert main(["validate", str(desk)]) == ExitCode.USAGE
    (err,) = capsys.readouterr().err.strip().splitlines()
    assert err.startswith(f"crashpoint: error: {pack_yaml}:{line}"), err
    assert message.format(desk=desk.resolve()) in err


def test_tools_lists_the_builtin_and_the_pack_tools_with_their_arguments(
        desk: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["tools"]) == ExitCode.OK
    out = capsys.readouterr().out
    assert all(f"\n{name}  (built in)" in "\n" + out for name in BUILTIN_TOOLS)
    assert "crm." not in out
    assert main(["tools", str(desk)]) == ExitCode.OK
    out = capsys.readouterr().out
    assert "crm.openTicket  (pack desk, tools.py; used by ticket)  open a support ticket\n" \
           "    customer_id  str\n    subject      str\n" in out
    assert "approvals.request  (built in)" in out and "refunds.issueRefund  (built in)" in out
    assert out.rstrip().endswith("19 tool(s): 16 built in, 3 of pack desk; 3 called by its workflows")
    assert main(["tools", "refunds"]) == ExitCode.OK
    assert "refunds.issueRefund  (built in; used by refund)" in capsys.readouterr().out
    assert main(["tools", str(desk / "nope")]) == ExitCode.USAGE


def test_the_docs_document_every_builtin_tool() -> None:
    section = (ROOT / "docs" / "reference" / "tools.md").read_text()
    assert all(f"`{name}`" in section for name in BUILTIN_TOOLS)
    assert "world:" in section and "TOOLS = {" in section
