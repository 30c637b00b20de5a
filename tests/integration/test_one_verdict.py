"""One run, one verdict: the same case with faults judged through every front end.

A refund case with a kill of its own (``faults``) and a lost tool response (``events``), which a
correct engine masks (``like_fault_free``), runs through ``crashpoint run``, a ``crashpoint search``
trial of the same schedule, ``crashpoint certify``, ``pytest --crashpoint-chaos`` (pytester) and
``crashpoint run --resume``; each front end must give the golden run and one crash run the same
verdict and the same rule ids. On the reference engine that is ``passed`` everywhere; on
:class:`variants.engines.NewKeyOnRetry` (a retry under a new idempotency key: the lost response
gets a second refund request, which the refund service refuses, and the run compensates after its
pivot) it is ``failed`` everywhere, by the same rules.
"""

from __future__ import annotations

import concurrent.futures.process  # noqa: F401  (imported before pytester's snapshot of sys.modules, which
import dataclasses                  # drops what a test imported: the next test's pool and store would break)
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.run.schedule_search import trial
from crashpoint.harness.run.certification import certify
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.pack_driver import Driver
from crashpoint.reports.results_store import ResultStore

pytest_plugins = ("pytester",)

ROOT = Path(__file__).resolve().parents[2]
CASE_ID = "refund_kill_and_lost_response"
OWN_KILL = "after_checkpoint:refund_draft"
POINT = "after_effect:refunds.issueRefund"
CASE = f"""case_id: {CASE_ID}
description: A kill after the draft's checkpoint, and the refund's answer lost; the engine must mask both.
tags: [tool_fault, lost_response, kill]
events:
  - {{type: tool_lost_response, tool: refunds.issueRefund}}
  - {{type: approval_granted, approval_id: ap_1, by: alice}}
faults:
  - {{kill: "{OWN_KILL}"}}
expected:
  final_status: succeeded
  effects: {{draft_refund: 1, issue_refund: 1, notify_customer: 1}}
  like_fault_free: true
"""
ENGINES = {  # engine spec for --engine / pytest, adapter spec for certify, expected verdict
    "reference": (None, "crashpoint.harness.adapters.reference:ReferenceAdapter", "passed"),
    "broken": ("variants.engines:NewKeyOnRetry", "variants.adapters:new_key_on_retry", "failed"),
}

Verdicts = dict[str, tuple[str, tuple[str, ...]]]


@pytest.fixture()
def pack_dir(tmp_path: Path) -> Path:
    """The refunds pack with the one case."""
    dst = Path(shutil.copytree(ROOT / "scenarios" / "refunds", tmp_path / "refunds"))
    for case in (dst / "cases").iterdir():
        case.unlink()
    (dst / "cases" / f"{CASE_ID}.yaml").write_text(CASE)
    return dst


def _of(results) -> Verdicts:
    """``{crash point: (verdict, sorted rule ids)}`` of result dicts (``rule`` or the stored ``oracle``)."""
    return {r["crash_point"]: (r["verdict"], tuple(sorted({f.get("rule") or f["oracle"] for f in r["failures"]})))
            for r in results if r["crash_point"] in ("none", POINT)}


METRICS: dict[str, dict] = {}  #: front end -> the summary metrics of its result document


def via_run(pack_dir: Path, engine: str | None, tmp_path: Path) -> Verdicts:
    from crashpoint.harness.cli.main import main

    out = tmp_path / "run.json"
    main(["run", str(pack_dir), "--crash-point", POINT, "-q", "--jobs", "2", "--json", str(out)]
         + (["--engine", engine] if engine else []))
    data = json.loads(out.read_text())
    METRICS["run"] = data["summary"]["metrics"]
    return _of(data["results"])


def via_resume(pack_dir: Path, engine: str | None, tmp_path: Path) -> Verdicts:
    """A recorded run cut after its golden result (what a kill of crashpoint leaves), then resumed."""
    from crashpoint.harness.cli.main import main

    db, out = tmp_path / "r.db", tmp_path / "resumed.json"
    args = ["run", str(pack_dir), "--crash-point", POINT, "-q", "--jobs", "2", "--results-db", str(db)] + \
        (["--engine", engine] if engine else [])
    main(args)
    con = sqlite3.connect(db)
    with con:
        con.execute("delete from crashpoint_results where crash_point != 'none'")
        con.execute("update crashpoint_runs set complete = 0, ended_at = null")
    con.close()
    code = main(args + ["--resume", "--json", str(out)])
    assert out.exists(), f"crashpoint run --resume exited {code} without results"
    data = json.loads(out.read_text())
    assert data["summary"]["runs"] == 2, "the resumed run holds the restored golden result and the new crash run"
    METRICS["resume"] = data["summary"]["metrics"]
    return _of(data["results"])


def via_trial(pack_dir: Path, engine: str | None, tmp_path: Path) -> Verdicts:
    """``crashpoint search``'s judging: the case without its faults, with the kill as a schedule."""
    pack, (case,) = load_target(pack_dir)
    base = dataclasses.replace(case, faults=[])
    driver = Driver(ReferenceAdapter(engine=engine) if engine else ReferenceAdapter(), pack)
    golden = driver.run(base, tmp_path / "golden")
    got = trial(driver, base, pack, [{"kind": "kill", "at": OWN_KILL}], tmp_path / "trial", golden)
    assert got.case.faults == case.faults, "the schedule makes the very case of the file"
    return {"none": (got.verdict, tuple(sorted({f.rule for f in got.failures})))}


def via_certify(pack_dir: Path, adapter: str, tmp_path: Path) -> Verdicts:
    seen = []
    certify(adapter, pack_dir, jobs=2, only=[POINT], progress=seen.append)
    return _of([r.to_dict() for r in seen])


def via_pytest(pytester: pytest.Pytester, pack_dir: Path, engine: str | None, tmp_path: Path) -> Verdicts:
    url = f"sqlite:///{tmp_path / 'pytest.db'}"
    pytester.runpytest_subprocess(str(pack_dir), "-p", "no:cacheprovider", "--crashpoint-chaos", "--crashpoint-schedules", "0",
                       "-k", "golden or issueRefund", f"--crashpoint-results-db={url}",
                       *(["--crashpoint-engine", engine] if engine else []))
    return _of(ResultStore(url, create=False).load_run("latest")["results"])


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(ENGINES))
def test_every_front_end_gives_one_case_with_faults_the_same_verdict(name: str, pack_dir: Path, tmp_path: Path,
                                                                     pytester: pytest.Pytester) -> None:
    engine, adapter, expected = ENGINES[name]
    reference = via_run(pack_dir, engine, tmp_path)
    assert set(reference) == {"none", POINT}
    assert {v for v, _ in reference.values()} == {expected}, reference
    if expected == "failed":
        assert {"final_status.expected", "side_effects.expected_count"} <= set(reference["none"][1]), reference
        assert "differential.same_end" in reference[POINT][1], reference  # the kill masked the bug: not like golden
    for sub in ("resume", "certify", "pytest", "trial"):
        (tmp_path / sub).mkdir()
    others = {"resume": via_resume(pack_dir, engine, tmp_path / "resume"),
              "certify": via_certify(pack_dir, adapter, tmp_path / "certify"),
              "pytest": via_pytest(pytester, pack_dir, engine, tmp_path / "pytest")}
    for front, got in others.items():
        assert got == reference, f"{front} judged {got}, crashpoint run judged {reference}"
    # the restored golden result counts in the metrics as it did when it ran (its stored measures)
    assert METRICS["resume"] == METRICS["run"], METRICS
    golden_only = via_trial(pack_dir, engine, tmp_path / "trial")
    assert golden_only["none"] == reference["none"], f"search judged {golden_only}, crashpoint run {reference}"


def test_pytest_applies_the_vacuity_check_the_cli_applies(pack_dir: Path, pytester: pytest.Pytester) -> None:
    """A case whose kill never fires tested nothing: ``crashpoint run`` calls it an ``error``, and a
    plain ``pytest`` item of it fails with the same words (it used to pass: the pytest path judged
    the run without the vacuity check)."""
    from crashpoint.harness.cli.main import main

    case = pack_dir / "cases" / f"{CASE_ID}.yaml"
    case.write_text(CASE.replace(OWN_KILL, "after_checkpoint:no_such_checkpoint"))
    assert main(["run", str(case), "--crash", "none", "-q"]) == 1
    result = pytester.runpytest_subprocess(str(case), "-p", "no:cacheprovider")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*error: the case's faults never fired, so nothing was tested*"])
