"""Types shared by the engine and the fakes, so that neither imports the other.

The engine calls the outside world only through :class:`ToolPort`; the fakes
implement it. Time comes only through :class:`Clock`.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping, Protocol, runtime_checkable

from crashpoint.errors import CrashpointError

#: A crash probe: called with a crash point name such as ``"after_checkpoint:refund_draft"``.
#: The harness installs one that may SIGKILL the process; the default does nothing.
Probe = Callable[[str], None]


def no_probe(_name: str) -> None:
    """The default probe: crash points are passed silently."""


class ToolError(CrashpointError, RuntimeError):
    """A tool call failed.

    Args:
        message: the tool's error text.
        retryable: ``True`` when the same call may succeed later (a timeout, a
            503); ``False`` for a fatal error (validation, a refused refund).
        maybe_applied: ``True`` when the request reached the service and the effect may
            have happened though no answer came back (a connection reset after sending): the
            caller cannot tell, so its outcome is unknown until a call with the same
            idempotency key settles it.
        status: the HTTP status of the refusal when there is one (``429``: rate limited), else ``None``.
        retry_after: seconds the caller must wait before it calls again (a ``Retry-After`` header), else ``None``.
    """

    def __init__(self, message: str, *, retryable: bool, maybe_applied: bool = False, status: int | None = None,
                 retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retryable = retryable
        self.maybe_applied = maybe_applied
        self.status = status
        self.retry_after = retry_after


@runtime_checkable
class ToolPort(Protocol):
    """The only door from a workflow to the outside world."""

    def call(self, tool: str, args: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        """Call ``tool`` with ``args``; the same ``idempotency_key`` means the same logical effect.

        Returns the tool's JSON-able result. Raises :class:`ToolError`.
        """
        ...


@runtime_checkable
class Clock(Protocol):
    """Time in seconds (float, epoch-like) from an injectable source."""

    def now(self) -> float:
        """Current time in seconds."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait ``seconds``; a virtual clock advances instead of waiting."""
        ...
