"""DBOS targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.targets.dbos_worker` (it imports dbos; this module does not).
It wraps methods of ``dbos._sys_db.SystemDatabase`` (``init_workflow``, ``check_operation_execution``,
``record_operation_result``, ``update_workflow_outcome``, ``recv``, ``send_bulk``,
``start_queued_workflows``) and lowers the internal queue's poll interval; these are internals, so the
releases supported are those whose ``SystemDatabase`` has every one of them (checked by the worker, which
says ``unsupported`` naming the missing ones; ``send`` stands in for ``send_bulk`` before 2.2x). Swept:
dbos 3.4.0, 3.2.0, 3.0.0, 2.31.1 and 2.20.0 (README, "Test your own DBOS app"; before 3.0 the internal queue
keeps its 1 s poll).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from crashpoint.harness.adapters.langgraph_adapter import _versions

WORKER_MODULE = "crashpoint.harness.targets.dbos_worker"
PACKAGES = ("dbos",)


def engine_version() -> str:
    """``dbos X`` (``not installed`` when missing)."""
    return _versions(*PACKAGES)


def identity_args(label: str, executor: str, seen: list[str]) -> list[str]:
    """A DBOS worker's arguments: ``label``, its own name among the run's processes (``pids.log``); ``executor``, the
    DBOS executor id it launches with (``--as-executor`` when not ``label``: a dead worker's id, whose pending
    workflows its ``DBOS.launch()`` recovers); ``--recover-executor`` for every other executor id of the run so far
    (they have all exited: what an operator or a control plane recovers)."""
    return ["--executor-id", label, *(["--as-executor", executor] if executor != label else []),
            *[a for other in seen if other != executor for a in ("--recover-executor", other)]]


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def facts(run_dir: Path) -> dict[str, Any]:
    """What the run's DBOS workers recorded beyond effects (the files of
    :mod:`~crashpoint.harness.targets.dbos_worker`): ``dequeues`` (``[{"pid", "wf", "queue"}]``, each claim from
    a queue), ``outcomes`` (``[{"pid", "wf", "status"}]``, each final status written), ``overlaps``
    (``[{"pid", "wf", "holders"}]``, a workflow executed by a process while other live ones executed it),
    ``checks`` (``[{"pid", "wf", "step", "name"}]``, each step position a process asked DBOS about, in order),
    ``queued`` (the last worker's list of DBOS's queued workflows, ``[{"id", "name", "queue", "status",
    "digest", "executor"}]``; ``None`` when no worker wrote one)."""
    queued = run_dir / "queued.json"
    checks = run_dir / "checks.log"
    positions = [line.split(" ", 3) for line in checks.read_text().splitlines()] if checks.exists() else []
    return {"dequeues": _json_lines(run_dir / "dequeues.log"), "outcomes": _json_lines(run_dir / "outcomes.log"),
            "overlaps": _json_lines(run_dir / "overlaps.log"),
            "checks": [{"pid": int(p), "wf": wf, "step": int(fid), "name": name} for p, wf, fid, name in positions],
            "queued": json.loads(queued.read_text()) if queued.exists() else None}
