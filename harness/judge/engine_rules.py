"""Target rules over what an engine's workers recorded beyond effects (``TargetOutcome.engine_facts``; DBOS:
:func:`crashpoint.harness.engines.dbos.facts`). Registered like the rules of
:mod:`~crashpoint.harness.judge.target_rules` (family ``target``); an engine that records none gives them nothing
to read (no finding):

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

from collections import Counter
from typing import Any

from crashpoint.harness.model.rules import Finding as Failure
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.judge.target_rules import rule
from crashpoint.harness.load.target import Target

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
