"""Typed step results: a step returns a transition, never bare text.

Source: the durable-workflows seed's ``StepResult`` union (continue, wait_for_approval,
retry, compensate, complete, fail). :func:`crashpoint.engine.engine.Engine` turns each
into status moves checked against :data:`crashpoint.engine.states.TRANSITIONS`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Union


@dataclass(frozen=True)
class Continue:
    """The step succeeded; go on with ``next_step`` (a task id, or ``None`` at the end)."""

    next_step: str | None
    patch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class WaitForApproval:
    """Ask a human; ``deadline`` is the virtual time (seconds) after which the wait times out."""

    approval_id: str
    deadline: float


@dataclass(frozen=True)
class Retry:
    """A retryable failure; try again after ``retry_after_s`` seconds (attempt number ``attempt``)."""

    reason: str
    retry_after_s: float
    attempt: int


@dataclass(frozen=True)
class Compensate:
    """Undo the executed side effects in reverse order, then end in ``then`` (failed | cancelled)."""

    reason: str
    then: str = "failed"


@dataclass(frozen=True)
class Complete:
    """The workflow is done; ``output`` summarises it, ``patch`` is the last step's state change."""

    output: dict[str, Any]
    patch: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Fail:
    """Stop in ``status`` (failed | escalated) with ``reason`` as the stop reason."""

    reason: str
    status: str = "failed"


StepResult = Union[Continue, WaitForApproval, Retry, Compensate, Complete, Fail]
