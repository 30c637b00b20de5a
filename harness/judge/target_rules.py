"""Oracle rules for targets: each reads one run of a team's code (and its golden run) and names what is wrong.

Every rule has a stable id (the findings carry it, ``Finding.rule``) and one signature,
``rule(target, run, golden) -> list[Finding]`` (``golden`` is ``None`` when judging the golden run); each
is registered in the project's rule registry (:mod:`crashpoint.harness.model.rules`, family ``target``),
which runs them, records a rule that raises, and lists them with the other rules:

* ``side_effects.at_most_once``: at most one applied effect per idempotency key; an effect called
  with no key is identified by its thread, node and argument digest (so a repeat the downstream
  cannot recognise is caught).
* ``target.repeats_explained``: a call repeated (same thread, node, effect, key or digest) only as far
  as kills and faults explain it: each kill of a process that had made the call and had **not** moved
  on to a later step explains one repeat, each retryable failure or lost answer one more; with no
  kill and no fault, no repeat at all. A repeat in a later attempt of the same activity (same thread,
  node and step; the call's ``task`` reads ``attempt N``, as a Temporal activity's does) than the call
  before it explains one repeat too: the engine itself retried the activity after the earlier attempt
  timed out or failed (Temporal's activities are at-least-once), in the same process or another. A
  repeat after the killed process had started a later step is lost progress (the engine had not made the
  step durable before moving on). A retry that applies an effect twice is ``differential.same_effects``'s.
  A repeat nothing explains that the ledger answered by its key (a ``duplicate``: the effect applied once) is
  safe and passes, with a note naming the engine behaviour (:func:`keyed_repeats`: "LangGraph re-runs an
  interrupted node from its start on resume: 1 call repeated, answered by its key ..."), except in a thread the
  engine lost and crashpoint submitted again.
* ``target.single_live_process``: no step's effect called by two processes that were alive at once (each
  call records the run's other live workers).
* ``target.ends_within_budget``: each thread ends finished or waiting for a human, within the budget;
  a stuck thread quotes the engine's own error.
* ``target.durable_before_effect``: no effect applied while the engine held no durable record of its thread.
* ``target.thread_has_checkpoint``: a kill never leaves a thread whose effects were applied with no checkpoint at all
  (the driver found it with none and resubmitted its start, as its caller would: the effects run again).
* ``target.approval_gate``: a gated effect is applied only while its approval's latest answer grants it; a
  ``late`` answer (delivered after the workflow moved on) is no answer: it grants nothing. A gated call crashpoint
  could not place in a thread (none of the engine's positions, not even through the thread that started it) is a
  finding that says so, not "no answer yet". Gates follow child workflows (``TargetOutcome.parents``): a call in a
  child is granted by the approval of its own thread or, when that has no answer, of its nearest ancestor with one,
  answered before the call and before the child (each child on the way down) was started; a child started before
  the answer is not gated by it.
* ``target.expected_end``: each thread the case's ``expect`` (else the target's) names ends in its status and with
  its values (a subset: a mapping matches key by key, any other value by JSON equality: true is not 1), on every run, the golden run
  included: a golden run that is itself wrong fails here, where ``final_state_like_golden`` would take it for right.
* ``target.key_reused``: no idempotency key is used again with other arguments (the ledger refuses it as a payments
  API does, outcome ``conflict``, unless the effect declares ``key_reuse="replay"``).
* ``target.fresh_key_repeat``: a node run does not apply one effect twice with the same arguments under new keys
  where no kill explains it (a key made fresh per call), the golden run included.
* ``target.expected_effects``: each effect the ``expect`` counts for a thread (``effects: {issue_refund: 1}``) is
  applied that many times in it (a ``duplicate`` its key answered does not count), on every run, the golden run
  included.
* ``differential.same_end``: each thread ends in the golden run's status and state values.
* ``differential.same_effects``: each thread applies each effect as many times as in the golden run.
* ``target.invariant:NAME``: the team's own checks (:func:`crashpoint.invariant`), judged strictly: only ``None`` or
  ``True`` passes (:func:`strict_failure`), and any ``BaseException`` a check raises is ``unknown`` with its text.

A rule that raises is reported under its id with verdict ``unknown``, never as a pass.
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter, defaultdict
from typing import Any, Callable

from crashpoint.api import EffectCall, RunView, resolve_invariants
from crashpoint.harness.model import rules as registry
from crashpoint.harness.model.rules import Finding as Failure
from crashpoint.harness.model.outcomes import LATE_BY, TargetOutcome
from crashpoint.harness.load.target import Target

Rule = Callable[[Target, TargetOutcome, "TargetOutcome | None"], list[Failure]]
_ATTEMPT = re.compile(r"attempt (\d+)")
#: The target rules by id, in registration order (each is also in the project's rule registry).
RULES: dict[str, Rule] = {}


def rule(rule_id: str, description: str, kind: str = "property") -> Callable[[Rule], Rule]:
    """Register ``fn(target, run, golden)`` as rule ``rule_id`` (``target.NAME``) here and in the project's
    registry (:mod:`crashpoint.harness.model.rules`), judging target runs (``subjects=("target",)``), of ``kind``
    ``property`` or ``expectation``."""
    def register(fn: Rule) -> Rule:
        def check(ctx: registry.RuleContext) -> list[Failure]:
            return fn(ctx.subject, ctx.outcome, ctx.golden)  # type: ignore[arg-type]

        check.__module__, check.__qualname__, check.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
        registry.rule(rule_id, description=description, subjects=("target",), kind=kind)(check)
        RULES[rule_id] = fn
        return fn
    return register


def line(call: EffectCall) -> str:
    """``ledger#3 issue_refund key=K applied pid=123 order-1@issue``."""
    return (f"ledger#{call.seq} {call.effect} key={call.key} {call.outcome}{' (answer lost)' if call.lost else ''} "
            f"pid={call.pid} {call.thread}@{call.node}")


def step_of(call: EffectCall) -> tuple[Any, ...]:
    """What "the same call" means across kills: thread, node, effect, and the key (else the argument digest)."""
    return (call.thread, call.node, call.effect, call.key if call.key is not None else f"args:{call.digest}")


def _moved_on(run: TargetOutcome, call: EffectCall) -> tuple[int, str] | None:
    """The first later step (number, node) the call's process started in the call's thread, if any."""
    if call.step is None:
        return None
    for pid, thread, step, node in run.steps:
        if pid == call.pid and thread == call.thread and step is not None and step > call.step:
            return step, node
    return None


def attempt(call: EffectCall) -> int | None:
    """The engine's attempt number of the activity that made ``call`` (its ``task`` reads ``attempt N``: Temporal),
    else ``None``."""
    match = _ATTEMPT.fullmatch(call.task or "")
    return int(match.group(1)) if match else None


def _retried(call: EffectCall, later: EffectCall) -> bool:
    """``later`` ran in a later attempt of the activity that made ``call`` (same thread, node, step): the engine's
    retry."""
    first, then = attempt(call), attempt(later)
    return (first is not None and then is not None and then > first and call.thread == later.thread
            and call.node == later.node and call.step == later.step)


def _repeats(run: TargetOutcome) -> list[tuple[list[EffectCall], int, list[tuple[EffectCall, tuple[int, str]]]]]:
    """Each group of calls of one step (:func:`step_of`) made more than once: ``(calls, allowed, lost_progress)``,
    ``allowed`` the calls kills, faults and engine retries explain, ``lost_progress`` the calls repeated after their
    killed process had moved on to a later step (with that step)."""
    killed = {p["pid"] for p in run.pids if p["rc"] == -9 and p["pid"] is not None}
    groups: dict[tuple[Any, ...], list[EffectCall]] = defaultdict(list)
    for call in run.calls:
        groups[step_of(call)].append(call)
    out = []
    for calls in groups.values():
        if len(calls) < 2:
            continue
        allowed = 1
        lost_progress = []
        for i, call in enumerate(calls[:-1]):
            if call.outcome == "failed" or call.lost:
                allowed += 1  # a failure or a lost answer is answered by a retry (a RetryPolicy, the team's loop)
                continue
            if call.pid in killed and call.pid != calls[i + 1].pid:
                later = _moved_on(run, call)
                if later is None:
                    allowed += 1
                else:
                    lost_progress.append((call, later))
            elif _retried(call, calls[i + 1]):
                allowed += 1  # the engine ran the activity again after this attempt timed out or failed
        out.append((calls, allowed, lost_progress))
    return out


def answered_by_key(calls: list[EffectCall], run: TargetOutcome) -> bool:
    """Whether the repeats of one step's keyed call were answered by the ledger by their key: the calls carry a key
    and at most one of them was applied (the others ``duplicate``, or ``failed``): the effect happened once. Not in
    a thread crashpoint had to submit again (a ``resubmit`` delivery: the engine held no record of it, as a server
    that lost its database) when a call of the group came before that submission (``after_gseq``: the ledger's last
    position then): there the repeat is the engine's lost work, however the key answered it. Calls all made after it
    (a node that interrupts, run again on each resume of the thread submitted again) are an ordinary keyed repeat."""
    lost = False
    for d in run.deliveries:
        if d.get("kind") == "resubmit" and d.get("thread") == calls[0].thread:
            since = d.get("after_gseq")
            lost = lost or since is None or any(c.gseq <= since for c in calls)
    return calls[0].key is not None and not lost and sum(c.outcome == "applied" for c in calls) <= 1


@rule("target.repeats_explained", "a call repeats only as far as kills, faults and the engine's retries explain; never after the process moved on")
def repeats_explained(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    found = []
    for calls, allowed, lost_progress in _repeats(run):
        if lost_progress:
            call, (step, node) = lost_progress[0]
            found.append(Failure("target.repeats_explained",
                                 f"{call.effect} ran again in a new process after pid {call.pid} had moved on to step "
                                 f"{step} ({node}) of {call.thread}: the engine lost its place (the checkpoint of step "
                                 f"{call.step} was not durable when the next step began; durability={run.durability})",
                                 [line(c) for c in calls[:4]]))
        elif len(calls) > allowed and not answered_by_key(calls, run):
            why = ("no kill, fault or engine retry explains any repeat" if allowed == 1
                   else f"kills, faults and engine retries explain {allowed - 1}")
            found.append(Failure("target.repeats_explained",
                                 f"{calls[0].effect} called {len(calls)} times for one step of {calls[0].thread} "
                                 f"({calls[0].node}); {why}", [line(c) for c in calls[:4]]))
    return found


def _interrupted_rerun(target: Target) -> str | None:
    """The engine's words for running an interrupted node again on resume
    (:attr:`~crashpoint.harness.engines.base.Engine.interrupted_rerun`), ``None`` when it does not or is unknown."""
    from crashpoint.harness.engines.base import engine_for

    try:
        return engine_for(target.engine).interrupted_rerun
    except KeyError:
        return None


def _retry_hint(target: Target) -> str:
    """How the target's engine retries a failed call (:attr:`~crashpoint.harness.engines.base.Engine.retry_hint`)."""
    from crashpoint.harness.engines.base import Engine, engine_for

    try:
        return engine_for(target.engine).retry_hint
    except KeyError:
        return Engine.retry_hint


def _interrupting(target: Target) -> set[str]:
    """The nodes the target's ``human`` answers (its own or any case's): the nodes that interrupt."""
    nodes = set(target.human or {})
    for case in target.cases:
        nodes |= set(case.human or {})
    return nodes


def keyed_repeats(target: Target, run: TargetOutcome) -> list[str]:
    """The run's notes on repeats :func:`repeats_explained` passes because the ledger answered them by their key
    (:func:`answered_by_key`), one per step: "LangGraph re-runs an interrupted node from its start on resume: 1
    call repeated, answered by its key (notify key=n-1 in o1@approve: applied once, 1 duplicate)" for a node that
    interrupts on LangGraph (documented: the node runs again from its first line when the thread resumes), else
    "EFFECT called N times for one step of THREAD (NODE) with one key; no kill, fault or engine retry explains ...:
    answered by its key ...". ``[]`` when there is none."""
    notes = []
    for calls, allowed, lost_progress in _repeats(run):
        if lost_progress or len(calls) <= allowed or not answered_by_key(calls, run):
            continue
        first, extra = calls[0], len(calls) - allowed
        dups = sum(c.outcome == "duplicate" for c in calls)
        what = (f"answered by its key ({first.effect} key={first.key} in {first.thread}@{first.node}: applied "
                f"{'once' if any(c.outcome == 'applied' for c in calls) else 'never'}, {dups} duplicate(s))")
        behaviour = _interrupted_rerun(target) if first.node in _interrupting(target) else None
        if behaviour:
            notes.append(f"{behaviour}: {extra} call(s) repeated, {what}")
        else:
            notes.append(f"{first.effect} called {len(calls)} times for one step of {first.thread} ({first.node}), "
                         f"{extra} more than kills, faults and engine retries explain: {what}")
    return notes


#: What every :func:`keyed_repeats` note holds.
ANSWERED_BY_KEY = "answered by its key ("


def keyed_summary(results: list[Any]) -> list[str]:
    """The summary lines of a sweep's repeats answered by their key (each result's ``notes``, as
    :func:`keyed_repeats` wrote them): ``[]`` when none; else one line with the number of runs, then the distinct
    notes (at most 3)."""
    notes = [(r, n) for r in results for n in getattr(r, "notes", None) or () if ANSWERED_BY_KEY in n]
    if not notes:
        return []
    distinct = list(dict.fromkeys(n for _, n in notes))
    runs = len({id(r) for r, _ in notes})
    return [f"answered by key: {runs} run(s) repeated a keyed call that the ledger answered as a duplicate (the "
            "effect applied once: safe, passed)"] + [f"  {n}" for n in distinct[:3]]


@rule("target.single_live_process", "no step's effect is called by two processes alive at once")
def single_live_process(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    groups: dict[tuple[Any, ...], list[EffectCall]] = defaultdict(list)
    for call in run.calls:
        groups[step_of(call)].append(call)
    found = []
    for calls in groups.values():
        pairs = [(a, b) for i, a in enumerate(calls) for b in calls[i + 1:]
                 if a.pid != b.pid and (a.pid in b.live_others or b.pid in a.live_others)]
        if pairs:
            a, b = pairs[0]
            found.append(Failure("target.single_live_process",
                                 f"{a.effect} for {a.thread}@{a.node} called by pids {a.pid} and {b.pid} while both "
                                 "were alive: two processes ran one step at once", [line(a), line(b)]))
    return found


@rule("target.ends_within_budget", "each thread ends finished or waiting for a human within the budget; stuck quotes the engine")
def ends_within_budget(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    found = []
    if run.over_budget:
        found.append(Failure("target.ends_within_budget", f"the run did not end within {target.budget_s:g} s: "
                             f"{run.over_budget}"))
    for thread, status in sorted(run.threads.items()):
        if status["status"] == "stuck":
            found.append(Failure("target.ends_within_budget", f"thread {thread} is stuck: the engine raised "
                                 f"{status.get('error')}", [f"status {json.dumps(status.get('values'))[:300]}"]))
        elif status["status"] not in ("finished", "waiting"):
            found.append(Failure("target.ends_within_budget", f"thread {thread} ended {status['status']} "
                                 "(neither finished nor waiting for a human)"
                                 + (f": {status['error']}" if status.get("error") else "")))
    return found


@rule("target.durable_before_effect", "no effect is applied while the engine holds no checkpoint of its thread")
def durable_before_effect(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    bad = [c for c in run.calls if c.outcome == "applied" and c.durable is False]
    if not bad:
        return []
    return [Failure("target.durable_before_effect",
                    f"{len(bad)} effect(s) applied while the engine held no durable record of their thread "
                    f"(durability={run.durability}): a kill then loses the run but not the effect",
                    [line(c) for c in bad[:4]])]


@rule("target.thread_has_checkpoint", "a kill never leaves a thread whose effects were applied with no checkpoint "
                                      "at all (its start lost: the caller's retry repeats them)")
def thread_has_checkpoint(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per thread the driver found with no checkpoint at all after a kill (its start request lost:
    crashpoint resubmitted it, as the caller's retry would; a ``resubmit`` delivery) while effects of it had been
    applied by the killed process or an earlier one: the engine had not made the thread's start durable when its
    first step ran (LangGraph ``async``: the input checkpoint is written in the background while the first node runs),
    so the retry runs them again."""
    order = [p["pid"] for p in run.pids if p.get("pid") is not None]
    found = []
    for index, delivery in enumerate(run.deliveries):
        if delivery["kind"] != "resubmit":
            continue
        thread = delivery["thread"]
        kill = next((d for d in reversed(run.deliveries[:index]) if d["kind"] == "kill"), None)
        if kill is None or kill.get("pid") not in order:
            continue
        before = set(order[:order.index(kill["pid"]) + 1])
        applied = [c for c in run.calls if c.thread == thread and c.pid in before and c.outcome == "applied"]
        if applied:
            effects = ", ".join(dict.fromkeys(c.effect for c in applied))
            found.append(Failure("target.thread_has_checkpoint",
                                 f"thread {thread} had no checkpoint at all after the kill at {kill['crash_point']}, "
                                 f"though {len(applied)} of its effect call(s) were applied ({effects}): the engine had "
                                 f"not made the thread's start durable when its first step ran "
                                 f"(durability={run.durability}); its caller's retry (crashpoint resubmitted the start, "
                                 "as a caller would) runs them again",
                                 [line(c) for c in applied[:4]]))
    return found


@rule("target.approval_gate", "a gated effect is applied only while its approval's latest answer grants it (in a child "
      "workflow: its own thread's approval, else its nearest ancestor's, answered before the child started)")
def approval_gate(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    found = []
    for call in run.calls:
        node = target.gates.get(call.effect)
        if node is None or call.outcome != "applied":
            continue
        if call.thread is None:  # no approval can be matched with it: say so, never "no answer yet"
            found.append(Failure("target.approval_gate", f"{call.effect} applied where crashpoint could not place it (no "
                                 "workflow, node, step or activity of the engine ran in its thread, nor in the code "
                                 f"that started that thread): whether the approval of {node} had granted it cannot be "
                                 "told", [line(call)]))
            continue
        owner, mine, late_start = _gating_answers(run, call.thread, node, call.gseq)
        before = [d for d in mine if d.get("by") != LATE_BY]  # an answer after the deadline approves nothing
        late = " (an answer that arrived after the workflow moved on grants nothing)" if len(mine) > len(before) else ""
        if not before or not before[-1]["granted"]:
            state = ("no answer yet" if not before else "its latest answer denied it") + late
            if late_start and not before:
                state = (f"no answer when {call.thread} was started (it was started before the answer to {late_start}, "
                         "which gates nothing in a child workflow started before it)") + late
            of = "" if owner == call.thread else f" of {owner}"
            found.append(Failure("target.approval_gate", f"{call.effect} applied in {call.thread}"
                                 f"{_lineage(run, call.thread)} while the approval of {node}{of} had {state}",
                                 [line(call)]))
    return found


def _ancestry(run: TargetOutcome, thread: str) -> list[tuple[str, int | None]]:
    """``thread`` and its ancestors, nearest first, each with the latest ledger position (gseq) an answer to it may
    have to gate ``thread``: ``None`` for ``thread`` itself (any answer before the call), else the position when the
    engine was asked to start the first child on the way down (``TargetOutcome.parents``' ``after_gseq``; the
    smallest on the path: a child started before its parent's answer was not started by it). A cycle ends the walk."""
    chain: list[tuple[str, int | None]] = [(thread, None)]
    limit: int | None = None
    seen = {thread}
    while (link := run.parents.get(chain[-1][0])) is not None and link["parent"] not in seen:
        limit = link["after_gseq"] if limit is None else min(limit, link["after_gseq"])
        chain.append((link["parent"], limit))
        seen.add(link["parent"])
    return chain


def _gating_answers(run: TargetOutcome, thread: str, node: str,
                    gseq: int) -> tuple[str, list[dict[str, Any]], str | None]:
    """``(owner, its answers, late_start)``: the answers to the approval of ``node`` that gate a call at ``gseq`` in
    ``thread``, from the nearest of ``thread`` and its ancestors (:func:`_ancestry`) answered before the call and
    before the child on the way down was started (``owner``: that thread; ``thread`` and ``[]`` when none was);
    ``late_start``: the nearest ancestor answered before the call but only after its child was started, else
    ``None``."""
    late_start = None
    for owner, limit in _ancestry(run, thread):
        mine = [d for d in run.decisions if d["approval_id"] == f"{owner}@{node}" and d["gseq"] < gseq]
        if limit is not None and mine and late_start is None and all(d["gseq"] > limit for d in mine):
            late_start = owner
        mine = [d for d in mine if limit is None or d["gseq"] <= limit]
        if mine:
            return owner, mine, late_start
    return thread, [], late_start


def _lineage(run: TargetOutcome, thread: str) -> str:
    """`` (a child workflow of P, of Q)`` for a child workflow, ``""`` for a thread with no recorded parent."""
    chain = [t for t, _ in _ancestry(run, thread)[1:]]
    return f" (a child workflow of {', of '.join(chain)})" if chain else ""


def _same(want: Any, got: Any) -> bool:
    """``want == got`` as JSON values: a boolean equals only a boolean (Python's ``True == 1`` does not hold here),
    lists and mappings element by element; an int and a float of one value are one number."""
    if isinstance(want, bool) or isinstance(got, bool):
        return isinstance(want, bool) and isinstance(got, bool) and want == got
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(want) == len(got) and all(_same(a, b) for a, b in zip(want, got))
    if isinstance(want, dict) and isinstance(got, dict):
        return want.keys() == got.keys() and all(_same(v, got[k]) for k, v in want.items())
    return bool(want == got)


def _mismatch(want: Any, got: Any, path: str) -> list[str]:
    """Where ``got`` is not like ``want`` (``want``'s mappings a subset of ``got``'s, key by key; other values equal
    as JSON values, :func:`_same`): ``["values.result.status: expected 'denied', got 'refunded'"]``, ``[]`` when it
    matches."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            return [f"{path}: expected a mapping, got {json.dumps(got, default=repr)[:160]}"]
        return [m for k, v in want.items() for m in
                (_mismatch(v, got[k], f"{path}.{k}") if k in got else [f"{path}.{k}: expected "
                                                                       f"{json.dumps(v, default=repr)[:160]}, missing"])]
    if not _same(want, got):
        return [f"{path}: expected {json.dumps(want, default=repr)[:160]}, got {json.dumps(got, default=repr)[:160]}"]
    return []


@rule("target.expected_end", "each thread named in the case's expect ends in its status and with its values, golden run included",
      kind="expectation")
def expected_end(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    found = []
    for thread, want in sorted(target.expected(target.case(run.case)).items()):
        got = run.threads.get(thread, {"status": "missing"})
        wrong = ([f"status: expected {want['status']}, got {got['status']}"] if "status" in want
                 and got["status"] != want["status"] else [])
        wrong += _mismatch(want["values"], got.get("values") or {}, "values") if "values" in want else []
        if wrong:
            found.append(Failure("target.expected_end", f"thread {thread} did not end as expected: {wrong[0]}"
                                 + (f" (and {len(wrong) - 1} more)" if len(wrong) > 1 else ""), wrong[:4]))
    return found


@rule("target.key_reused", "an idempotency key is never used again with other arguments (a payments API refuses it)")
def key_reused(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per effect and key the ledger refused as a ``conflict``: the key had been used with other arguments
    (two orders sharing a key built from the customer and the day; a key that omits the amount). The effect's
    provider answers so by default (``crashpoint.effect(key_reuse="conflict")``); one that replays the first answer
    whatever the arguments is declared ``key_reuse="replay"`` and gives no finding."""
    found = []
    seen: set[tuple[str, str | None]] = set()
    for call in run.calls:
        if call.outcome != "conflict" or (call.effect, call.key) in seen:
            continue
        seen.add((call.effect, call.key))
        first = next((c for c in run.calls if c.effect == call.effect and c.key == call.key
                      and c.outcome in ("applied", "failed")), None)
        where = f" by {first.thread}@{first.node}" if first is not None else ""
        found.append(Failure(
            "target.key_reused",
            f"{call.effect}: key {call.key} was used{where} and again with other arguments by {call.thread}@{call.node}:"
            " a payments API refuses such a request (conflict), and one that answers the first answer instead applies "
            "nothing for the second; give each distinct request its own key (derived from what makes it distinct), or "
            "declare the provider's behaviour (crashpoint.effect(key_reuse=\"replay\"))",
            [f"{line(c)} args={json.dumps(c.args, sort_keys=True, default=str)[:200]}"
             for c in ([first] if first is not None else []) + [call]]))
    return found


def _request(call: EffectCall) -> str:
    """What a call asks for, its key aside: its arguments' JSON without the ones whose value is the key."""
    args = call.args if isinstance(call.args, dict) else {"args": call.args}
    return json.dumps({k: v for k, v in args.items() if call.key is None or str(v) != call.key}, sort_keys=True,
                      default=str)


@rule("target.fresh_key_repeat", "a node never repeats an applied call with the same arguments under a new key unless "
                                 "a kill explains it (a key made fresh per call cannot stop the repeat)")
def fresh_key_repeat(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per node run (thread, node, step) that applied one effect twice or more with the same arguments and
    different idempotency keys where no kill of the earlier call's process explains it: a retry after a lost answer
    (LangGraph's RetryPolicy, a Temporal activity's retry), or the node's re-run on resume after an ``interrupt()``,
    sent a new key, so the provider applied it again; judged on the golden run as on any other (the payments twice
    with no kill at all that ``differential.same_effects`` takes for the reference)."""
    killed = {p["pid"] for p in run.pids if p["rc"] == -9 and p["pid"] is not None}
    groups: dict[tuple[Any, ...], list[EffectCall]] = defaultdict(list)
    for call in run.calls:
        if call.key is not None and call.outcome == "applied":
            groups[(call.thread, call.node, call.step, call.effect, _request(call))].append(call)
    found = []
    for (thread, node, step, effect, _), calls in groups.items():
        fresh = [c for i, c in enumerate(calls) if i and c.key not in {e.key for e in calls[:i]}
                 and calls[i - 1].pid not in killed]
        if fresh:
            shown = [calls[0], *fresh]
            found.append(Failure(
                "target.fresh_key_repeat",
                f"{effect} applied {len(shown)} times with the same arguments in node {node} of {thread}"
                + (f" (step {step})" if step is not None else "") + f", each time under a new idempotency key "
                f"({', '.join(str(c.key) for c in shown[:3])}{', ...' if len(shown) > 3 else ''}), and no kill explains "
                "the repeat: a key made fresh per call (a UUID, the time, the attempt number) cannot let the provider "
                "recognise a retry; derive it from the workflow's state (the order, the step)",
                [line(c) for c in shown[:4]]))
    return found


@rule("target.expected_effects", "each effect an expect counts is applied that many times in its thread, golden run "
                                 "included", kind="expectation")
def expected_effects(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per thread and effect of the case's ``expect`` (else the target's) ``effects`` (``issue_refund: 1``)
    applied another number of times in that thread: calls of the effect in the thread's ledger rows with outcome
    ``applied`` (a ``lost`` answer counts: the effect happened; a ``duplicate`` its key answered, or a ``failed`` call
    with nothing applied, does not). Judged on every run, the golden run included, so a golden run that pays twice
    fails on its own, where ``differential.same_effects`` takes it for the reference."""
    found = []
    for thread, want in sorted(target.expected(target.case(run.case)).items()):
        for effect, times in sorted((want.get("effects") or {}).items()):
            applied = [c for c in run.calls if c.thread == thread and c.effect == effect and c.outcome == "applied"]
            if len(applied) != times:
                others = [c for c in run.calls if c.thread == thread and c.effect == effect and c.outcome != "applied"]
                keys = sorted({str(c.key) for c in applied})
                found.append(Failure(
                    "target.expected_effects",
                    f"thread {thread}: {effect} applied {len(applied)} time(s), expected {times}"
                    + (f" (keys: {', '.join(keys)})" if len(applied) > 1 else "")
                    + (f"; {len(others)} more call(s) applied nothing ("
                       + ", ".join(sorted({c.outcome for c in others})) + ")" if others else ""),
                    [line(c) for c in (applied or others)[:4]]))
    return found


def invariants(target: Target) -> dict[str, Callable[[RunView], Any]]:
    """The target's invariants: those named in ``invariants:`` (``module:attr``) and every other check registered
    with :func:`crashpoint.invariant` by those modules (imported with ``pythonpath``); see
    :func:`crashpoint.api.resolve_invariants`.

    Raises:
        crashpoint.api.InvariantClash: two different checks share a name (validation refuses such a target first).
    """
    for folder in reversed(target.pythonpath):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    return resolve_invariants(target.invariants)


def strict_failure(name: str, verdict: Any) -> str | None:
    """What invariant ``name`` returning ``verdict`` says: ``None`` (it passed) for ``None`` or ``True`` only (the
    objects themselves: ``numpy.True_`` and ``1`` are not ``True``); else the failure's message: the text of a
    non-empty string, and for any other value (``False``, ``numpy.False_``, ``0``, ``""``, an object) what it returned
    and that only ``None`` and ``True`` pass."""
    if verdict is None or verdict is True:
        return None
    if isinstance(verdict, str) and verdict:
        return verdict
    shown = repr(verdict)
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    kind = type(verdict)
    kind_name = kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
    return (f"invariant {name} failed: it returned {shown} ({kind_name}); a check passes only by returning None or "
            "True (or by not raising), and fails by assert, by returning False or a message")


def view(run: TargetOutcome) -> RunView:
    """What an invariant sees of ``run``."""
    return RunView(calls=tuple(run.calls), final={t: s.get("values") for t, s in run.threads.items()},
                   status={t: s["status"] for t, s in run.threads.items()}, decisions=tuple(run.decisions),
                   crash_point=run.crash_point, notes=tuple(run.notes))


def judge(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> tuple[list[Failure], list[str]]:
    """Every target rule (through the project's registry) and invariant on ``run``: ``(failures, unknown)``,
    ``unknown`` naming the rules and invariants that raised instead of judging."""
    refs = (("golden", golden),) if golden is not None else ()
    judgement = registry.evaluate(registry.RuleContext(case=None, pack=target, outcome=run, golden=golden,  # type: ignore[arg-type]
                                                       references=refs))
    # a thread that stopped at its injected fault
    failures, stops = fault_stops.apply(judgement.findings, run, _retry_hint(target))
    run.notes.extend(n for n in stops if n not in run.notes)
    unknown = [f"{rule_id}: {exc}" for rule_id, exc in judgement.broken]
    try:  # repeats passed because the ledger answered them by key: said in the run's notes
        run.notes.extend(n for n in keyed_repeats(target, run) if n not in run.notes)
    except Exception as exc:  # noqa: BLE001 - a note is never worth a verdict; repeats_explained judged the same calls
        unknown.append(f"target.repeats_explained: its notes could not be made: {type(exc).__name__}: {exc}")
    seen = view(run)
    try:
        with guarded():  # a team module that ends the process on import
            checks = invariants(target)
    except BaseException as exc:  # noqa: BLE001 - the team's module raised on import: no check could judge
        unknown.append(f"target.invariant: the target's invariants could not be loaded: {type(exc).__name__}: {exc}")
        checks = {}
    for name, check in checks.items():
        rule_id = f"target.invariant:{name}"
        try:
            with guarded():  # os._exit / os.abort in a check: unknown, not the end of crashpoint's process
                verdict = check(seen)
        except AssertionError as exc:
            failures.append(Failure(rule_id, str(exc) or f"invariant {name} failed (an assert)"))
            continue
        except BaseException as exc:  # noqa: BLE001 - SystemExit, KeyboardInterrupt, pytest's skip/fail: unknown
            unknown.append(f"{rule_id}: {type(exc).__name__}: {exc}")
            continue
        failed = strict_failure(name, verdict)
        if failed is not None:
            failures.append(Failure(rule_id, failed))
    return failures, unknown


from crashpoint.harness.judge import fault_stops  # noqa: E402
from crashpoint.harness.judge.team_code import guarded  # noqa: E402
from crashpoint.harness.judge import target_scope  # noqa: E402,F401 - registers target.no_effect
from crashpoint.harness.judge import target_compensation  # noqa: E402,F401 - registers target.compensated, ...
from crashpoint.harness.engines.base import engine_rules  # noqa: E402 - each engine module's own rules, after these

RULES.update(engine_rules())
