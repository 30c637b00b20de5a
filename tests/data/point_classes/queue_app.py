"""Refunds of a batch, each its own DBOS workflow on one queue (tests/integration/test_sweep_scale_dbos.py): the
interchangeable workflows of a team's queue, whose crash points form classes.

``refund`` pays with an idempotency key derived from its workflow id, so a kill after the payment and before DBOS
records the step's output does not pay twice; ``refund_unkeyed`` passes none (the bug: the recovered workflow runs
the step again and pays again, rule side_effects.at_most_once)."""

from __future__ import annotations

import inspect
from typing import Any

import crashpoint
from dbos import DBOS

QUEUE = "batch"


def setup() -> None:
    """Register the queue (2 workflows at once; ``global_concurrency`` since dbos 3.0, ``concurrency`` before)."""
    limit = "global_concurrency" if "global_concurrency" in inspect.signature(DBOS.register_queue).parameters \
        else "concurrency"
    DBOS.register_queue(QUEUE, polling_interval_sec=0.05, **{limit: 2})


@crashpoint.effect("pay", key="key")
def pay(order: str, cents: int, key: str | None = None) -> dict[str, Any]:
    """The payment provider (a fake): pays ``cents`` for ``order``."""
    return {"paid": order, "cents": cents}


@DBOS.step()
def pay_step(order: dict[str, Any]) -> dict[str, Any]:
    return pay(order["order"], order["cents"], key=f"pay-{DBOS.workflow_id}")


@DBOS.step()
def pay_step_unkeyed(order: dict[str, Any]) -> dict[str, Any]:
    return pay(order["order"], order["cents"])


@DBOS.workflow()
def refund(order: dict[str, Any]) -> dict[str, Any]:
    """Pay the refund of ``order`` (``{"order", "cents"}``) once; returns ``{"order", "status"}``."""
    pay_step(order)
    return {"order": order["order"], "status": "paid"}


@DBOS.workflow()
def refund_unkeyed(order: dict[str, Any]) -> dict[str, Any]:
    """:func:`refund` without the idempotency key."""
    pay_step_unkeyed(order)
    return {"order": order["order"], "status": "paid"}
