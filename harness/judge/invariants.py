"""Invariants read from the world's record and the harness's own log, never from the engine's claims.

Each function reads one finished run and returns its findings (:class:`~crashpoint.harness.judge.pack_rules.Failure`);
:data:`RULES` names them with their rule ids. What they read:

* the **ledger** (``out.calls``): every call that reached a tool, with its idempotency key, outcome and
  its place in the order shared with human decisions (``gseq``);
* the **harness's delivery log** (``out.deliveries_log``): every start, approval, cancel, deploy and kill
  the harness made, a kill with its crash point and the ledger position before it (``ledger_gseq``);
* the **pack's definitions** (the version the harness deployed, and what each ``deploy`` event deployed);
* the engine's **durable status** (``out.version``), not its trace.

Rules:

``side_effects.retry_budget``
    The calls one task makes under one idempotency key, counted across every worker process, never
    exceed its attempts (1 + the task's ``retries`` + the phase's ``retries`` when the phase's
    ``on_error`` is ``retry``) plus the calls the run's kills and lost responses cut off (each may cost
    one more call). A worker that forgets the attempts a killed worker made goes past it.
``trace.attempts_monotonic``
    The attempt numbers a task's calls carry under one key never go back (1, 2, 2, 3 is fine: a call cut
    off by a kill is made again with its number; 1, 2, 1 is not).
``side_effects.no_rerun_after_checkpoint``
    A kill right after ``after_checkpoint:NAME`` lands once the step's outcome is durable: when the last
    call of that step's tool before the kill succeeded, no worker may call it again under that key (the
    allowance "one repeated call per kill" is for kills between a call and its checkpoint).
``versions.pinned``
    The engine's durable state pins the run to the version that was deployed when it was accepted, and
    the steps it ran and the tools it called belong to that definition (a ``deploy`` mid-run must not
    change which definition runs, whatever version number the engine writes into its trace).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from typing import Any, Callable

from crashpoint.harness.judge.pack_rules import Failure, call_line, trace_line
from crashpoint.harness.model.rules import RuleContext, rule
from crashpoint.harness.load.loader import APPROVAL_TOOL, Case, Pack
from crashpoint.harness.model.outcomes import RunOutcome


def kill_line(entry: dict[str, Any]) -> str:
    """A kill of the delivery log as a line: ``kill at after_checkpoint:refund_draft (worker 2, after ledger#5)``."""
    return (f"kill at {entry.get('crash_point')} (worker {entry.get('worker')}, after ledger position "
            f"{entry.get('ledger_gseq', '?')})")


def _kills(out: RunOutcome) -> list[dict[str, Any]]:
    return [e for e in out.deliveries_log if e.get("kind") == "kill"]


def _tasks_by_tool(workflow: dict[str, Any]) -> dict[str, list[tuple[dict[str, Any], dict[str, Any]]]]:
    """Tool name -> ``[(phase, task)]`` of the workflow data."""
    found: dict[str, list[tuple[dict[str, Any], dict[str, Any]]]] = defaultdict(list)
    for phase in workflow.get("phases", ()):
        for task in phase.get("tasks", ()):
            found[task["tool"]].append((phase, task))
    return found


def attempts_allowed(phase: dict[str, Any], task: dict[str, Any]) -> int:
    """Attempts (count) a task may make under one key without kills: 1 + its ``retries`` + the phase's
    ``retries`` when the phase's ``on_error`` is ``retry`` (as the durable-workflows seed's
    ``retries`` / ``onError``)."""
    phase_budget = int(phase.get("retries", 0) or 0) if phase.get("on_error") == "retry" else 0
    return 1 + int(task.get("retries", 0) or 0) + phase_budget


def retry_budget(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """``side_effects.retry_budget`` (see the module docstring)."""
    workflow = pack.workflows.get(case.workflow)
    if not workflow:
        return []
    by_tool = _tasks_by_tool(workflow)
    calls: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for call in out.calls:
        if call["tool"] in by_tool and call["idempotency_key"]:
            calls[(call["tool"], call["idempotency_key"])].append(call)
    kills = _kills(out)
    failures = []
    for (tool, key), made in calls.items():
        allowed = max(attempts_allowed(p, t) for p, t in by_tool[tool])
        lost = sum(1 for c in made if c.get("lost"))
        if len(made) > allowed + len(kills) + lost:
            tasks = "/".join(t["id"] for _, t in by_tool[tool])
            failures.append(Failure(
                "side_effects", f"task {tasks} called {tool} {len(made)} times under key {key}: its retry budget "
                f"allows {allowed} attempt(s), plus at most one call cut off by each of the run's {len(kills)} "
                f"kill(s) and {lost} lost response(s); a worker forgot the attempts made before it "
                f"(calls counted across every worker process, from the ledger)",
                [call_line(c) for c in made][:6] + [kill_line(k) for k in kills][:3]))
    return failures


def attempts_monotonic(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """``trace.attempts_monotonic`` (see the module docstring)."""
    last: dict[tuple[Any, Any], dict[str, Any]] = {}
    for event in out.trace:
        if event.get("kind") != "tool_call" or not isinstance(event.get("attempt"), int):
            continue
        where = (event.get("task"), event.get("idempotency_key"))
        before = last.get(where)
        if before is not None and event["attempt"] < before["attempt"]:
            return [Failure("trace", f"task {event.get('task')} went back from attempt {before['attempt']} to "
                                     f"attempt {event['attempt']} under key {event.get('idempotency_key')}: the "
                                     "attempt count was lost (a new worker started counting again)",
                            [trace_line(before), trace_line(event)] + [kill_line(k) for k in _kills(out)][:3])]
        if before is None or event["attempt"] >= before["attempt"]:
            last[where] = event
    return []


def _succeeded(call: dict[str, Any]) -> bool:
    """The caller got a success answer from this call (applied and not lost, or a duplicate of an applied one)."""
    if call.get("lost"):
        return False
    return call["outcome"] == "applied" or (call["outcome"] == "duplicate" and not call.get("error"))


def _checkpoint_tools(workflow: dict[str, Any]) -> dict[str, set[str]]:
    """Checkpoint name -> the tools of the steps that write it (a task's ``checkpoint``, a gate's)."""
    names: dict[str, set[str]] = defaultdict(set)
    for phase in workflow.get("phases", ()):
        for task in phase.get("tasks", ()):
            names[task.get("checkpoint") or task["id"]].add(task["tool"])
        gate = phase.get("human_gate")
        if gate:
            names[gate.get("checkpoint") or "approval_request"].add(APPROVAL_TOOL)
    return names


def no_rerun_after_checkpoint(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """``side_effects.no_rerun_after_checkpoint`` (see the module docstring)."""
    workflow = pack.workflows.get(case.workflow)
    if not workflow:
        return []
    names = _checkpoint_tools(workflow)
    failures = []
    for kill in _kills(out):
        point = str(kill.get("crash_point") or "")
        if not point.startswith("after_checkpoint:") or "ledger_gseq" not in kill:
            continue
        name = point.split(":", 1)[1].split("#", 1)[0]
        before = [c for c in out.calls if c["gseq"] <= kill["ledger_gseq"]]
        after = [c for c in out.calls if c["gseq"] > kill["ledger_gseq"]]
        for tool in sorted(names.get(name, ())):
            mine = [c for c in before if c["tool"] == tool]
            if not mine or not _succeeded(mine[-1]):
                continue  # the checkpoint recorded a failure (a retry follows) or nothing of this tool
            key = mine[-1]["idempotency_key"]
            again = [c for c in after if c["tool"] == tool and c["idempotency_key"] == key]
            if again:
                failures.append(Failure(
                    "side_effects", f"{tool} was called again under key {key} after the kill at {point}: the "
                    f"checkpoint {name} had committed its successful result, so a resumed worker has nothing of "
                    "that step to repeat (a repeat is allowed only after a kill between a call and its checkpoint)",
                    [kill_line(kill), call_line(mine[-1])] + [call_line(c) for c in again][:4]))
    return failures


def _deployed(case: Case, pack: Pack, out: RunOutcome) -> dict[int, dict[str, Any]]:
    """Version -> definition data of every version of the case's workflow the harness deployed."""
    workflow = pack.workflows.get(case.workflow) or {}
    versions = {int(workflow.get("version", 1)): workflow}
    for entry in out.deliveries_log:
        if entry.get("kind") == "deploy" and isinstance(entry.get("definition"), dict):
            versions[int(entry["version"])] = entry["definition"]
    return versions


def version_pinned(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """``versions.pinned`` (see the module docstring)."""
    workflow = pack.workflows.get(case.workflow)
    if not workflow:
        return []
    pinned = int(workflow.get("version", 1))
    deploys = [e for e in out.deliveries_log if e.get("kind") == "deploy"]
    where = [f"deploy of version {e.get('version')} (delivery step {e.get('step')})" for e in deploys][:3]
    failures = []
    if out.version is not None and out.version != pinned:
        failures.append(Failure("versions", f"the engine's durable state pins the run to version {out.version}, but "
                                            f"it was accepted on version {pinned} (the version deployed when it "
                                            "started): a deploy moved a running workflow to another definition",
                                where))
    if not deploys:
        return failures
    definition = _deployed(case, pack, out)[pinned]
    steps = {t["id"] for p in definition.get("phases", ()) for t in p.get("tasks", ())} | \
        {f"{p['id']}.human_gate" for p in definition.get("phases", ()) if p.get("human_gate")}
    foreign = [e for e in out.trace if e.get("kind") == "step_started" and e.get("task") not in steps]
    if foreign:
        failures.append(Failure("versions", f"step {foreign[0].get('task')} ran, which version {pinned} (the run's "
                                            "version) does not have: the run executed a definition deployed after "
                                            "it started", [trace_line(foreign[0])] + where))
    undo = {t.get("compensation") for p in definition.get("phases", ()) for t in p.get("tasks", ())}
    tools = {t["tool"] for p in definition.get("phases", ()) for t in p.get("tasks", ())} | undo | {APPROVAL_TOOL}
    strange = [c for c in out.calls if c["tool"] not in tools]
    if strange:
        failures.append(Failure("versions", f"{strange[0]['tool']} was called, which version {pinned} (the run's "
                                            "version) never calls: the run executed another definition",
                                [call_line(strange[0])] + where))
    return failures


#: Rule id -> function, in report order.
RULES: dict[str, Callable[[Case, Pack, RunOutcome], list[Failure]]] = {
    "side_effects.retry_budget": retry_budget,
    "trace.attempts_monotonic": attempts_monotonic,
    "side_effects.no_rerun_after_checkpoint": no_rerun_after_checkpoint,
    "versions.pinned": version_pinned,
}


def check(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """Every rule of :data:`RULES` on one run."""
    return [f for func in RULES.values() for f in func(case, pack, out)]


#: One-line descriptions of :data:`RULES`, as the registry lists them (README "Oracle rules").
DESCRIPTIONS = {
    "side_effects.retry_budget": "the calls of a task under one key, across every worker process, stay within its retry "
                                 "budget plus one per kill and lost response",
    "trace.attempts_monotonic": "the attempt numbers of a task's calls under one key never go back",
    "side_effects.no_rerun_after_checkpoint": "after a kill right after a checkpoint that committed a step's success, "
                                              "no worker calls that step's tool again under its key",
    "versions.pinned": "the run stays on the definition version deployed when it was accepted (read from the "
                       "engine's durable state and the definitions the harness deployed)",
}


def _register(rule_id: str, func: Callable[[Case, Pack, RunOutcome], list[Failure]]) -> None:
    """Register ``func`` as rule ``rule_id`` of :mod:`crashpoint.harness.model.rules` (one signature:
    ``rule(ctx)``)."""
    def check_rule(ctx: RuleContext) -> list[Failure]:
        return func(ctx.case, ctx.pack, ctx.outcome)

    check_rule.__qualname__ = f"{func.__qualname__}_rule"
    rule(rule_id, description=DESCRIPTIONS[rule_id])(check_rule)


for _id, _func in RULES.items():
    _register(_id, _func)


def delivery_line(entry: dict[str, Any]) -> str:
    """One entry of the harness's delivery log as a phrase: ``delivery step 1: approval refund_approval
    granted by alice (accepted)``, ``kill at before_checkpoint:approval_decision (worker 2, ...)``."""
    kind = entry.get("kind")
    if kind == "kill":
        return kill_line(entry)
    what = {"start": lambda e: "start request",
            "approval": lambda e: f"approval {e.get('approval_id')} {'granted' if e.get('granted') else 'denied'} "
                                  f"by {e.get('by')}",
            "cancel": lambda e: f"cancel ({e.get('reason')})",
            "approval_timeout": lambda e: f"approval {e.get('approval_id')} timed out (clock to {e.get('clock_to')})",
            "advance_clock": lambda e: f"clock moved {e.get('seconds')} s",
            "deploy": lambda e: f"deploy of version {e.get('version')}",
            "worker": lambda e: "a second worker process ran alongside the held one"}.get(
        kind, lambda e: str(kind))(entry)
    if "redelivery_of" in entry:
        what += f", delivered again (first at step {entry['redelivery_of']})"
    if "accepted" in entry:
        what += " (accepted)" if entry["accepted"] else " (recognised as a duplicate)"
    if entry.get("held_at"):
        what += f" while a worker was held at {entry['held_at']}"
    return f"delivery step {entry.get('step')}: {what}"


#: Oracle families whose findings are about the run's end state, which the delivery log explains.
STATE_FAMILIES = ("final_status", "differential")


def point_at_cause(failures: list[Failure], out: RunOutcome) -> list[Failure]:
    """``failures`` with every end-state finding (:data:`STATE_FAMILIES`, and an effect count the case
    expected) pointing at what came last before the run ended: the last delivery and the last kill
    after it (issue 15: "expected succeeded, got waiting_approval" names the event that should have
    moved it), and the trace's last event. Other findings are returned as they are."""
    log = out.deliveries_log
    if not log:
        return failures
    last = [e for e in log if e.get("kind") != "kill"][-1:]
    kills = [e for e in log if e.get("kind") == "kill"]
    after = last + ([kills[-1]] if kills and (not last or log.index(kills[-1]) > log.index(last[0])) else [])
    cause = "; then ".join(delivery_line(e) for e in after)
    lines = [delivery_line(e) for e in after] + ([trace_line(out.trace[-1])] if out.trace else [])
    pointed = []
    for f in failures:
        if f.oracle in STATE_FAMILIES or f.message.startswith("expected effect "):
            f = dataclasses.replace(f, message=f"{f.message}; the run ended so after {cause}",
                                    evidence=list(f.evidence) + [line for line in lines if line not in f.evidence])
        pointed.append(f)
    return pointed
