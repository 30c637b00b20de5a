"""DBOS under crashpoint: the conformance workflow resumes after kills at a bounded subset of crash
points (``crashpoint certify`` runs them all; a DBOS worker takes about 2.5 s to start and settle)."""

from __future__ import annotations

import pytest
from installed import needs

pytestmark = needs("dbos")

from crashpoint.harness.adapters.dbos_adapter import DBOSAdapter  # noqa: E402
from crashpoint.harness.load.loader import load_target  # noqa: E402
from crashpoint.harness.run.sweep import sweep  # noqa: E402
from crashpoint.scenarios import builtin_pack  # noqa: E402
from verdicts import unverified_kills  # noqa: E402

CASES = builtin_pack("conformance") / "cases"


@pytest.mark.parametrize("case, points", [
    ("resume_every_checkpoint.yaml", ["after_effect:refunds.draftRefundRequest", "after_checkpoint:approval_request",
                                      "step_started:issue_refund#1"]),
    ("cancel_while_waiting.yaml", ["before_checkpoint:compensate:draft_refund"]),
])
@pytest.mark.slow
def test_dbos_resumes_after_kills(case, points, tmp_path):
    pack, cases = load_target(CASES / case)
    result = sweep(pack, cases, DBOSAdapter(), only=points, jobs=2, workdir=tmp_path, keep=True,
                   worker_timeout_s=60)
    bad = [(r.crash_point, r.error, [f.message for f in r.failures]) for r in result.results if r.verdict != "passed"]
    assert bad == []
    assert result.engine_version.startswith("dbos ")
    assert unverified_kills(result.results) == []  # each kill landed on the worker; a new pid resumed
