"""The built-in packs on LangGraph through the interpreter, fault-free (issue 17, item 4).

Before: ``crashpoint run refunds --adapter ...:LangGraphSync --crash none`` failed 8 of 20 golden runs and
``ads_audit`` 12 of 13, for features the interpreter lacked (revise gates, phase timeouts, agent
verdicts, ``on_error`` modes, trace events it never wrote), all blamed on the engine. Now no run fails
that the reference engine passes.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("langgraph.checkpoint.sqlite")

from crashpoint.harness.adapters.langgraph_adapter import LangGraphSync  # noqa: E402
from crashpoint.harness.adapters.reference import ReferenceAdapter  # noqa: E402
from crashpoint.harness.load.loader import load_target  # noqa: E402
from crashpoint.harness.run.sweep import sweep  # noqa: E402
from crashpoint.scenarios import builtin_pack  # noqa: E402


@pytest.mark.slow
@pytest.mark.parametrize("pack_name", ["refunds", "ads_audit"])
def test_no_golden_run_fails_on_langgraph_that_passes_on_the_reference_engine(pack_name: str, tmp_path: Path) -> None:
    pack, cases = load_target(builtin_pack(pack_name))
    reference = {r.case_id: r.verdict for r in sweep(pack, cases, ReferenceAdapter(), crash="none", jobs=2,
                                                     workdir=tmp_path / "ref").results}
    lg = sweep(pack, cases, LangGraphSync(), crash="none", jobs=2, workdir=tmp_path / "lg", worker_timeout_s=120)
    wrong = {r.case_id: (r.verdict, r.error, [f.message for f in r.failures][:3]) for r in lg.results
             if r.verdict not in ("passed", "unsupported") and reference[r.case_id] == "passed"}
    assert wrong == {}
    assert all("does not support: " in (r.error or "") for r in lg.results if r.verdict == "unsupported")
    assert set(reference.values()) == {"passed"}
