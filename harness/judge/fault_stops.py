"""A thread that stopped at an effect fault of its run's crash spec (``"fault:EFFECT#N=OUTCOME"``, the default sweep's
effect faults: :mod:`crashpoint.harness.run.effect_faults`): the team's code did not retry that call, and the thread
ended stuck or failed with the fault's own error.

That is how code that does not retry an effect behaves, not a broken promise: the end-state rules, written for a
thread that goes on, do not apply to such a thread (:data:`END_RULES`), and a note says it stopped there and how to
make it survive. Every other rule still holds (no effect twice, approvals before gated effects, keys, invariants).
A thread that went on past the fault is judged by every rule: code that swallows a timeout and reports success
finishes, with fewer applications than the golden run.
"""

from __future__ import annotations

import re
from typing import Any, Sequence

from crashpoint.harness.model.rules import Finding
from crashpoint.harness.process import crashpoints

#: Rules about where a thread ends and what it applied in all, left out for a thread that stopped at its fault.
END_RULES = frozenset({"target.expected_end", "target.expected_effects", "target.ends_within_budget",
                       "target.compensated", "differential.same_end", "differential.same_effects"})
#: How the fault's error reads in a thread's error text (crashpoint.api's EffectTimeout and a lost answer's reset).
_TEXTS = {"timeout": ("timeout",), "lost_response": ("connection reset", "answer was lost"),
          "retryable": ("scripted", "retryable"), "rate_limited": ("429", "rate limited"),
          "empty_answer": (), "malformed_answer": ()}  # a garbled answer raises nothing of its own
#: Where a stopped thread's note (:func:`apply`) says how to survive the fault (:func:`summary` reads the hint from it).
SURVIVE = "To survive a transient failure there, "
#: Thread statuses of a thread that did not go on (neither finished nor waiting for a human).
_STOPPED = ("stuck", "error", "failed", "cancelled", "terminated")


def stopped(run: Any) -> dict[str, tuple[str, int, str]]:
    """``{thread: (effect, call, outcome)}`` of the threads of ``run`` (a target run's outcome) that ended stuck or
    failed with the error of a fault of the run's crash spec; ``{}`` for a spec without fault parts."""
    faults = crashpoints.parse(getattr(run, "crash_point", None)).faults
    out: dict[str, tuple[str, int, str]] = {}
    for thread, status in (getattr(run, "threads", None) or {}).items():
        error = str(status.get("error") or "")
        if status.get("status") not in _STOPPED or not error:
            continue
        low = error.lower()
        for fault in faults:
            effect, _, outcome = fault
            if f"{effect}:" in error and any(t in low for t in _TEXTS[outcome]):
                out[thread] = fault
                break
    return out


def _names(message: str, thread: str) -> bool:
    return re.search(rf"(?<![\w.-]){re.escape(thread)}(?![\w-])", message) is not None


def apply(findings: Sequence[Finding], run: Any, hint: str = "retry the call") -> tuple[list[Finding], list[str]]:
    """``findings`` without those of :data:`END_RULES` about a thread that :func:`stopped` at its fault, and the notes
    that say so (one per such thread), each ending with ``hint``: how the target's engine retries a call
    (:attr:`~crashpoint.harness.engines.base.Engine.retry_hint`)."""
    where = stopped(run)
    if not where:
        return list(findings), []
    kept = [f for f in findings if not (f.rule in END_RULES and any(_names(f.message, t) for t in where))]
    notes = [f"thread {thread} stopped at the injected {outcome} of {effect} (call {call}): the code does not retry "
             "that call, so the end-state rules (" + ", ".join(sorted(END_RULES)) + ") were not applied to it; the "
             f"others were. {SURVIVE}{hint}, and call it again under the same "
             "idempotency key"
             for thread, (effect, call, outcome) in sorted(where.items())]
    return kept, notes


#: How :func:`apply`'s note on a thread that stopped at its fault begins (:func:`summary` finds them by it).
STOPPED_NOTE = re.compile(r"^thread (?P<thread>\S+) stopped at the injected (?P<outcome>\w+) of (?P<effect>\S+) "
                          r"\(call \d+\)")


def summary(results: Sequence[Any]) -> list[str]:
    """The sweep summary's lines on effect faults the team's code did not retry (``[]``: none): one line with the
    runs, then each (effect, outcome) with how many runs stopped there, then how to survive it (the engine's hint,
    from the first such note). Those runs pass, since code that does not retry is not a broken promise, but a team
    should see that a transient failure of that call stops its workflow."""
    where: dict[tuple[str, str], int] = {}
    hint = ""
    for r in results:
        for n in getattr(r, "notes", None) or ():
            m = STOPPED_NOTE.match(n)
            if m:
                key = (m["effect"], m["outcome"])
                where[key] = where.get(key, 0) + 1
                hint = hint or n.split(SURVIVE, 1)[-1]
    if not where:
        return []
    lines = [f"not retried: {sum(where.values())} effect-fault run(s) stopped a thread at the call that failed (the "
             "code does not retry it; the end-state rules were not applied to that thread, every other rule was):"]
    lines += [f"  {effect} {outcome}: {n} run(s)" for (effect, outcome), n in sorted(where.items())]
    return lines + [f"  to survive a transient failure: {hint}"]

