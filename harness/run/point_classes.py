"""Crash-point classes: the crash points of a golden run that are the same code position of interchangeable threads
(workflows), and which of their instances a sweep kills at.

A target's golden run with twenty queued workflows passes each step's points twenty times, once per workflow
(``step:refund-1001@draft``, ``step:refund-1002@draft``, ...). Points of one class share:

* the kind (``step``, ``before_result``, ``after_effect``, ...) and the name after the thread (the node or step, the
  effect, the kind of durable write: ``draft``, ``PENDING``);
* the occurrence within their thread (a node's second visit, ``node:T@approve#2``, is a class of its own);
* for an effect point (``after_effect:draft_refund#2``, whose id names no thread), the node and the thread that
  called it, read from the golden run's effect ledger;
* the thread's role: input threads are interchangeable when their ``inputs`` entries differ only in ``thread`` and
  ``input`` (a ``queue`` or any other field makes a role of its own) and the case expects the same status of them;
  a thread the team's code started itself (a child workflow) has the role of its name with its digits dropped.

A point whose thread is unknown (no thread in its id and none in the ledger) is a class of its own: nothing is
merged on a guess. A class is **racy** when an instance was passed while another thread was running (another
thread's point just before it and another just after it, in its thread's order: a kill's outcome there can depend on
the interleaving), and a **recovery** class when its kind is one
of the engine's recovery kinds (:attr:`~crashpoint.harness.engines.base.Engine.recovery_kinds`: where a recovery
decides what to redo). :func:`sample` covers every class, a racy or recovery class with :data:`RACY_SAMPLES`
instances (spread: its first and its last), any other class with one.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

#: Instances a racy or a recovery class is killed at (each other class: 1).
RACY_SAMPLES = 2
#: ``KIND:THREAD@NAME`` (a thread's point), else ``KIND:NAME`` (an effect point, or a pack's point); ``#N`` after.
_POINT = re.compile(r"^(?P<kind>[A-Za-z_]+):(?:(?P<thread>[^@#]+)@)?(?P<name>.+?)(?:#(?P<n>\d+))?$")
_EFFECT_KINDS = ("before_effect", "after_effect")


@dataclass
class PointClass:
    """One class of crash points.

    Attributes:
        key: what the instances share, readable: ``after_effect:draft_refund in draft (refund-*)``.
        points: the instances' crash point ids, in golden-run order.
        racy / recovery: see the module docstring. ``covered``: the instances a sampled sweep kills at (the sample).
        every: the sweep kills at every instance (``--points all``), not only the sample.
    """

    key: str
    points: list[str]
    racy: bool = False
    recovery: bool = False
    covered: list[str] = field(default_factory=list)
    every: bool = False

    @property
    def wanted(self) -> int:
        """How many instances a sampled sweep kills at: :data:`RACY_SAMPLES` for a racy or recovery class, else 1
        (never more than it has)."""
        return min(len(self.points), RACY_SAMPLES if self.racy or self.recovery else 1)

    def to_dict(self, left_out_by_budget: Iterable[str] = ()) -> dict[str, Any]:
        """The JSON form: ``{"class", "instances", "sample", "covered", "left_out", "budget_cut", "racy",
        "recovery"}``: ``sample`` the instances a sampled sweep kills at, ``covered`` those this sweep killed at,
        ``left_out`` the others (those a time budget cut are also in ``budget_cut``)."""
        cut = [p for p in self.points if p in set(left_out_by_budget)]
        ran = [p for p in (self.points if self.every else self.covered) if p not in set(cut)]
        return {"class": self.key, "instances": len(self.points), "sample": list(self.covered), "covered": ran,
                "left_out": [p for p in self.points if p not in set(ran)], "budget_cut": cut,
                "racy": self.racy, "recovery": self.recovery}


def parse(point: str) -> tuple[str, str | None, str, int]:
    """``(kind, thread, name, occurrence)`` of a crash point id: ``step:refund-1001@draft#2`` ->
    ``("step", "refund-1001", "draft", 2)``; ``after_effect:issue_refund`` -> ``("after_effect", None,
    "issue_refund", 1)``. An id of another form is its own kind: ``(point, None, "", 1)``."""
    m = _POINT.match(point)
    if m is None:
        return point, None, "", 1
    return m["kind"], m["thread"], m["name"], int(m["n"] or 1)


def effect_places(points: Sequence[str], calls: Sequence[Any]) -> dict[str, tuple[str | None, str | None]]:
    """Effect point id -> ``(thread, node)`` of its call, for every effect whose calls the golden run's ledger holds
    one for one: the N-th ``before_effect:NAME`` (and ``after_effect:NAME``) is the N-th call of ``NAME`` that was
    not a repeated key's (those pass no crash point). An effect kind whose count differs from the calls' gets nothing
    (unknown). (Two threads passing ``before_effect`` at once may write their ledger rows in the other order: their
    points then swap threads, which changes nothing when the threads are interchangeable.)"""
    made: dict[str, list[Any]] = {}
    for call in sorted(calls, key=lambda c: c.seq):
        if call.outcome != "duplicate":
            made.setdefault(call.effect, []).append(call)
    passed = Counter((kind, name) for kind, thread, name, _ in map(parse, points)
                     if kind in _EFFECT_KINDS and thread is None)
    places: dict[str, tuple[str | None, str | None]] = {}
    for point in points:
        kind, thread, name, n = parse(point)
        if kind not in _EFFECT_KINDS or thread is not None:
            continue
        mine = made.get(name, [])
        if passed[(kind, name)] != len(mine):  # a call that raised past the ledger, or one that failed before
            continue                            # its after_effect: which call is which is not known
        places[point] = (mine[n - 1].thread, mine[n - 1].node)
    return places


def thread_roles(inputs: Sequence[Mapping[str, Any]], expect: Mapping[str, Any] | None) -> dict[str, str]:
    """Input thread -> its role (see the module docstring): the JSON of its ``inputs`` entry without ``thread`` and
    ``input``, with the status the case expects of it."""
    roles = {}
    for entry in inputs:
        rest = {k: v for k, v in entry.items() if k not in ("thread", "input")}
        rest["expect"] = ((expect or {}).get(entry["thread"]) or {}).get("status")
        roles[entry["thread"]] = json.dumps(rest, sort_keys=True, default=str)
    return roles


def classes(points: Sequence[str], *, roles: Mapping[str, str] | None = None, calls: Sequence[Any] = (),
            recovery_kinds: Sequence[str] = ()) -> list[PointClass]:
    """The classes of a golden run's crash points (``points``, in order), in the order of their first instance.

    Args:
        roles: input thread -> role (:func:`thread_roles`); ``None``: no thread is interchangeable with another (every
            point its own class: a pack's sweep).
        calls: the golden run's effect calls (:class:`crashpoint.api.EffectCall`), to place effect points.
        recovery_kinds: the engine's recovery kinds (prefixes such as ``"step:"``).
    """
    places = effect_places(points, calls) if roles is not None else {}
    threads: list[str | None] = []
    keys: list[tuple[Any, ...]] = []
    seen: Counter[tuple[Any, ...]] = Counter()
    for point in points:
        kind, thread, name, n = parse(point)
        node = None
        if thread is None and point in places:
            thread, node = places[point]
        threads.append(thread)
        if roles is None or thread is None:
            keys.append(("own", point))
            continue
        role = roles.get(thread) or "child:" + re.sub(r"\d+", "N", thread)
        base = (kind, role, name, node)
        seen[base + (thread,)] += 1  # the occurrence within the thread, whatever the id's global #N
        keys.append(base + (seen[base + (thread,)],))
    racy = _interleaved(threads)
    by_key: dict[tuple[Any, ...], PointClass] = {}
    for i, (point, key) in enumerate(zip(points, keys)):
        if key not in by_key:
            by_key[key] = PointClass(_label(point, key, threads[i]), [],
                                     recovery=any(point.startswith(k) for k in recovery_kinds))
        c = by_key[key]
        c.points.append(point)
        c.racy = c.racy or i in racy
    return list(by_key.values())


def _interleaved(threads: Sequence[str | None]) -> set[int]:
    """Indexes of the points passed while another thread was running: another thread passed a point between this
    one and its thread's previous point, and another between this one and its thread's next point (threads that
    run one after the other, or one that waits for a human while others run, are not interleaved)."""
    mine: dict[str, list[int]] = {}
    for i, t in enumerate(threads):
        if t is not None:
            mine.setdefault(t, []).append(i)
    out = set()
    for t, at in mine.items():
        for k in range(1, len(at) - 1):
            before = any(threads[j] not in (None, t) for j in range(at[k - 1] + 1, at[k]))
            after = any(threads[j] not in (None, t) for j in range(at[k] + 1, at[k + 1]))
            if before and after:
                out.add(at[k])
    return out


def _label(point: str, key: tuple[Any, ...], thread: str | None) -> str:
    if key[0] == "own":
        return point
    kind, _, name, node = key[:4]
    where = f" in {node}" if node else ""
    again = f" (visit {key[-1]})" if key[-1] > 1 else ""
    return f"{kind}:{name}{where}{again} of {re.sub(r'[0-9]+', '*', thread or '')}"


def sample(found: Sequence[PointClass]) -> list[PointClass]:
    """Set each class's ``covered``: its :attr:`PointClass.wanted` instances, spread over it (one: its first; two:
    its first and its last). Returns ``found``."""
    for c in found:
        k, n = c.wanted, len(c.points)
        c.covered = [c.points[0]] if k == 1 else list(dict.fromkeys(c.points[round(j * (n - 1) / (k - 1))]
                                                                      for j in range(k)))
    return list(found)


def plan_order(found: Sequence[PointClass]) -> list[tuple[str, str]]:
    """The covered instances in the order a sweep on a time budget runs them, each with why: every class's first
    instance (``"class"``), then the further instances of racy classes (``"racy"``), then those of recovery classes
    (``"recovery"``)."""
    first = [(c.covered[0], "class") for c in found if c.covered]
    racy = [(p, "racy") for c in found if c.racy for p in c.covered[1:]]
    rest = [(p, "recovery") for c in found if not c.racy for p in c.covered[1:]]
    return first + racy + rest
