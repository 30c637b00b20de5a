"""A broken DBOS for crashpoint's own tests: a workflow started directly runs before its status row is written. The
row of a new ``PENDING`` workflow is written only when its first step's result is recorded (until then, asked for
that workflow's recorded steps, it answers "none" without reading), so that step (and the effect it makes) runs
while the system database holds no record of the workflow: a kill there loses the workflow but not the effect. ``target.durable_before_effect`` catches it. Queued workflows (``ENQUEUED`` rows, written at
enqueue) and recoveries (the row exists) are left alone. Used as a target's entry module: the patch is made when
the worker imports it, before ``DBOS.launch()``; dbos 2.2x and 3.x (their ``init_workflow`` answers differ)."""

from __future__ import annotations

import inspect
import threading
from typing import Any

from dbos._sys_db import SystemDatabase

from dbos_refund.app import refund_batch, refund_preapproved, refund_workflow  # noqa: F401 - the target's workflows

_init = SystemDatabase.init_workflow
_record = SystemDatabase.record_operation_result
_check_txn = SystemDatabase._check_operation_execution_txn
#: dbos 2.2x answers (status, deadline, should_execute); 3.x (status, should_execute).
_WITH_DEADLINE = "max_recovery_attempts" in inspect.signature(_init).parameters
_late: dict[str, tuple[Any, ...]] = {}
_lock = threading.Lock()


def _init_later(self: Any, status: Any, *args: Any, **kwargs: Any) -> Any:
    if status["status"] != "PENDING" or status.get("queue_name") or self.get_workflow_status(status["workflow_uuid"]):
        return _init(self, status, *args, **kwargs)
    with _lock:
        _late[status["workflow_uuid"]] = (status, args, kwargs)
    return ("PENDING", None, True) if _WITH_DEADLINE else ("PENDING", True)  # the broken part: nothing written yet


def _check_txn_before_the_status(self: Any, workflow_id: str, *args: Any, **kwargs: Any) -> Any:
    with _lock:
        late = workflow_id in _late
    return None if late else _check_txn(self, workflow_id, *args, **kwargs)  # None: no step recorded yet


def _record_after_writing_the_status(self: Any, result: Any, *args: Any, **kwargs: Any) -> Any:
    with _lock:
        pending = _late.pop(result["workflow_uuid"], None)
    if pending is not None:
        status, init_args, init_kwargs = pending
        _init(self, status, *init_args, **init_kwargs)
    return _record(self, result, *args, **kwargs)


SystemDatabase.init_workflow = _init_later  # type: ignore[method-assign]
SystemDatabase.record_operation_result = _record_after_writing_the_status  # type: ignore[method-assign]
# the transaction inside check_operation_execution (which crashpoint's worker wraps for its crash points)
SystemDatabase._check_operation_execution_txn = _check_txn_before_the_status  # type: ignore[method-assign]
