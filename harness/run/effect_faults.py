"""Effect faults in a target's default sweep (issue 28, items 7 and 9): besides the kills, effect calls the golden
run applied fail, in the same process, in the two ways a real API fails a call:

- ``timeout`` at each effect's first application: nothing applied, the call raises (:class:`crashpoint.EffectFault`,
  retryable). Code that swallows the error and reports success is caught (``target.expected_effects``,
  ``differential.same_effects``);
- ``lost_response`` at every application (one run each; interchangeable threads sampled as their crash points are):
  applied, and the answer lost (the call raises as a connection reset would). The engine's own
  retry and resume logic then runs at that effect: a retry under the same key is answered ``duplicate``, a fresh key
  pays twice (``side_effects.at_most_once``, ``target.fresh_key_repeat``), stored answers applied to other rounds
  show in the end state.

Each is a crash spec part ``"fault:EFFECT#N=OUTCOME"`` (:func:`crashpoint.harness.process.crashpoints.fault_part`),
so a run prints its one-line repro like any crash run and ``--crash-point`` takes it. Both outcomes are transient:
a correct target masks them (it retries them, keyed), so each such run is judged against the golden run, as
``crashpoint search`` judges a generated transient fault.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Mapping, Sequence

from crashpoint.harness.load.target import TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.process import crashpoints

#: Outcomes of calls that take no scripted outcome (answered from the ledger by their key): not counted in ``N``.
UNSCRIPTED = ("duplicate", "conflict")
#: What the first application of each effect gets (item 9: nothing applied, the call raises).
ONCE = "timeout"
#: What every application gets, one run each (item 7: applied, its answer lost, the call raises).
EVERY = "lost_response"


def specs(golden: TargetOutcome, case: TargetCase, roles: Mapping[str, str] | None = None) -> list[str]:
    """The crash specs of a default sweep's effect faults for a unit whose golden run is ``golden``, in ledger order:
    :data:`ONCE` at each effect's first application, :data:`EVERY` at each application, each aimed at that call's
    number among the effect's calls. An application of an interchangeable thread (same ``roles`` value:
    :func:`crashpoint.harness.run.point_classes.thread_roles`) at the same place (the effect's n-th application in its
    thread) as one already faulted is left out, as its crash points are; an effect ``case`` faults itself is left to
    the case. ``N`` counts the effect's calls that took a scripted outcome (a call its key answered, ``duplicate``
    or ``conflict``, takes none: :data:`UNSCRIPTED`)."""
    own = {f["tool"] for f in case.faults if f.get("kind") == "tool"}
    roles = roles or {}
    calls: Counter[str] = Counter()
    in_thread: Counter[tuple[str | None, str]] = Counter()
    out: list[str] = []
    timed_out: set[str] = set()
    places: set[tuple[str | None, str, int]] = set()
    for call in golden.calls:
        if call.outcome in UNSCRIPTED:
            continue
        name, thread = call.effect, call.thread
        calls[name] += 1
        if name in own or call.outcome != "applied":
            continue
        in_thread[(thread, name)] += 1
        if name not in timed_out:
            timed_out.add(name)
            out.append(crashpoints.fault_part(name, calls[name], ONCE))
        place = (roles.get(thread, thread) if thread is not None else None, name, in_thread[(thread, name)])
        if place not in places:
            places.add(place)
            out.append(crashpoints.fault_part(name, calls[name], EVERY))
    return out


def with_faults(case: TargetCase, faults: Sequence[tuple[str, int, str]]) -> TargetCase:
    """``case`` with a ``tool`` fault (:mod:`crashpoint.harness.faults.kinds.tool`) after its own for each
    ``(effect, call, outcome)`` of a crash spec (:attr:`~crashpoint.harness.process.crashpoints.Spec.faults`), named
    as before (its runs stay the unit's)."""
    added: list[dict[str, Any]] = [{"kind": "tool", "tool": effect, "call": call, "outcome": outcome, "times": 1}
                                   for effect, call, outcome in faults]
    return case.with_faults([*case.faults, *added])


def fired(out: Any, faults: Sequence[tuple[str, int, str]]) -> bool:
    """Whether every fault of a spec fired in the run whose outcome is ``out`` (a fault none of whose calls was made
    is in its ``faults_missed`` as ``"EFFECT OUTCOME"``); ``False`` for a run that broke (no outcome)."""
    if not isinstance(out, TargetOutcome):
        return False
    missed = set(out.faults_missed)
    return not any(f"{effect} {outcome}" in missed for effect, _, outcome in faults)
