"""A broken DBOS for crashpoint's own tests: recovery runs a pending workflow at once in the recovering process
instead of putting it back on DBOS's internal queue, whose atomic dequeue admits one runner (dbos 2.2x ran
workflows started directly this way). Two executors with one executor id (``dbos.executor_id``) then both run
the dead one's workflows. Used as a target's entry module: the patch is made on import, before ``DBOS.launch()``."""

from __future__ import annotations

from typing import Any

from dbos import _recovery
from dbos._core import execute_dequeued_workflow

from dbos_refund.app import refund_workflow  # noqa: F401 - the target's workflow


def _recover_directly(dbos: Any, workflow: Any, executor_ids: Any) -> Any:
    status = dbos._sys_db.get_workflow_status(workflow.workflow_id)
    return execute_dequeued_workflow(dbos, status, status.get("owner_xid") or "")


_recovery._recover_workflow = _recover_directly
