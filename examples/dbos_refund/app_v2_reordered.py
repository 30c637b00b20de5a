"""The refund flow, v2 deployed the wrong way: the fraud check added **before** the approval wait. A refund that
was waiting for its approval when a v2 worker recovers it replays a history whose second step is ``DBOS.recv``
while the code's second step is now ``check_fraud``: DBOS refuses the replay (the changed step order). """

from __future__ import annotations

from typing import Any

from dbos import DBOS

from dbos_refund.v2_steps import APPROVAL_TIMEOUT_S, check_fraud, decided, draft


@DBOS.workflow()
def refund_workflow(order: dict[str, Any]) -> dict[str, Any]:
    """``check_fraud`` moved before the approval: running refunds no longer replay."""
    drafted = draft(order)
    check_fraud(order)
    decision = DBOS.recv("approval", timeout_seconds=APPROVAL_TIMEOUT_S)
    return decided(order, drafted, decision)
