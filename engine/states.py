"""The workflow state machine, as one table that the engine and the trace oracle share.

Source: the transition map of the durable-workflows seed::

    accepted -> running -> checkpointed -> {running, waiting_approval, retrying,
    compensating, succeeded, failed}; waiting_approval -> {running, compensating,
    cancelled}; retrying -> {running, failed}; compensating -> failed;
    running -> cancelled.

Four entries extend the seed, each for an outcome the seed names but does not map:

* ``escalated`` is a terminal status (the seed's "escalamiento"; DESIGN.md: "escalation
  is a recorded outcome"), reached from ``checkpointed`` (a critical task failed in a
  phase whose ``on_error`` is ``escalate``) and from ``waiting_approval`` (an approval
  timed out with ``on_timeout: escalate``).
* ``compensating -> cancelled``: a cancellation that had side effects to undo ends
  ``cancelled`` once the compensations ran (the seed's "cancelación y compensación").
* ``compensating -> escalated``: a compensation that kept failing retryably past its own
  budget (``compensation_retries``) leaves an effect in place that only an operator can undo.
* ``accepted -> cancelled``: a run cancelled before any worker picked it up.
"""

from __future__ import annotations

from enum import StrEnum

from crashpoint.errors import CrashpointError


class Status(StrEnum):
    """A workflow's status. Values are the strings written to the store and the trace."""

    ACCEPTED = "accepted"
    RUNNING = "running"
    CHECKPOINTED = "checkpointed"
    WAITING_APPROVAL = "waiting_approval"
    RETRYING = "retrying"
    COMPENSATING = "compensating"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    ESCALATED = "escalated"


S = Status

#: Legal transitions: ``TRANSITIONS[a]`` is the set of statuses ``a`` may move to.
TRANSITIONS: dict[Status, frozenset[Status]] = {
    S.ACCEPTED: frozenset({S.RUNNING, S.CANCELLED}),
    S.RUNNING: frozenset({S.CHECKPOINTED, S.CANCELLED}),
    S.CHECKPOINTED: frozenset({S.RUNNING, S.WAITING_APPROVAL, S.RETRYING, S.COMPENSATING,
                               S.SUCCEEDED, S.FAILED, S.ESCALATED}),
    S.WAITING_APPROVAL: frozenset({S.RUNNING, S.COMPENSATING, S.CANCELLED, S.ESCALATED}),
    S.RETRYING: frozenset({S.RUNNING, S.FAILED}),
    S.COMPENSATING: frozenset({S.FAILED, S.CANCELLED, S.ESCALATED}),
    S.SUCCEEDED: frozenset(),
    S.FAILED: frozenset(),
    S.CANCELLED: frozenset(),
    S.ESCALATED: frozenset(),
}

#: Statuses a workflow never leaves; each must carry a stop reason.
TERMINAL: frozenset[Status] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


class IllegalTransition(CrashpointError, ValueError):
    """A move the table does not allow, e.g. ``waiting_approval -> succeeded``."""


def is_legal(src: str | Status, dst: str | Status) -> bool:
    """``True`` when ``src -> dst`` is in :data:`TRANSITIONS`; unknown names are illegal."""
    try:
        return Status(dst) in TRANSITIONS[Status(src)]
    except ValueError:
        return False


def check_transition(src: str | Status, dst: str | Status) -> None:
    """Raise :class:`IllegalTransition` unless ``src -> dst`` is legal."""
    if not is_legal(src, dst):
        known = src in Status._value2member_map_
        allowed = sorted(TRANSITIONS[Status(src)]) if known else []
        raise IllegalTransition(f"illegal transition {src} -> {dst}; allowed from {src}: {allowed}")
