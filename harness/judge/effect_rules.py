"""The rules that hold for packs and targets alike: one property, one rule, whichever subject ran.

* ``side_effects.at_most_once``: an effect is applied at most once per identity. The identity of an applied call
  is its idempotency key; a call with no key is identified by its thread, node and argument digest (so a repeat
  the downstream cannot recognise is caught); an effect its subject declares single per run (every effect a pack
  names, such as ``issue_refund``: a refund workflow issues one refund) is identified by its thread alone, whatever
  its key (a new key on a retry is a second refund).
* ``differential.same_end``: a crashed (or faulted and masked) run ends as the run it must end like (the golden
  run, the fault-free run): each thread (a pack's workflow, a target's thread) in the same status, with the same
  stop reason (a pack's) or state values (a target's).
* ``differential.same_effects``: a crashed (or faulted and masked) run applies each effect in each thread as often
  as that run; for a pack, with the same idempotency keys and arguments too (the reference engine's runs repeat
  exactly; a team's code may put a provider-made id or a timestamp in its arguments).

Each reads the run through :func:`calls` and :func:`ends`, the one view both subjects' outcomes give; before these,
each property was written twice (``side_effects.at_most_once``, ``differential.same_end``,
``differential.same_effects`` beside the pack's three).
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Collection

from crashpoint.harness.judge import stable
from crashpoint.harness.model.rules import Finding, RuleContext, found, rule

BOTH = ("pack", "target")


@dataclass(frozen=True)
class Call:
    """One effect call of a run, as the shared rules read it, from a pack's ledger or a target's effect ledger.

    Attributes:
        effect: the effect's name (a pack's tool, ``refunds.issueRefund``; a target's effect, ``issue_refund``).
        key: its idempotency key, or ``None``. ``args``: its arguments as JSON text (sorted keys).
        digest: a target call's argument digest (a pack's: ``args``). ``outcome``: ``applied`` | ``duplicate`` |
        ``failed`` | ...
        thread / node: where it ran (a pack's workflow id and task; a target's thread and node).
        line: the ledger line that shows it (evidence).
    """

    effect: str
    key: str | None
    args: str
    digest: str
    outcome: str
    thread: str | None
    node: str | None
    line: str


def calls(ctx: RuleContext) -> list[Call]:
    """Every effect call of ``ctx``'s run, in ledger order (:class:`Call`)."""
    out = ctx.outcome
    if ctx.kind == "target":
        from crashpoint.harness.judge.target_rules import line

        return [Call(c.effect, c.key, json.dumps(c.args, sort_keys=True, default=str), c.digest, c.outcome, c.thread,
                     c.node, line(c)) for c in out.calls]
    from crashpoint.harness.judge.pack_rules import call_line

    return [Call(c["tool"], c["idempotency_key"], json.dumps(c["args"], sort_keys=True, default=str),
                 json.dumps(c["args"], sort_keys=True, default=str), c["outcome"], out.workflow_id, c.get("task"),
                 call_line(c)) for c in out.calls]


def single_effects(ctx: RuleContext) -> dict[str, str]:
    """The effects ``ctx``'s subject declares single per run, as effect (tool) -> its name: every effect a pack
    names (``refunds.issueRefund`` -> ``issue_refund``); none for a target."""
    if ctx.kind == "target" or ctx.pack is None:
        return {}
    return {info["tool"]: name for name, info in ctx.pack.effects.items()}


@rule("side_effects.at_most_once", subjects=BOTH,
      description="an effect is applied at most once per idempotency key (no key: per thread, node and arguments; "
                  "an effect a pack names: once per run)")
def at_most_once(ctx: RuleContext) -> list[Finding]:
    single = single_effects(ctx)
    groups: dict[tuple[Any, ...], list[Call]] = defaultdict(list)
    for call in calls(ctx):
        if call.outcome != "applied":
            continue
        if call.effect in single:
            ident: tuple[Any, ...] = ("single", call.thread, call.effect)
        elif call.key is not None:
            ident = ("key", call.effect, call.key)
        else:
            ident = ("args", call.thread, call.node, call.effect, call.digest)
        groups[ident].append(call)
    findings = []
    for ident, done in groups.items():
        if len(done) < 2:
            continue
        first = done[0]
        if ident[0] == "single":
            message = (f"effect {single[first.effect]} ({first.effect}) applied {len(done)} times; at most once is "
                       "allowed")
            lines = [c.line for c in calls(ctx) if c.effect == first.effect]
        elif ident[0] == "key":
            message, lines = f"{first.effect} applied {len(done)} times with key {first.key!r}", [c.line for c in done]
        else:
            message = (f"{first.effect} applied {len(done)} times with no idempotency key (same thread, node, "
                       "arguments); give it a key derived from the workflow's state so the downstream can recognise "
                       "the repeat")
            lines = [c.line for c in done]
        findings.append(found(message, lines[:4]))
    return findings


def ends(ctx: RuleContext, outcome: Any) -> dict[str, dict[str, Any]]:
    """How each thread of ``outcome`` ended: thread -> ``{"status", "stop_reason"}`` (a pack's workflow) or
    ``{"status", "values"}`` (a target's thread)."""
    if ctx.kind == "target":
        return {t: {"status": s.get("status"), "values": s.get("values")} for t, s in outcome.threads.items()}
    return {outcome.workflow_id: {"status": outcome.status, "stop_reason": outcome.stop_reason}}


def _differs(want: dict[str, Any], got: dict[str, Any], left_out: Collection[str] = ()) -> list[str]:
    """The state values (top-level keys) in which two target thread ends differ, at a path not ``left_out``
    (:func:`crashpoint.harness.judge.stable.covered`)."""
    mine, theirs = got.get("values") or {}, want.get("values") or {}
    paths = [p for p in stable.differing(theirs, mine) if not stable.covered(p, left_out)]
    return list(dict.fromkeys(p.split(".", 1)[0] if p != stable.WHOLE and isinstance(mine, dict)
                              and isinstance(theirs, dict) else stable.WHOLE for p in paths))


@rule("differential.same_end", subjects=BOTH,
      description="a crashed (or faulted, masked) run ends as the run it must end like (golden or fault-free): each "
                  "thread in its status, with its stop reason (pack) or state values (target)")
def same_end(ctx: RuleContext) -> list[Finding]:
    findings = []
    mine = ends(ctx, ctx.outcome)
    for label, ref in ctx.references:
        for thread, want in sorted(ends(ctx, ref).items()):
            got = mine.get(thread, {"status": "missing"})
            if ctx.kind == "pack":
                if (got["status"], got.get("stop_reason")) != (want["status"], want["stop_reason"]):
                    findings.append(found(f"{label} run ended {want['status']} ({want['stop_reason']}); after the "
                                          f"crash the run ended {got['status']} ({got.get('stop_reason')})"))
                continue
            left_out = stable.value_paths_left_out(ctx.pack, ref, thread)
            if stable.WHOLE in left_out:  # two fault-free runs ended this thread differently: nothing to compare
                continue
            diff = _differs(want, got, left_out)
            if got["status"] != want["status"] or diff:
                values_of = (lambda end, k: end.get("values") if k == stable.WHOLE
                             else (end.get("values") or {}).get(k))
                findings.append(found(
                    f"thread {thread} ended {got['status']} where the {label} run ended {want['status']}"
                    + (f"; state differs in {', '.join(diff)}" if diff else ""),
                    [f"{k}: {label} {json.dumps(values_of(want, k), default=str)[:160]} / this run "
                     f"{json.dumps(values_of(got, k), default=str)[:160]}" for k in diff[:3]]))
    return findings


def _signature(ctx: RuleContext, outcome: Any) -> Counter[tuple[Any, ...]]:
    """The applied effects of ``outcome`` as a multiset: ``(thread, effect)`` for a target's run, ``(effect, key,
    arguments)`` for a pack's."""
    view = RuleContext(ctx.case, ctx.pack, outcome)
    applied = [c for c in calls(view) if c.outcome == "applied"]
    if ctx.kind == "target":
        return stable.applied(applied)
    return Counter((c.effect, c.key, c.args) for c in applied)


@rule("differential.same_effects", subjects=BOTH,
      description="a crashed (or faulted, masked) run applies each effect as often as the run it must end like "
                  "(pack: with the same keys and arguments)")
def same_effects(ctx: RuleContext) -> list[Finding]:
    findings = []
    for label, ref in ctx.references:
        mine, gold = _signature(ctx, ctx.outcome), _signature(ctx, ref)
        if mine == gold:
            continue
        if ctx.kind == "pack":
            extra = sorted(f"{t} key={k} args={a} x{n}" for (t, k, a), n in (mine - gold).items())
            lost = sorted(f"{t} key={k} args={a} x{n}" for (t, k, a), n in (gold - mine).items())
            findings.append(found(f"effects differ from the {label} run: extra {extra}, missing {lost}"))
            continue
        for thread, effect in sorted(set(mine) | set(gold), key=str):
            if stable.effect_left_out(ref, thread, effect):  # two fault-free runs applied it differently often
                continue
            if mine[(thread, effect)] != gold[(thread, effect)]:
                findings.append(found(
                    f"{effect} applied {mine[(thread, effect)]} time(s) in {thread}; the {label} run applied it "
                    f"{gold[(thread, effect)]} time(s)",
                    [c.line for c in calls(ctx) if c.thread == thread and c.effect == effect][:4]))
    return findings


__all__ = ["Call", "calls", "ends", "at_most_once", "same_end", "same_effects"]
