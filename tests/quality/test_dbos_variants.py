"""Broken variants of examples/dbos_refund, each caught by its named rule in 3 of 3 runs."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("dbos")

from crashpoint.harness.targets.sweep import run_one  # noqa: E402
from crashpoint.harness.targets.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/dbos_refund/target.yaml"


@pytest.mark.slow
def test_an_issue_step_without_idempotency_key_is_caught_3_of_3(tmp_path: Path) -> None:
    """A kill after the payment and before DBOS records the step's result: DBOS runs the step again."""
    data = Target.from_file(TARGET).to_data() | {"entry": "dbos_refund.variants:refund_without_key"}
    data["inputs"] = data["inputs"][:1]
    target = Target.from_data(data)
    for n in range(1, 4):
        r = run_one(target, target.case("approved"), "sync", tmp_path / str(n), "after_effect:issue_refund", None, n)
        assert r.verdict == "failed", r.error
        rules = {f.rule for f in r.failures}
        assert "target.at_most_once_per_key" in rules, rules
