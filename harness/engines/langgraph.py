"""LangGraph targets: what the harness side needs to know about the engine (the worker does the rest).

The worker is :mod:`crashpoint.harness.engines.langgraph_worker` (it imports LangGraph; this module does
not). Supported: ``langgraph`` releases whose ``StateGraph.compile(checkpointer=...)``, ``invoke(...,
durability=...)``, ``interrupt()`` / ``Command(resume=...)`` and ``SqliteSaver(conn)`` exist (see README,
"Findings per langgraph release", for the releases tried). A thread's state is the saver's checkpoints in the run
folder; no server, no worker identity.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine, rule
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.points import WITH
from crashpoint.harness.model.rules import Finding as Failure

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.target import Target


def line(call: Any) -> str:
    """``ledger#3 issue_refund key=K applied pid=123 order-1@issue`` (as the target rules show a call)."""
    return (f"ledger#{call.seq} {call.effect} key={call.key} {call.outcome} pid={call.pid} {call.thread}@{call.node}"
            f" step {call.step}")


class LangGraph(Engine):
    """LangGraph: checkpoints written by a saver (SQLite in the run folder) after each superstep."""

    name: ClassVar[str] = "langgraph"
    title: ClassVar[str] = "LangGraph"
    worker_module: ClassVar[str] = "crashpoint.harness.engines.langgraph_worker"
    packages: ClassVar[tuple[str, ...]] = ("langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite")
    order: ClassVar[int] = 10
    default: ClassVar[bool] = True
    durability_modes: ClassVar[tuple[str, ...]] = ("sync", "async", "exit")
    #: A node's start, the team's effects, the saver's checkpoint write and its pending writes.
    recovery_kinds: ClassVar[tuple[str, ...]] = ("node:", *EFFECT_KINDS, "before_put:", "before_writes:")
    #: A checkpoint write comes between supersteps: its id (numbered by occurrence) is the same in every run.
    pair_kinds: ClassVar[tuple[str, ...]] = ("before_put:", "after_put:")
    #: Two invocations of one thread are not serialised by LangGraph: the worker holds them together in a step.
    rendezvous: ClassVar[bool] = True
    #: Documented: on resume, the node that called interrupt() runs again from its first line.
    interrupted_rerun: ClassVar[str | None] = "LangGraph re-runs an interrupted node from its start on resume"
    retry_hint: ClassVar[str] = "give the node a RetryPolicy whose retry_on takes the error"

    def facts(self, run_dir: Path) -> dict[str, Any]:
        return facts(run_dir)

    def race_specs(self, golden: TargetOutcome, durability: str) -> list[str]:
        return race_specs(golden, durability)

    def notes(self, run: TargetOutcome) -> list[str]:
        return kept_by_keys_notes(run)


#: The saver's log of a run's workers (``langgraph_worker.SAVER_FILE``).
SAVER_FILE = "saver.log"
#: Channels of a task's pending writes that mean it did not finish: it waits for a human, or raised (LangGraph runs it
#: again on resume, by design).
UNFINISHED_CHANNELS = ("__interrupt__", "__error__")
#: At most this many forced races per case and durability mode (each a run of its own).
MAX_RACES = 6
#: LangGraph's own words for each durability mode (the docstring of ``langgraph.types.Durability``, the same in 0.6.11
#: and 1.2.24; docs/reference/rules.md quotes them).
PROMISES = {"sync": "Changes are persisted synchronously before the next step starts.",
            "async": "Changes are persisted asynchronously while the next step executes.",
            "exit": "Changes are persisted only when the graph exits."}


def facts(run_dir: Path) -> dict[str, Any]:
    """What the run's workers recorded of the saver (``saver.log``): ``{"saver": [{"pid", "op": "put" | "writes",
    "thread", "step"?, "source"?, "node"?, "task"?, "channels"?, "at": "call" | "end"}, ...]}`` in order (a torn last
    line, its writer killed, is left out)."""
    path = Path(run_dir) / SAVER_FILE
    rows = []
    for text in path.read_text().splitlines() if path.exists() else ():
        try:
            rows.append(json.loads(text))
        except ValueError:
            continue
    return {"saver": rows}


def _later_pids(run: TargetOutcome, pid: int) -> set[int]:
    """The worker processes the run started after process ``pid`` (in launch order)."""
    order = [p["pid"] for p in run.pids if p.get("pid") is not None]
    return set(order[order.index(pid) + 1:]) if pid in order else set()


def kept_steps(run: TargetOutcome, pid: int, point: str) -> dict[str, int]:
    """Thread -> the highest step whose nodes ``durability="sync"`` promises never to run again after process ``pid``
    was killed at ``point``: every step whose checkpoint write LangGraph had begun in that process (the saver's log has
    its loop ``put`` called, or the kill was at that ``put``'s ``before_put:T@N``): LangGraph calls it only once every
    task of the step has returned and handed its writes over. ``{}`` in any other mode (``async`` promises nothing
    about a step whose checkpoint is still being written, ``exit`` nothing before the end)."""
    if run.durability != "sync":
        return {}
    kept: dict[str, int] = {}
    for e in run.engine_facts.get("saver") or ():
        if e.get("pid") == pid and e.get("op") == "put" and e.get("source") == "loop":
            kept[e["thread"]] = max(kept.get(e["thread"], -1), int(e["step"]))
    if point.startswith("before_put:"):  # the kill at the write itself (its call is logged before the probe)
        thread, _, step = point.split(":", 1)[1].split("#", 1)[0].rpartition("@")
        if step.lstrip("-").isdigit():
            kept[thread] = max(kept.get(thread, -1), int(step))
    return kept


def _unfinished(run: TargetOutcome, pid: int) -> set[tuple[str, str]]:
    """``(thread, node)`` of the tasks process ``pid`` handed over as not finished (an interrupt, an error)."""
    return {(e["thread"], e["node"]) for e in run.engine_facts.get("saver") or ()
            if e.get("pid") == pid and e.get("op") == "writes" and set(e.get("channels") or ()) & set(UNFINISHED_CHANNELS)}


def reruns(run: TargetOutcome) -> list[tuple[dict[str, Any], list[Any], list[Any], str]]:
    """``(kill, first, again, why)`` per node run again against the promise of :func:`kept_steps`: the node (of that
    step, in that thread) had returned in the killed process (``first``: its effect calls there) and a later process
    called its effects again (``again``: those calls, in ledger order); ``why`` says whether the node's pending writes
    had been written before the kill (the saver's ``put_writes`` returned) or were still in the saver's background
    thread."""
    found = []
    saver = run.engine_facts.get("saver") or []
    for kill in run.kill_log:
        pid, point = kill.get("pid"), kill.get("crash_point") or ""
        if pid is None:
            continue
        kept = kept_steps(run, pid, point)
        if not kept:
            continue
        unfinished = _unfinished(run, pid)
        ran = {(t, s, n) for p, t, s, n in run.steps if p == pid and s is not None and s <= kept.get(t, -2)
               and (t, n) not in unfinished}
        written = {(e["thread"], e["node"]) for e in saver
                   if e.get("pid") == pid and e.get("op") == "writes" and e.get("at") == "end"}
        later = _later_pids(run, pid)
        for where in sorted({(c.thread, c.step, c.node) for c in run.calls if c.pid in later} & ran, key=str):
            at = [c for c in run.calls if (c.thread, c.step, c.node) == where]
            why = ("its pending writes had been written too" if (where[0], where[2]) in written else
                   "its pending writes were still in the saver's background thread")
            found.append((kill, [c for c in at if c.pid == pid], [c for c in at if c.pid in later], why))
    return found


def _applied_again(first: list[Any], again: list[Any]) -> list[Any]:
    """The calls of ``again`` that applied an effect the node had applied already in ``first`` (money moved twice),
    not answered ``duplicate`` by its key."""
    done = {c.effect for c in first if c.outcome == "applied"}
    return [c for c in again if c.outcome == "applied" and c.effect in done]


@rule("target.durability_promise", "durability=sync: a node of a step whose checkpoint write had begun (every task of "
                                   "the step returned) never runs its effects again after a crash")
def durability_promise(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per node LangGraph ran again, against its ``sync`` promise, whose re-run applied an effect the
    node had applied before the kill (judged from the ledger's calls, the saver's log and the kill's crash point,
    :func:`reruns`); a re-run whose calls were all answered ``duplicate`` by their keys is a note instead
    (:func:`kept_by_keys_notes`): the promise was broken, the team's keys kept it harmless."""
    if "saver" not in run.engine_facts:
        return []
    found = []
    for kill, first, again, why in reruns(run):
        twice = _applied_again(first, again)
        if not twice:
            continue
        call = twice[0]
        found.append(Failure(
            "target.durability_promise",
            f"{call.effect} applied again in pid {call.pid}: node {call.node} (step {call.step} of {call.thread}) had "
            f"returned in pid {kill['pid']}, killed at {kill['crash_point']}, after LangGraph had begun the step's "
            f"checkpoint write (the loop calls the saver's put once every task of the step has returned and handed its "
            f"writes over); the recovery ran the node again ({why}). durability=sync, which LangGraph documents as "
            f"\"{PROMISES['sync']}\": the engine did not keep it here, and nothing kept the effect single: "
            + _why_not_single([*first, *again], call.effect),
            [line(c) for c in [*first, *again]][:4]))
    return found


def _why_not_single(calls: list[Any], effect: str) -> str:
    """Why the ledger could not answer ``effect``'s repeat: it has no idempotency key, or a new one per call (the fix
    is the team's either way: a key derived from the thread's state)."""
    keys = list(dict.fromkeys(c.key for c in calls if c.effect == effect))
    if not any(keys):
        return f"{effect} has no idempotency key; give it one derived from the thread's state"
    return (f"{effect}'s key changed between the calls ({', '.join(str(k) for k in keys[:3])}): a key made anew per "
            "call cannot stop the repeat; derive it from the thread's state")


def kept_by_keys_notes(run: TargetOutcome) -> list[str]:
    """One note per node LangGraph ran again against its ``sync`` promise (:func:`reruns`) whose repeated calls
    applied nothing new (answered ``duplicate`` by their idempotency keys): the engine's fault, made harmless by the
    team's keys; not a failure of the team's code."""
    if "saver" not in run.engine_facts:
        return []
    notes = []
    for kill, first, again, why in reruns(run):
        if _applied_again(first, again) or not again:
            continue
        c = again[0]
        notes.append(f"durability=sync not kept by LangGraph: node {c.node} (step {c.step} of {c.thread}) had returned "
                     f"in pid {kill['pid']} before the kill at {kill['crash_point']} and ran again in pid {c.pid} "
                     f"({why}); its {len(again)} repeated effect call(s) were answered "
                     + "/".join(sorted({a.outcome for a in again})) + " by their keys, so nothing was applied twice")
    return notes


def _first_after(points: list[str], start: int, name: str) -> tuple[int, str] | None:
    """``(index, id)`` of the first occurrence of crash point ``name`` (any occurrence number) after ``points[start]``."""
    for i in range(start + 1, len(points)):
        if points[i].split("#", 1)[0] == name:
            return i, points[i]
    return None


def race_specs(golden: TargetOutcome, durability: str) -> list[str]:
    """The forced races of LangGraph's background checkpoint writes a sampled sweep (``crash="sampled"``, the
    default) adds, from the golden run: under ``sync``, for each node that applied an effect and returned (not
    waiting for a human, not raised), a kill at its step's checkpoint write (``before_put:T@N``) with the node's
    pending writes (``before_writes:T@NODE``) held (:class:`~crashpoint.harness.process.crashpoints.Spec`'s race);
    under ``async``, a write held while the next effect is applied (:func:`_async_write_races`).
    LangGraph submits a task's ``put_writes`` to its background pool and waits only for the step's ``put``, so which
    of the two is durable first is thread timing: the race tries the interleaving where the writes lose, every time,
    not in a few of many tries. None under ``exit`` (it writes at the end).

    At most :data:`MAX_RACES`, spread over the run."""
    points = list(golden.crash_points)
    if durability == "async":
        return _async_write_races(points)
    if durability != "sync":
        return []
    specs: list[str] = []
    effect_nodes = {(c.thread, c.step, c.node) for c in golden.calls if c.outcome == "applied"}
    unfinished = {(e["thread"], e["node"]) for e in golden.engine_facts.get("saver") or ()
                  if e.get("op") == "writes" and set(e.get("channels") or ()) & set(UNFINISHED_CHANNELS)}
    for i, point in enumerate(points):
        if not point.startswith("node:"):
            continue
        thread, _, node = point.split(":", 1)[1].split("#", 1)[0].rpartition("@")
        steps = sorted({s for p, t, s, n in golden.steps if t == thread and n == node and s is not None})
        k = sum(1 for q in points[:i + 1] if q.split("#", 1)[0] == point.split("#", 1)[0]) - 1
        step = steps[k] if k < len(steps) else None
        if step is None or (thread, step, node) not in effect_nodes or (thread, node) in unfinished:
            continue
        writes = _first_after(points, i, f"before_writes:{thread}@{node}")
        put = _first_after(points, i, f"before_put:{thread}@{step}")
        if writes and put:
            specs.append(f"{put[1]}{WITH}{writes[1]} held")
    return _spread(list(dict.fromkeys(specs)), MAX_RACES)


def _async_write_races(points: list[str]) -> list[str]:
    """Under ``async``, kills inside a checkpoint write still in LangGraph's background pool, at the effect it lets
    through (a latency made certain: the write is held until the kill). First, for each thread's first write
    (``before_put:T@-1``, the input checkpoint) followed by an effect, a kill at the first such effect
    (``after_effect:NAME``) with that write held: the first node's effect lands while the database holds nothing of the
    thread (``target.thread_has_checkpoint``). Then, for a later write (``before_put:T@N``, ``N >= 0``), a kill at the
    first effect after the thread's next write (in the step after next) with write ``N`` held: LangGraph chains a
    thread's background puts, so checkpoint ``N + 1`` (whose step's tasks have returned and moved on) is not durable
    either, and the resume runs step ``N + 1`` again (``target.repeats_explained``'s lost progress; an unkeyed effect
    of that step, ``side_effects.at_most_once``). An effect in step ``N + 1`` itself would not do: a kill there explains
    its own repeat, and the step's writes, handed over on return, are durable against checkpoint ``N`` by then. The
    first writes' races come first; at most :data:`MAX_RACES` in all, the later ones spread over the run."""
    first, later = [], []
    for i, point in enumerate(points):
        if not point.startswith("before_put:"):
            continue
        thread, _, step = point.split(":", 1)[1].split("#", 1)[0].rpartition("@")
        if step == "-1":
            effect = next((q for q in points[i + 1:] if q.startswith("after_effect:")), None)
            if effect is not None:
                first.append(f"{effect}{WITH}{point} held")
            continue
        puts = [j for j in range(i + 1, len(points)) if points[j].startswith(f"before_put:{thread}@")]
        if not puts:
            continue
        end = puts[1] if len(puts) > 1 else len(points)
        effect = next((q for q in points[puts[0] + 1:end] if q.startswith("after_effect:")), None)
        if effect is not None:
            later.append(f"{effect}{WITH}{point} held")
    first = list(dict.fromkeys(first))[:MAX_RACES]
    return first + _spread(list(dict.fromkeys(later)), MAX_RACES - len(first))


def _spread(items: list[str], n: int) -> list[str]:
    """``n`` of ``items`` evenly spread, in order (all when there are no more)."""
    if len(items) <= n:
        return items
    return [items[(2 * k + 1) * len(items) // (2 * n)] for k in range(n)]
