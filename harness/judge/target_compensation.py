"""Compensation on a team's own code (issue 28 item 10): what the target file says undoes what.

``compensations: {draft_refund: {undo: void_draft, unless: [issue_refund]}}`` says that ``void_draft`` undoes
``draft_refund``, and that a thread which applied ``issue_refund`` went on past the draft (no undo is due). Two
rules hold on every run, the golden run included, per thread, counting the ledger's ``applied`` calls (a ``lost``
answer counts: the effect happened; a call its key answered ``duplicate`` does not):

* ``target.compensated``: a thread that ended ``stuck`` (the engine's failed or closed workflow), or ``finished``
  with none of the ``unless`` effects applied (the denial path, an expired approval), after the effect was applied
  N times, has its undo applied N times. A thread still ``waiting`` or ``running`` has not ended: nothing is due.
* ``target.compensation_at_most_once``: the undo is never applied more often than the effect was (at least once:
  code that voids a draft whose call failed, to be safe, is not flagged for that one void).

The reference engine's packs judge the same property with ``side_effects.compensated_on_failure`` and
``side_effects.compensation_at_most_once`` (:mod:`crashpoint.harness.judge.pack_rules`), from the pack's effect
catalogue and the run's final status; a target's threads end as the engine reports them, so these read the
thread statuses and the file's ``unless`` instead.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.judge.target_rules import line, rule
from crashpoint.harness.load.target import Target
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.rules import Finding as Failure

#: Thread statuses that end a thread (an undo may be due); ``waiting`` and ``running`` threads have not ended.
ENDED = ("finished", "stuck")


def _applied(run: TargetOutcome, thread: str, effect: str) -> list[Any]:
    return [c for c in run.calls if c.thread == thread and c.effect == effect and c.outcome == "applied"]


def _pairs(target: Target, run: TargetOutcome):
    """``(thread, status, effect, undo, unless, applied calls of effect, applied calls of undo)`` per thread of the
    run and compensated effect of the target."""
    for thread, end in sorted(run.threads.items()):
        status = end.get("status")
        for effect, spec in sorted(target.compensations.items()):
            yield (thread, status, effect, spec["undo"], spec["unless"], _applied(run, thread, effect),
                   _applied(run, thread, spec["undo"]))


@rule("target.compensated", "a thread that ends stuck, or finished with none of its compensation's unless effects "
                            "applied, after an effect was applied has that effect's undo applied once per application")
def compensated(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per thread and compensated effect (:data:`Target.compensations`) whose undo was applied fewer
    times than the effect in a thread that ended (:data:`ENDED`) without going on (no ``unless`` effect applied; a
    ``stuck`` thread always owes the undo)."""
    found = []
    for thread, status, effect, undo, unless, done, undone in _pairs(target, run):
        if status not in ENDED or not done or len(undone) >= len(done):
            continue
        went_on = [e for e in unless if _applied(run, thread, e)]
        if status == "finished" and (went_on or not unless):
            continue
        why = "stuck (the workflow failed)" if status == "stuck" else \
            f"finished with none of {', '.join(unless)} applied"
        found.append(Failure("target.compensated",
                             f"thread {thread} ended {why} after {effect} was applied {len(done)} time(s), but its "
                             f"compensation {undo} was applied {len(undone)} time(s)",
                             [line(c) for c in [*done, *undone][:4]]))
    return found


@rule("target.compensation_at_most_once", "an effect's undo is never applied more often than the effect was")
def compensation_at_most_once(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Failure]:
    """A failure per thread and compensated effect whose undo was applied more than ``max(1, N)`` times, ``N`` the
    effect's applications in the thread."""
    return [Failure("target.compensation_at_most_once",
                    f"thread {thread}: compensation {undo} of {effect} applied {len(undone)} time(s) for "
                    f"{len(done)} application(s) of {effect}" + (f" (keys: {', '.join(sorted({str(c.key) for c in undone}))})"),
                    [line(c) for c in undone[:4]])
            for thread, _, effect, undo, _, done, undone in _pairs(target, run) if len(undone) > max(1, len(done))]
