"""Effect faults in a target's default sweep (issue 28, items 7 and 9): besides the kills, each effect the golden run
applied fails once, in the same process, in the two ways a real API fails a call:

- ``timeout``: nothing applied, the call raises (:class:`crashpoint.EffectFault`, retryable). Code that swallows
  the error and reports success is caught (``target.expected_effects``, ``differential.same_effects``);
- ``lost_response``: applied, and the answer lost (the call raises as a connection reset would). The engine's own
  retry and resume logic then runs at that effect: a retry under the same key is answered ``duplicate``, a fresh key
  pays twice (``side_effects.at_most_once``, ``target.fresh_key_repeat``), stored answers applied to other rounds
  show in the end state.

Each is a crash spec part ``"fault:EFFECT#N=OUTCOME"`` (:func:`crashpoint.harness.process.crashpoints.fault_part`),
so a run prints its one-line repro like any crash run and ``--crash-point`` takes it. Both outcomes are transient:
a correct target masks them (it retries them, keyed), so each such run is judged against the golden run, as
``crashpoint search`` judges a generated transient fault.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from typing import Any, Sequence

from crashpoint.harness.load.target import TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.process import crashpoints

#: The outcomes each effect gets once in a default sweep, in this order.
SWEPT_OUTCOMES = ("timeout", "lost_response")


def specs(golden: TargetOutcome, case: TargetCase) -> list[str]:
    """The crash specs of a default sweep's effect faults for a unit whose golden run is ``golden``: for each effect
    the golden run applied (first application, in ledger order; an effect ``case`` already faults itself is left to
    the case), one spec per :data:`SWEPT_OUTCOMES` aimed at that call's number among the effect's calls."""
    own = {f["tool"] for f in case.faults if f.get("kind") == "tool"}
    seen: Counter[str] = Counter()
    out: list[str] = []
    done: set[str] = set()
    for call in golden.calls:
        name = getattr(call, "effect", None)
        if name is None:
            continue
        seen[name] += 1
        if name in own or name in done or getattr(call, "outcome", None) != "applied":
            continue
        done.add(name)
        out += [crashpoints.fault_part(name, seen[name], outcome) for outcome in SWEPT_OUTCOMES]
    return out


def with_faults(case: TargetCase, faults: Sequence[tuple[str, int, str]]) -> TargetCase:
    """``case`` with a ``tool`` fault (:mod:`crashpoint.harness.faults.kinds.tool`) after its own for each
    ``(effect, call, outcome)`` of a crash spec (:attr:`~crashpoint.harness.process.crashpoints.Spec.faults`), named
    as before (its runs stay the unit's). The older fields are reset: after construction ``faults`` holds them."""
    added: list[dict[str, Any]] = [{"kind": "tool", "tool": effect, "call": call, "outcome": outcome, "times": 1}
                                   for effect, call, outcome in faults]
    return dataclasses.replace(case, faults=[*case.faults, *added], duplicate=None, workers=1, deploy=None,
                               server_crash=False)


def fired(out: Any, faults: Sequence[tuple[str, int, str]]) -> bool:
    """Whether every fault of a spec fired in the run whose outcome is ``out`` (a fault none of whose calls was made
    is in its ``faults_missed`` as ``"EFFECT OUTCOME"``); ``False`` for a run that broke (no outcome)."""
    if not isinstance(out, TargetOutcome):
        return False
    missed = set(out.faults_missed)
    return not any(f"{effect} {outcome}" in missed for effect, _, outcome in faults)
