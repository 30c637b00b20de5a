"""What a target's case said it would exercise, against what its golden run did (issue 27 item 1, issue 24 item 4).

A golden run tests nothing of what the file names and the run never reached, as a case fault that never fired
tests nothing (:func:`crashpoint.harness.judge.verdict.judge`): :func:`untested` names it and the run is an
``error``:

* an ``effects:`` entry never called (the function patched in its module, while the team's node calls the
  original it imported by name: ``from myapp.payments import charge``), unless the case says its path makes no
  such effect (``no_effect``);
* a human answer never asked for (no thread waited on that node, or not that many times: a node that never
  interrupts, a misspelt node of an engine whose nodes validation cannot read, a second answer to an ask that is
  never repeated).

A case may say that its path makes no side effect (``no_effect: true``, a rejection path) or not some of them
(``no_effect: [NAME, ...]``): its golden run calling none is then what is expected, and rule ``target.no_effect``
holds it to that on every run, the golden run included (a declaration that silences the vacuity check must be able
to fail).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from crashpoint.harness.judge.target_rules import Failure, line, rule
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.model.outcomes import TargetOutcome

#: The start of the ``error`` texts of :func:`untested` (what nothing-was-tested checks look for).
NEVER = "the golden run never"


def effect_name(entry: dict[str, Any]) -> str:
    """The effect name of an ``effects:`` entry (``{"path": "module:attr", "name"?}``): its ``name``, else the
    attribute's last part (what the worker names the wrapped function)."""
    return entry.get("name") or entry["path"].rpartition(":")[2].rsplit(".", 1)[-1]


def asked(run: TargetOutcome) -> Counter[tuple[str, str]]:
    """``(thread, node) -> answers taken`` on ``run``: each answer the driver delivered (``answer``) or delivered late
    (``late_answer``), from the run's deliveries; a redelivery of a lost answer is not another one."""
    return Counter((d["thread"], d["node"]) for d in run.deliveries if d.get("kind") in ("answer", "late_answer"))


def untested(target: Target, case: TargetCase, run: TargetOutcome) -> str | None:
    """Why the golden ``run`` of ``case`` did not test what the target file names (see the module docstring), or
    ``None``."""
    reasons = []
    called = {c.effect for c in run.calls}
    missing = [(e, effect_name(e)) for e in target.effects
               if effect_name(e) not in called and not case.makes_no(effect_name(e))]
    if missing:
        named = ", ".join(f"{name} ({e['path']})" for e, name in missing)
        reasons.append(f"{NEVER} called the effects: entr{'y' if len(missing) == 1 else 'ies'} {named}, so nothing was "
                       "tested of it: a node that imported the function by name (from module import name) calls the "
                       "original, which crashpoint cannot see (name the function where the node looks it up); if this "
                       f"case's path makes no such call, say so: no_effect: [{', '.join(n for _, n in missing)}]")
    taken = asked(run)
    for node, answers in sorted(target.answers(case).items()):
        most = max((n for (_, asked_node), n in taken.items() if asked_node == node), default=0)
        if most < len(answers):
            left = len(answers) - most
            which = "no thread ever waited on it" if most == 0 else (
                f"answer{'s' if left > 1 else ''} {most + 1}{f'-{len(answers)}' if left > 1 else ''} of "
                f"{len(answers)}: no thread waited on it more than {most} time(s)")
            reasons.append(f"{NEVER} asked for an answer of human node {node} ({which}), so nothing was tested of it "
                           "(a node that never interrupts, or a name the engine does not wait on)")
    return "; ".join(reasons) or None


@rule("target.no_effect", "a case that says its path makes no side effect (no_effect) applies none, or none of the "
      "effects it names", kind="expectation")
def no_effect(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    case = target.case(run.case)
    if case.no_effect is False:
        return []
    made = [c for c in run.calls if c.outcome == "applied" and case.makes_no(c.effect)]
    if not made:
        return []
    said = "no_effect: true" if case.no_effect is True else f"no_effect: [{', '.join(case.no_effect)}]"
    return [Failure("target.no_effect", f"case {case.name} says its path makes no such side effect ({said}), yet "
                    f"{made[0].effect} was applied in {made[0].thread}" + (f" (and {len(made) - 1} more)"
                                                                           if len(made) > 1 else ""),
                    [line(c) for c in made[:4]])]
