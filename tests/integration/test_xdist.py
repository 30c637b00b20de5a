"""The pytest plugin under pytest-xdist: ``pytest -n 2 --chaos`` collects the same items on each
worker, runs every item once, stores each result once in one stored run, and the controller alone
keeps the seed and the drawn schedules."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from crashpoint.reports.results_store import ResultStore

pytest_plugins = ("pytester",)

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
CASES = ("approval_timeout_after_refund_draft.json", "cancel_while_waiting_compensates_draft.yaml")


@pytest.fixture(autouse=True)
def _no_other_chaos_plugin(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests exercise crashpoint's own ``--chaos`` alias: keep another installed owner of ``--chaos``
    (ordeal, in a venv made before the test extra dropped it) out of the sessions they start."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p no:ordeal")


def test_chaos_under_xdist_records_every_result_once(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytest.importorskip("xdist")
    dst = pytester.path / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    for name in CASES:
        shutil.copy(PACK / "cases" / name, dst / "cases")
    url = f"sqlite:///{tmp_path / 'results.db'}"
    result = pytester.runpytest_subprocess(str(dst), "-p", "xdist", "-n", "2", "--chaos", "--chaos-seed", "7",
                                           "--crashpoint-schedules", "1", f"--crashpoint-results-db={url}", "-v")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 0 and outcomes.get("error", 0) == 0, result.stdout.str()[-3000:]
    result.stdout.fnmatch_lines(["*crashpoint: chaos seed 7*", "*2 workers*"])
    ran = [line for line in result.stdout.lines if " PASSED " in line and "::" in line]
    items = {line.split("::", 1)[1].split(" ")[0] for line in ran}
    assert len(ran) == len(items) == outcomes["passed"]  # every item ran once
    case_items = {i for i in items if not i.endswith("[schedules]")}
    assert {i for i in items if i.endswith("[schedules]")} == \
        {"approval_timeout_after_refund_draft[schedules]", "cancel_while_waiting_compensates_draft[schedules]"}
    assert {"approval_timeout_after_refund_draft[golden]",
            "approval_timeout_after_refund_draft[kill@after_checkpoint:refund_draft]"} <= case_items
    workers = {line.split("]", 1)[0] for line in ran if line.startswith("[gw")}
    assert workers == {"[gw0", "[gw1"}, ran[:4]  # both workers ran items

    store = ResultStore(url, create=False)
    runs = store.runs()
    assert len(runs) == 1, runs  # one stored run for the session, not one per worker
    stored = store.load_run("latest")
    assert stored["run"]["complete"] is True and stored["run"]["crash"] == "every"
    rows = [(r["case_id"], r["crash_point"]) for r in stored["results"]]
    assert len(rows) == len(set(rows)) == len(case_items)  # none lost, none twice
    assert {r["verdict"] for r in stored["results"]} == {"passed"}

    cache = pytester.path / ".pytest_cache" / "v" / "crashpoint"
    assert json.loads((cache / "seed").read_text()) == 7
    drawn = json.loads((cache / "schedules").read_text())
    assert set(drawn) == {"approval_timeout_after_refund_draft", "cancel_while_waiting_compensates_draft"}
