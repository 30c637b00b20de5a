"""DBOS targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.engines.dbos_worker` (it imports dbos; this module does not).
It wraps methods of ``dbos._sys_db.SystemDatabase`` (``init_workflow``, ``check_operation_execution``,
``record_operation_result``, ``update_workflow_outcome``, ``recv``, ``send_bulk``,
``start_queued_workflows``) and lowers the internal queue's poll interval; these are internals, so the
releases supported are those whose ``SystemDatabase`` has every one of them (checked by the worker, which
says ``unsupported`` naming the missing ones; ``send`` stands in for ``send_bulk`` before 2.2x). Swept:
dbos 3.4.0, 3.2.0, 3.0.0, 2.31.1 and 2.20.0 (README, "Test your own DBOS app"; before 3.0 the internal queue
keeps its 1 s poll).

Several workers with identities of their own (DBOS executor ids) recover at once in a case's ``workers: K``; the
rules over what the workers record beyond effects (queues, final statuses, overlaps, step positions:
:func:`facts`) are defined here (``target.queued_once``, ``target.one_live_execution``,
``target.replay_deterministic``; a run of another engine records none of these facts: no finding):

* ``target.queued_once``: work put on a queue runs exactly once. Each queued workflow ends terminal or blocked
  waiting for a human (one left ENQUEUED or PENDING is lost work, quoting the engine's status); each piece of
  queued work (queue, workflow function, digest of its inputs) appears as many times as in the golden run (more:
  the same work enqueued again under a new workflow id, e.g. an enqueue repeated by a re-run step; fewer: lost);
  no workflow's final status is written twice (it ran to the end twice).
* ``target.replay_deterministic``: every execution of a workflow asks for the same step at each position (DBOS's
  function id): a re-execution that asks for another one took another branch of the workflow body (a branch on
  the wall clock, ``random`` or the environment outside a step), which DBOS cannot replay.
* ``target.one_live_execution``: no workflow executed by two live processes at once (each worker holds a lock
  per workflow it executes until it exits; one that finds the lock held records the live holders).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine, rule
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.rules import Finding as Failure

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.target import Target


class DBOS(Engine):
    """DBOS: each step's result recorded in a system database (SQLite in the run folder, or PostgreSQL)."""

    name: ClassVar[str] = "dbos"
    title: ClassVar[str] = "DBOS"
    worker_module: ClassVar[str] = "crashpoint.harness.engines.dbos_worker"
    packages: ClassVar[tuple[str, ...]] = ("dbos",)
    order: ClassVar[int] = 20
    #: The team's effects, a step's start, its result's write, a claim from a queue.
    recovery_kinds: ClassVar[tuple[str, ...]] = (*EFFECT_KINDS, "step:", "before_result:", "dequeued:")
    worker_identities: ClassVar[bool] = True
    options_key: ClassVar[str | None] = "dbos"
    compressed_time: ClassVar[str | None] = (
        "DBOS.sleep and DBOS.sleep_async, and the team's queues poll every dbos.poll_s (default 0.01 s) instead of "
        "their polling_interval_sec; DBOS.recv and get_event timeouts run as written")
    retry_hint: ClassVar[str] = "give the step retries (@DBOS.step(retries_allowed=True, max_attempts=N))"

    def identity_args(self, label: str, identity: str, seen: list[str]) -> list[str]:
        return identity_args(label, identity, seen)

    def run_database(self, data: dict[str, Any], run_dir: Path) -> Callable[[], None] | None:
        return run_database(data, run_dir)

    def facts(self, run_dir: Path) -> dict[str, Any]:
        return facts(run_dir)

    def notes(self, run: TargetOutcome) -> list[str]:
        return team_config_notes(run.engine_facts.get("team_config") or [])

    def sampled_extras(self, golden: TargetOutcome, durability: str, target: "Target", case: Any) -> list[str]:
        return [*super().sampled_extras(golden, durability, target, case), *two_worker_recoveries(golden, target, case)]


#: Workers that recover at once in the runs :func:`two_worker_recoveries` adds.
RECOVERERS = 2


def two_worker_recoveries(golden: TargetOutcome, target: "Target", case: Any) -> list[str]:
    """The overlapping recoveries a sampled sweep adds (issue 28 item 6), for a case that recovers with one worker:
    a kill right after the golden run's first effect (``after_effect:``: the step's result not recorded yet, so the
    recovery runs the step again) and, where an input is on a queue, one at the first claim from a queue
    (``dequeued:``), each followed by :data:`RECOVERERS` workers recovering the dead executor's work at once
    (``"A >> 2 workers"``). Two executors recovering one dead one must not both run its workflows
    (``target.one_live_execution``, ``target.queued_once``, ``side_effects.at_most_once``: dbos 2.20 and 2.24 run a
    workflow started directly in both, docs/explanation/releases.md)."""
    if case.injection().together > 1:
        return []
    points = list(golden.crash_points)
    effect = next((p for p in points if p.startswith("after_effect:")), None)
    queued = any(i.get("queue") for i in target.inputs)
    claim = next((p for p in points if p.startswith("dequeued:")), None) if queued else None
    return [f"{p} >> {RECOVERERS} workers" for p in dict.fromkeys(x for x in (effect, claim) if x)]


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
    "digest", "executor"}]``; ``None`` when no worker wrote one), ``team_config`` (``[{"pid", "where",
    "replaced"}]``: each worker that made the team's own module-level ``DBOS(config=...)`` again for the run)."""
    queued = run_dir / "queued.json"
    checks = run_dir / "checks.log"
    positions = [line.split(" ", 3) for line in checks.read_text().splitlines()] if checks.exists() else []
    return {"dequeues": _json_lines(run_dir / "dequeues.log"), "outcomes": _json_lines(run_dir / "outcomes.log"),
            "overlaps": _json_lines(run_dir / "overlaps.log"),
            "checks": [{"pid": int(p), "wf": wf, "step": int(fid), "name": name} for p, wf, fid, name in positions],
            "queued": json.loads(queued.read_text()) if queued.exists() else None,
            "team_config": _json_lines(run_dir / "team-dbos-config.log")}


def team_config_notes(records: list[dict[str, Any]]) -> list[str]:
    """One note per place the team's code made its own DBOS (``facts()["team_config"]``: ``{"pid", "where",
    "replaced"}`` per worker that rebuilt it for the run), naming what crashpoint replaced."""
    notes, seen = [], set()
    for record in records:
        if record["where"] in seen:
            continue
        seen.add(record["where"])
        replaced = ", ".join(f"{k} {v!r}" for k, v in record["replaced"].items()) or "nothing"
        notes.append(f"the team's DBOS(config=...) at {record['where']} was made again in each worker with the run's "
                     f"own system database, pinned application version and executor id, the rest of its config kept "
                     f"(not used: its {replaced}; DBOS keeps a process's first instance and ignores a later "
                     "config, so these would have applied to every worker)")
    return notes


# ---------------------------------------------------------------------- rules over facts()

#: Final statuses after which a queued workflow has run.
TERMINAL = ("SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED", "RETRIES_EXCEEDED")


def _work(entry: dict[str, Any]) -> tuple[str, str, str]:
    return entry["queue"], entry["name"], entry["digest"]


@rule("target.queued_once", "queued work runs exactly once: never left queued, never enqueued again under a new id, "
                            "never completed twice")
def queued_once(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    queued = run.engine_facts.get("queued")
    if queued is None:
        return []
    found = []
    for entry in queued:
        if entry["status"] not in TERMINAL and not entry.get("waiting"):
            found.append(Failure("target.queued_once",
                                 f"queued work lost: {entry['name']} {entry['id']} on queue {entry['queue']} is still "
                                 f"{entry['status']} (DBOS workflow status, executor {entry['executor']}) once every "
                                 "worker had exited", [f"queued {entry}"]))
    wanted = [i["thread"] for i in target.inputs if i.get("queue")]
    ids = {e["id"] for e in queued}
    for thread in wanted:
        if thread not in ids:
            found.append(Failure("target.queued_once", f"queued work lost: {thread} was to be enqueued but no queue "
                                 "holds it"))
    golden_queued = golden.engine_facts.get("queued") if golden is not None else None
    if golden_queued is not None:
        want, got = Counter(map(_work, golden_queued)), Counter(map(_work, queued))
        for work in sorted(set(want) | set(got)):
            if got[work] != want[work]:
                same = [e["id"] for e in queued if _work(e) == work]
                what = ("enqueued again under new workflow ids" if got[work] > want[work] else "lost")
                found.append(Failure("target.queued_once",
                                     f"queued work {what}: {work[1]} with inputs {work[2]} on queue {work[0]} appears "
                                     f"{got[work]} time(s); the golden run had {want[work]}",
                                     [f"workflow {i}" for i in same[:4]]))
    writes = Counter(o["wf"] for o in run.engine_facts.get("outcomes", ()) if o["status"] in TERMINAL)
    for wf, n in sorted(writes.items()):
        if n > 1 and wf in ids:
            pids = [o["pid"] for o in run.engine_facts["outcomes"] if o["wf"] == wf]
            found.append(Failure("target.queued_once", f"queued workflow {wf} ran to the end {n} times (its final "
                                 f"status written by pids {', '.join(map(str, pids))})"))
    return found


@rule("target.one_live_execution", "no workflow is executed by two live processes at once")
def one_live_execution(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    found, seen = [], set()
    for overlap in run.engine_facts.get("overlaps", ()):
        holders = overlap.get("holders") or []
        if not holders or overlap["wf"] in seen:
            continue
        seen.add(overlap["wf"])
        found.append(Failure("target.one_live_execution",
                             f"workflow {overlap['wf']} executed by pid {overlap['pid']} while pid(s) "
                             f"{', '.join(map(str, holders))} were alive and executing it: two live processes ran "
                             "one workflow at once", [f"overlap {overlap}"]))
    return found


@rule("target.replay_deterministic", "each execution of a workflow asks for the same step at each position")
def replay_deterministic(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    first: dict[tuple[str, int], dict[str, Any]] = {}
    found, seen = [], set()
    for check in run.engine_facts.get("checks", ()):
        where = (check["wf"], check["step"])
        before = first.setdefault(where, check)
        if before["name"] != check["name"] and check["wf"] not in seen:
            seen.add(check["wf"])
            error = (run.threads.get(check["wf"]) or {}).get("error")
            deploys = [d["version"] for d in run.deliveries if d["kind"] == "deploy"]
            why = (f"a deploy ({deploys[0]}) changed the workflow's steps before the recorded ones: add new steps "
                   "after them, or keep the old order for workflows started before the deploy" if deploys else
                   "the workflow body branches on something DBOS does not record (the wall clock, random, "
                   "the environment): do it in a step")
            found.append(Failure("target.replay_deterministic",
                                 f"workflow {check['wf']} took another path when it ran again: step {check['step']} was "
                                 f"{before['name']} (pid {before['pid']}) and then {check['name']} (pid {check['pid']}); "
                                 + why + (f"; DBOS says: {error}" if error else ""),
                                 [f"pid {c['pid']} step {c['step']} {c['name']}" for c in run.engine_facts["checks"]
                                  if c["wf"] == check["wf"]][:8]))
    return found
