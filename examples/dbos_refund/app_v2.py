"""The refund flow, v2 (deployed while refunds wait for their approval): a fraud check added **after** the
approval wait. Compatible: a refund a v2 worker recovers replays its recorded steps (``draft``, ``DBOS.recv``) in
the same order, then runs the new one."""

from __future__ import annotations

from typing import Any

from dbos import DBOS

from dbos_refund.v2_steps import APPROVAL_TIMEOUT_S, check_fraud, decided, draft


@DBOS.workflow()
def refund_workflow(order: dict[str, Any]) -> dict[str, Any]:
    """v1 with ``check_fraud`` between the approval and the issue."""
    drafted = draft(order)
    decision = DBOS.recv("approval", timeout_seconds=APPROVAL_TIMEOUT_S)
    check_fraud(order)
    return decided(order, drafted, decision)
