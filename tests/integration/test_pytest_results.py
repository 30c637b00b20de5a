"""The pytest plugin's reports: failures in pytest's own ``--junitxml`` carry the oracle and the
reproduce command, and ``--crashpoint-results-db`` records the session in the results store."""

from __future__ import annotations

import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from crashpoint.reports.results_store import ResultStore

pytest_plugins = ("pytester",)

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
SEED = "approval_timeout_after_refund_draft.json"
CANCEL = "cancel_while_waiting_compensates_draft.yaml"


def test_junitxml_and_the_results_store(pytester: pytest.Pytester, tmp_path: Path) -> None:
    dst = pytester.path / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    shutil.copy(PACK / "cases" / SEED, dst / "cases")
    shutil.copy(PACK / "cases" / CANCEL, dst / "cases")
    xml, url = tmp_path / "junit.xml", f"sqlite:///{tmp_path / 'results.db'}"
    result = pytester.runpytest(str(dst), "-p", "no:cacheprovider",
                                "--crashpoint-engine", "variants.engines:NoCompensationOnCancel",
                                f"--junitxml={xml}", f"--crashpoint-results-db={url}")
    result.assert_outcomes(passed=1, failed=1)

    cases = ET.parse(xml).getroot().findall(".//testcase")
    assert len(cases) == 2
    failed = [c for c in cases if c.find("failure") is not None]
    assert [c.get("name") for c in failed] == ["cancel_while_waiting_compensates_draft"]
    text = failed[0].find("failure").get("message") + (failed[0].find("failure").text or "")
    assert "[side_effects.compensated_on_failure]" in text and "compensat" in text
    assert "reproduce: crashpoint run " in text and "--engine variants.engines:NoCompensationOnCancel" in text
    props = {p.get("name"): p.get("value") for p in failed[0].findall("./properties/property")}
    assert props["crashpoint_verdict"] == "failed" and props["crashpoint_crash_point"] == "none"
    assert "side_effects" in props["crashpoint_oracle"].split(",")
    assert props["crashpoint_reproduce"].startswith("crashpoint run ") and "--crash none" in props["crashpoint_reproduce"]

    store = ResultStore(url, create=False)
    stored = store.load_run("latest")
    assert stored["run"]["source"] == "pytest" and stored["run"]["complete"] is True
    assert stored["run"]["engine"] == "variants.engines:NoCompensationOnCancel"
    assert stored["run"]["pack"] == "refunds" and stored["run"]["crash"] == "none"
    assert sorted((r["case_id"], r["verdict"]) for r in stored["results"]) == [
        ("approval_timeout_after_refund_draft", "passed"), ("cancel_while_waiting_compensates_draft", "failed")]
    bad = next(r for r in stored["results"] if r["verdict"] == "failed")
    assert bad["reproduce"] == props["crashpoint_reproduce"] and bad["timeline"]["events"]
    assert bad["measures"]["cancel"] is True and bad["measures"]["cancel_ok"] is False
    assert "cancellation" in bad["tags"]


def test_a_foreign_results_db_stops_the_session_with_a_message(pytester: pytest.Pytester, tmp_path: Path) -> None:
    (tmp_path / "notes.db").write_text("not a database")
    result = pytester.runpytest(f"--crashpoint-results-db={tmp_path / 'notes.db'}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*--crashpoint-results-db: results database {tmp_path / 'notes.db'}: not a SQLite*"])
    assert (tmp_path / "notes.db").read_text() == "not a database"
