"""DBOS targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.engines.dbos_worker` (it imports dbos; this module does not).
It wraps methods of ``dbos._sys_db.SystemDatabase`` (``init_workflow``, ``check_operation_execution``,
``record_operation_result``, ``update_workflow_outcome``, ``recv``, ``send_bulk``,
``start_queued_workflows``) and lowers the internal queue's poll interval; these are internals, so the
releases supported are those whose ``SystemDatabase`` has every one of them (checked by the worker, which
says ``unsupported`` naming the missing ones; ``send`` stands in for ``send_bulk`` before 2.2x). Swept:
dbos 3.4.0, 3.2.0, 3.0.0, 2.31.1 and 2.20.0 (README, "Test your own DBOS app"; before 3.0 the internal queue
keeps its 1 s poll).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Callable

from crashpoint.versions import installed_versions as _versions

WORKER_MODULE = "crashpoint.harness.engines.dbos_worker"
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


def run_database(data: dict[str, Any], run_dir: Path) -> Callable[[], None] | None:
    """Give a run its own system database on the PostgreSQL server the target names (``dbos.database_url``): the
    URL in ``data`` (the run's ``target.json``) gets the database name ``NAME_DIGEST`` (the run folder's digest, so
    the runs of a sweep, in parallel, never share DBOS state); DBOS creates it at its first launch. Returns the call
    that drops it (``DROP DATABASE ... WITH (FORCE)``), or ``None`` when the target uses SQLite (a file in the run
    folder). A database of that name left by an earlier run in the same folder is dropped first.

    Raises:
        sqlalchemy.exc.OperationalError: the server cannot be reached (the run is then an ``error``).
    """
    url = (data.get("dbos") or {}).get("database_url")
    if not url:
        return None
    from sqlalchemy.engine import make_url

    base = make_url(url)
    name = f"{(base.database or 'dbos')[:40]}_{hashlib.sha256(str(run_dir.resolve()).encode()).hexdigest()[:16]}"
    data["dbos"] = {**data["dbos"], "database_url": base.set(database=name).render_as_string(hide_password=False)}

    def drop() -> None:
        import sqlalchemy as sa

        admin = sa.create_engine(base.set(database="postgres"), isolation_level="AUTOCOMMIT")
        try:
            with admin.connect() as conn:
                conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        finally:
            admin.dispose()

    drop()
    return drop


def _json_lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()] if path.exists() else []


def facts(run_dir: Path) -> dict[str, Any]:
    """What the run's DBOS workers recorded beyond effects (the files of
    :mod:`~crashpoint.harness.engines.dbos_worker`): ``dequeues`` (``[{"pid", "wf", "queue"}]``, each claim from
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
