"""What the golden comparison of a target's run may look at: what two fault-free runs of the case agree on, less the
target file's ``ignore:`` paths.

A team's state may hold values that legitimately differ from one run to the next (a timestamp, a generated id, a
model's words), and a workflow may call a tool a varying number of times (an agent's loop). A crashed run that
differs from its golden run there has not lost or repeated anything: the two fault-free runs differ as much.
So the golden run of every target case is made twice (:func:`crashpoint.harness.run.target_sweep.run_one`), and
``differential.same_end`` and ``differential.same_effects`` leave out what the two disagree on
(:func:`unstable`), as well as the paths the target file names under ``ignore:``; the golden run's notes name
what was left out, and so does the sweep's summary (:func:`left_out_summary`). Rules that need no reference run
(at most once per key, the approval gate, ``expect:``) judge everything.

Paths are dotted, into a thread's final state values (``receipt.created_at``; a DBOS workflow's output is under
``output``, as in ``expect.values``); a path leaves out everything under it.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Iterable

#: The path that stands for a thread's whole state (its values are not a mapping).
WHOLE = "(the whole state)"
#: How a golden run's note on what its comparison leaves out begins (:func:`left_out_summary` finds them by it).
LEFT_OUT = "left out of the golden comparison"


def differing(a: Any, b: Any, prefix: str = "") -> list[str]:
    """The dotted paths at which ``a`` and ``b`` differ, as deep as both are mappings (a key only one has is a path;
    a list is compared whole): ``[]`` when equal; ``[WHOLE]`` when they differ at the top and are not both
    mappings."""
    if isinstance(a, dict) and isinstance(b, dict):
        paths: list[str] = []
        for key in sorted(set(a) | set(b), key=str):
            path = f"{prefix}.{key}" if prefix else str(key)
            if key not in a or key not in b:
                paths.append(path)
            else:
                paths.extend(differing(a[key], b[key], path))
        return paths
    return [] if a == b else [prefix or WHOLE]


def covered(path: str, left_out: Iterable[str]) -> bool:
    """``True`` when ``path`` is one of ``left_out`` or under one (``a.b.c`` is under ``a.b``); everything is under
    :data:`WHOLE`."""
    return any(path == p or p == WHOLE or path.startswith(p + ".") for p in left_out)


def applied(calls: Any) -> Counter[tuple[str, str]]:
    """How often each effect was applied in each thread: ``Counter({(thread, effect): n})`` of the ``applied`` calls
    among ``calls`` (a target run's effect calls, :class:`~crashpoint.api.EffectCall`), the multiset
    ``differential.same_effects`` compares for a target."""
    return Counter((c.thread, c.effect) for c in calls if c.outcome == "applied")


def unstable(first: Any, second: Any) -> dict[str, Any]:
    """What two fault-free runs (:class:`~crashpoint.harness.model.outcomes.TargetOutcome`) of one case disagree on:
    ``{"status": [THREAD], "values": {THREAD: [PATH]}, "effects": [[THREAD, EFFECT]]}``, each part present only
    when not empty (``{}``: they agree). A thread one of them lacks, or whose status differs, is in ``status`` (its
    whole end is left out); ``effects`` are the (thread, effect) pairs applied a different number of times."""
    status, values = [], {}
    a, b = first.threads, second.threads
    for thread in sorted(set(a) | set(b)):
        if thread not in a or thread not in b or a[thread].get("status") != b[thread].get("status"):
            status.append(thread)
            continue
        paths = differing(a[thread].get("values"), b[thread].get("values"))
        if paths:
            values[thread] = paths
    ca, cb = applied(getattr(first, "calls", ())), applied(getattr(second, "calls", ()))
    effects = [list(k) for k in sorted(set(ca) | set(cb)) if ca[k] != cb[k]]
    found: dict[str, Any] = {}
    if status:
        found["status"] = status
    if values:
        found["values"] = values
    if effects:
        found["effects"] = effects
    return found


def value_paths_left_out(target: Any, reference: Any, thread: str) -> list[str]:
    """The state paths of ``thread`` the comparison with ``reference`` (a golden or fault-free run) leaves out: the
    target's ``ignore:`` paths, then those the two fault-free runs disagreed on (:data:`WHOLE` when its status
    did)."""
    seen = getattr(reference, "unstable", None) or {}
    if thread in seen.get("status", ()):
        return [WHOLE]
    return list(dict.fromkeys([*getattr(target, "ignore", ()), *seen.get("values", {}).get(thread, ())]))


def effect_left_out(reference: Any, thread: str, effect: str) -> bool:
    """``True`` when the two fault-free runs applied ``effect`` in ``thread`` a different number of times (or
    ended the thread differently): its count cannot be compared."""
    seen = getattr(reference, "unstable", None) or {}
    return [thread, effect] in seen.get("effects", []) or thread in seen.get("status", ())


def notes(target: Any, found: dict[str, Any]) -> list[str]:
    """The golden run's notes on what its comparison leaves out (``[]``: nothing), each beginning
    :data:`LEFT_OUT`: the paths and effects the two fault-free runs disagreed on, and the ``ignore:`` paths."""
    lines = []
    for thread in found.get("status", ()):
        lines.append(f"{LEFT_OUT}: thread {thread}'s end (its status differs between two fault-free runs)")
    for thread, paths in sorted(found.get("values", {}).items()):
        shown = ", ".join(paths[:6]) + (f" and {len(paths) - 6} more" if len(paths) > 6 else "")
        lines.append(f"{LEFT_OUT}: thread {thread} state {shown} (differs between two fault-free runs)")
    for thread, effect in found.get("effects", ()):
        lines.append(f"{LEFT_OUT}: how often {effect} is applied in thread {thread} (differs between two "
                     "fault-free runs)")
    ignored = list(getattr(target, "ignore", ()))
    if ignored:
        lines.append(f"{LEFT_OUT}: state {', '.join(ignored)} in every thread (ignore: in the target file)")
    return lines


def left_out_summary(results: Iterable[Any]) -> list[str]:
    """The sweep summary's lines on what golden comparisons left out (each golden run's :func:`notes`, once each,
    at most 6, with the case), ``[]`` when nothing was."""
    lines: dict[str, None] = {}
    for r in results:
        if getattr(r, "crash_point", None) not in (None, "none"):
            continue
        for n in getattr(r, "notes", None) or ():
            if n.startswith(LEFT_OUT):
                lines[f"  {r.case_id}: {n[len(LEFT_OUT) + 2:]}"] = None
    if not lines:
        return []
    shown = list(lines)
    return ([f"{LEFT_OUT} (what two fault-free runs disagree on, and ignore: paths; every other rule judges it):"]
            + shown[:6] + ([f"  and {len(shown) - 6} more"] if len(shown) > 6 else []))


__all__ = ["WHOLE", "LEFT_OUT", "differing", "covered", "unstable", "value_paths_left_out", "effect_left_out",
           "notes", "left_out_summary"]
