"""``crashpoint run``'s terminal tables fit a 120-column terminal (issue 24 item 5).

Before, the durability-coverage matrix printed every fault kind as one column of one table: 260 characters wide
with the 15 registered kinds, so a terminal wrapped every row.
"""

from __future__ import annotations

from crashpoint.harness.faults import kinds
from crashpoint.reports import terminal as text

COLUMNS = 120  #: a terminal of 120 columns
STEPS = ["draft_refund", "request_approval.human_gate", "issue_refund", "notify_customer", "workflow",
         "collect_the_evidence_of_every_campaign_before_the_audit"]


def _data(runs: int) -> dict:
    cells = {k: {"runs": runs, "passed": runs - 1, "failed": 1} for k in kinds.columns()}
    return {"coverage": {step: dict(cells) for step in STEPS},
            "vacuity": {"runs_with_findings": 0, "findings": []}}


def test_the_coverage_matrix_of_every_fault_kind_fits_120_columns_and_keeps_every_cell() -> None:
    out = text.coverage(_data(12345))
    wide = [line for line in out.splitlines() if len(line) > COLUMNS]
    assert wide == [], f"{len(wide)} line(s) wider than {COLUMNS}: {max(map(len, wide))} columns"
    assert out.count("12344/12345") == len(STEPS) * len(kinds.columns())  # every cell is still there
    headers = " ".join(line for line in out.splitlines() if not line.startswith(tuple(STEPS)))
    for kind in kinds.columns():  # each kind's words head a column
        words = kind.replace("kill@", "kill ").replace("_", " ").split()
        assert all(w in headers for w in words), kind


def test_a_narrow_matrix_stays_one_table() -> None:
    data = {"coverage": {"issue_refund": {"kill@after_effect": {"runs": 3, "passed": 3, "failed": 0}}}}
    out = text.coverage(data)
    assert out.count("step") == 1 and "3/3" in out


def test_a_sweep_with_no_fault_says_so_instead_of_an_empty_matrix() -> None:
    """``--crash none``: before, a title over an empty 'step' table."""
    got = text.coverage({"coverage": {}})
    assert got == "durability coverage: no fault ran (golden runs only)", got



def test_the_summarys_engine_row_names_the_engine_once() -> None:
    """A target's engine version names its packages: 'temporalio 1.35.0' under engine temporal read 'temporal
    temporalio 1.35.0' (the docs trial); a pack's engine and version stay both."""
    assert text.engine_label("temporal", "temporalio 1.35.0") == "temporalio 1.35.0"
    assert text.engine_label("langgraph", "langgraph 1.2.24, langgraph-checkpoint 4.3.2") == \
        "langgraph 1.2.24, langgraph-checkpoint 4.3.2"
    assert text.engine_label("reference", "0.1.0") == "reference 0.1.0"
