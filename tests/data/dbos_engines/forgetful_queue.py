"""A broken DBOS for crashpoint's own tests: recovery puts a dead executor's workflows back on DBOS's internal
queue but forgets those that came from a team's queue (they stay PENDING, owned by the dead executor, forever).
Used as a target's entry module: the patch is made when the worker imports it, before ``DBOS.launch()``."""

from __future__ import annotations

from typing import Any

from dbos._sys_db import SystemDatabase

from dbos_refund.app import refund_batch, refund_preapproved, refund_workflow  # noqa: F401 - the target's workflows

_reenqueue = SystemDatabase.reenqueue_for_recovery


def _forgetful(self: Any, workflow_id: str, executor_ids: Any, recovery_queue_name: str) -> bool:
    status = self.get_workflow_status(workflow_id)
    if status is not None and status.get("queue_name"):
        return False  # the broken part: a queued workflow is not re-enqueued
    return _reenqueue(self, workflow_id, executor_ids, recovery_queue_name)


SystemDatabase.reenqueue_for_recovery = _forgetful  # type: ignore[method-assign]
