"""``crashpoint validate`` refuses what ``crashpoint run`` cannot do (issue 17, "Tracebacks or hangs on
valid-looking input"): counts, versions, durations and string sizes have bounds in the schemas, a lone
surrogate is refused with file, line and field, and a ``--worker-timeout`` that overflows time_t is a
usage error. Each hazard passed ``validate`` before (and hung, ran out of memory or raised at run time)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import main
from crashpoint.scenarios import builtin_pack

REFUNDS = builtin_pack("refunds")
CASE = """case_id: h
description: {description}
events:
  - {event}
expected: {{final_status: succeeded}}
"""
HAPPY = "{type: approval_granted, approval_id: ap_1}"

#: hazard -> (description, event, the message's field, its words)
HAZARDS = {
    "deliveries 1e9 (hung, the store grew)": ("x", "{type: approval_granted, approval_id: ap_1, deliveries: 1000000000}",
                                             "events[0].deliveries", "1000000000 is greater than the maximum of 100"),
    "times 1e8 (MemoryError)": ("x", "{type: tool_failure, tool: refunds.draftRefundRequest, times: 100000000}",
                                "events[0].times", "100000000 is greater than the maximum of 1000"),
    "deploy version 10**30": ("x", "{type: deploy, version: " + str(10 ** 30) + "}", "events[0].version",
                              "is greater than the maximum of 2147483647"),
    "clock jump 1e300 s": ("x", "{type: advance_clock, seconds: 1.0e+300}", "events[0].seconds",
                           "is greater than the maximum of 1000000000"),
    "a 20 kB description": ("x" * 20_000, HAPPY, "description", "is too long"),
    "a 2 kB cancel reason": ("x", "{type: cancel, reason: " + "r" * 2000 + "}", "events[0].reason", "is too long"),
    "a lone surrogate in the description": ('"lone \\ud800 surrogate"', HAPPY, "description",
                                            "a lone surrogate \\ud800 at character 6 is not text"),
    "a lone surrogate in a key": ("x", '{type: approval_granted, approval_id: ap_1, "\\udc00": 1}', "events[0]",
                                  "a lone surrogate \\udc00"),
}


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    root = tmp_path / "pack"
    shutil.copytree(REFUNDS, root, ignore=shutil.ignore_patterns("cases"))
    (root / "cases").mkdir()
    return root


@pytest.mark.parametrize("hazard", list(HAZARDS))
def test_validate_refuses_what_run_cannot_do(hazard: str, pack: Path, capsys) -> None:
    description, event, field, words = HAZARDS[hazard]
    case = pack / "cases" / "h.yaml"
    case.write_text(CASE.format(description=description, event=event))
    assert main(["validate", str(case)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"h.yaml:" in err and f"field {field}" in err and words in err, err


def test_workflow_bounds(pack: Path, capsys) -> None:
    wf = pack / "workflows" / "refund.yaml"
    wf.write_text(wf.read_text().replace("retries: 3", "retries: 100000000", 1))
    assert "retries: 100000000" in wf.read_text()
    assert main(["validate", str(pack)]) == 2
    err = capsys.readouterr().err
    assert "retries" in err and "greater than the maximum of 100" in err


def test_builtin_packs_stay_within_the_bounds(capsys) -> None:
    for name in ("refunds", "conformance", "ads_audit"):
        assert main(["validate", name]) == 0


@pytest.mark.parametrize("command", [["run", "refunds"], ["certify", "--adapter", "x:Y"], ["search", "refunds"],
                                     ["replay", "t.trace.json"]])
def test_worker_timeout_that_overflows_time_t_is_a_usage_error(command: list[str], tmp_path: Path, capsys,
                                                              monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    if command[0] == "replay":
        shutil.copy(Path(__file__).resolve().parents[1] / "data" / "refund_happy.trace.json"
                    if (Path(__file__).parents[1] / "data").is_dir()
                    else Path(__file__).resolve().parent / "data" / "refund_happy.trace.json", "t.trace.json")
    assert main([*command, "--worker-timeout", "1e10"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err] and "--worker-timeout" in err and "at most 604800" in err, err


def test_pytest_worker_timeout_that_overflows_time_t_is_a_usage_error(tmp_path: Path) -> None:
    import subprocess
    import sys

    case = REFUNDS / "cases" / "draft_fatal_failure.yaml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--crashpoint-worker-timeout", "1e10", str(case)], cwd=tmp_path, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 4, done.stdout + done.stderr  # pytest's usage error: nothing ran
    assert "--crashpoint-worker-timeout must be a finite number of seconds > 0 and at most 604800" in done.stderr
