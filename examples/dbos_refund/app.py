"""The refund flow: one DBOS workflow per refund request, started directly or through the ``refunds`` queue.

``draft`` -> wait for a human's approval (``DBOS.recv("approval")``, with a timeout) -> ``issue`` and tell
the customer, or, when denied or unanswered in time, ``void`` the draft (the compensation) and tell the
customer. Every effect's idempotency key is derived from the workflow id, so a step DBOS runs again after a
crash repeats the same request and the payments API recognises it.

A team's ``main`` would configure DBOS and call :func:`setup` after ``DBOS.launch()``; crashpoint does the
same in its workers (target.yaml names ``setup``).
"""

from __future__ import annotations

import inspect
from typing import Any

from dbos import DBOS

from dbos_refund import services

QUEUE = "refunds"
#: Refund workflows of the queue running at once, across all workers.
CONCURRENCY = 2
#: Seconds a refund waits for its approval before it is voided.
APPROVAL_TIMEOUT_S = 3600


def setup() -> None:
    """Register the refund queue (DBOS queues are database-backed: registered after launch). The global limit is
    ``global_concurrency`` since dbos 3.0, ``concurrency`` before (2.2x): the app runs on both."""
    limit = "global_concurrency" if "global_concurrency" in inspect.signature(DBOS.register_queue).parameters else "concurrency"
    DBOS.register_queue(QUEUE, polling_interval_sec=0.05, **{limit: CONCURRENCY})


@DBOS.step()
def draft(order: dict[str, Any]) -> dict[str, Any]:
    """Draft the refund of ``order`` (``{"order_id", "amount_cents"}``)."""
    return services.draft_refund(order["order_id"], order["amount_cents"],
                                 idempotency_key=f"draft-{DBOS.workflow_id}")


@DBOS.step()
def issue(draft_: dict[str, Any]) -> dict[str, Any]:
    """Issue the drafted refund."""
    return services.issue_refund(draft_["draft_id"], draft_["amount_cents"], idempotency_key=f"issue-{DBOS.workflow_id}")


@DBOS.step()
def void(draft_: dict[str, Any]) -> dict[str, Any]:
    """Void the draft (compensation)."""
    return services.void_draft(draft_["draft_id"], idempotency_key=f"void-{DBOS.workflow_id}")


@DBOS.step()
def notify(order_id: str, template: str) -> dict[str, Any]:
    """Tell the customer."""
    return services.notify_customer(order_id, template, idempotency_key=f"notify-{DBOS.workflow_id}-{template}")


@DBOS.workflow()
def refund_workflow(order: dict[str, Any]) -> dict[str, Any]:
    """One refund request, from draft to issued or voided. Returns ``{"order_id", "status", ...}``."""
    drafted = draft(order)
    decision = DBOS.recv("approval", timeout_seconds=APPROVAL_TIMEOUT_S)
    if decision and decision.get("approved"):
        refund = issue(drafted)
        notify(order["order_id"], "refunded")
        return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"]}
    void(drafted)
    notify(order["order_id"], "denied")
    return {"order_id": order["order_id"], "status": "denied", "draft_id": drafted["draft_id"]}


@DBOS.workflow()
def refund_preapproved(order: dict[str, Any]) -> dict[str, Any]:
    """A refund small enough to need no approval: draft, issue, tell the customer."""
    refund = issue(draft(order))
    notify(order["order_id"], "refunded")
    return {"order_id": order["order_id"], "status": "issued", "refund_id": refund["refund_id"]}


@DBOS.workflow()
def refund_batch(orders: list[dict[str, Any]]) -> list[str]:
    """Enqueue one :func:`refund_preapproved` per order on the ``refunds`` queue; returns their workflow ids."""
    queue = DBOS.retrieve_queue(QUEUE)
    return [queue.enqueue(refund_preapproved, order).get_workflow_id() for order in orders]
