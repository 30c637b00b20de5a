"""Stored runs shared by the report tests (made once per test session, in a temporary folder).

* :func:`broken_engine_run`: a real sweep of the seed case on a deliberately broken engine
  (``variants.engines:EffectBeforeCheckpointNoKey``: 1 golden run passes, 13 killed runs fail),
  recorded through ``crashpoint run --results-db``.
* :func:`hostile_run`: a stored run whose case names, messages, stop reasons and trace text carry
  HTML, Markdown and XML syntax, as a foreign adapter could write them.
"""

from __future__ import annotations

import contextlib
import functools
import io
import tempfile
from pathlib import Path

from crashpoint.harness.cli.main import main
from crashpoint.reports.results_store import ResultStore

SEED = Path(__file__).resolve().parent.parent / "scenarios" / "refunds" / "cases" / "approval_timeout_after_refund_draft.json"
BROKEN = "variants.engines:EffectBeforeCheckpointNoKey"

#: A case name that would run a script if it reached the page unescaped.
SCRIPT_NAME = "<script>document.title='pwned'</script>"
HOSTILE_TEXT = "a | b `tick` <img src=x onerror=\"document.title='img'\"> & ]]> \x07 *bold* [link](http://x)"


@functools.cache
def broken_engine_run() -> str:
    """URL of a store holding one real, complete run with failures (about 6 s to make)."""
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='crashpoint-reports-')) / 'results.db'}"
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        code = main(["run", str(SEED), "--crash", "every", "--engine", BROKEN, "-q", "--results-db", url])
    assert code == 1, "the broken engine should fail some runs"
    return url


@functools.cache
def hostile_run() -> str:
    """URL of a store holding one complete run with hostile strings everywhere a string goes."""
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='crashpoint-hostile-')) / 'results.db'}"
    store = ResultStore(url)
    run_id = store.begin_run({"engine": f"evil{HOSTILE_TEXT}", "engine_version": "1<2", "pack": "p&q",
                              "pack_version": "1", "crash": "every"})
    store.add_result(run_id, {"case_id": "fine_case", "crash_point": "none", "verdict": "passed", "failures": [],
                              "wall_s": 0.1, "measures": {}})
    timeline = {"events": [{"seq": 1, "at": 100.0, "kind": "workflow_accepted", "text": SCRIPT_NAME},
                           {"seq": 2, "at": 160.0, "kind": f"tool_call{HOSTILE_TEXT}", "text": HOSTILE_TEXT}],
                "deliveries": [{"step": 0, "kind": "kill", "crash_point": SCRIPT_NAME}], "truncated": 0}
    store.add_result(run_id, {
        "case_id": SCRIPT_NAME, "crash_point": f"after_effect:{HOSTILE_TEXT}", "verdict": "failed",
        "failures": [{"oracle": "side_effects", "message": f"applied 2 times {HOSTILE_TEXT}",
                      "evidence": [SCRIPT_NAME, HOSTILE_TEXT]}],
        "error": None, "final_status": "succeeded", "stop_reason": SCRIPT_NAME, "wall_s": 0.2,
        "measures": {"crashed": True}, "timeline": timeline,
        "reproduce": f"crashpoint run '{SCRIPT_NAME}' --crash-point 'x`y|z'"})
    store.add_result(run_id, {"case_id": "erroring_case", "crash_point": "none", "verdict": "error", "failures": [],
                              "error": f"RuntimeError: {HOSTILE_TEXT}", "wall_s": 0.1, "measures": {}})
    store.finish_run(run_id, {"coverage": {SCRIPT_NAME: {"tool_failure": {"runs": 1, "passed": 0, "failed": 1}}},
                              "vacuity": {"runs_with_findings": 1, "findings": [SCRIPT_NAME]}})
    store.close()
    return url


def load(url: str) -> dict:
    """The latest stored run of ``url``."""
    store = ResultStore(url, create=False)
    try:
        return store.load_run("latest")
    finally:
        store.close()
