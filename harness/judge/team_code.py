"""Team code that crashpoint runs in its own process (a target's invariants, imported and called by the judge) may not
end that process.

An invariant that calls ``os._exit(0)`` (or ``os.abort()``) ended ``crashpoint run`` at once, with exit 0 and no
``--json``: a false PASS for whatever the sweep had found (``SystemExit`` and the rest of Python's exceptions are
caught by the judge already, and are ``unknown``). Inside :func:`guarded` such a call raises
:class:`ProcessExitRefused` instead, which the judge reports as ``unknown`` with its text. Outside it, and in any
thread not inside it, ``os._exit`` and ``os.abort`` are the originals (a forked worker's own ``os._exit`` included).
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Any, Iterator, NoReturn

_local = threading.local()
_lock = threading.Lock()
_originals: dict[str, Any] = {}


class ProcessExitRefused(BaseException):
    """A team's check called ``os._exit`` or ``os.abort`` inside crashpoint's process (a ``BaseException``, as
    ``SystemExit`` is, so a check's own ``except Exception`` does not swallow it)."""


def _refusing(name: str) -> Any:
    original = _originals[name]

    def call(*args: Any) -> NoReturn:
        if getattr(_local, "depth", 0):
            shown = ", ".join(repr(a) for a in args)
            raise ProcessExitRefused(f"os.{name}({shown}) called by the team's check: it would have ended crashpoint's "
                                     "own process (the sweep's exit code and its results with it)")
        original(*args)
        raise AssertionError("unreachable")  # pragma: no cover - the original does not return

    call.__wrapped__ = original  # type: ignore[attr-defined]
    return call


def _install() -> None:
    with _lock:
        if _originals:
            return
        for name in ("_exit", "abort"):
            _originals[name] = getattr(os, name)
            setattr(os, name, _refusing(name))


@contextmanager
def guarded() -> Iterator[None]:
    """Run team code with ``os._exit`` / ``os.abort`` refused in this thread (:class:`ProcessExitRefused`); nests."""
    _install()
    _local.depth = getattr(_local, "depth", 0) + 1
    try:
        yield
    finally:
        _local.depth -= 1


__all__ = ["ProcessExitRefused", "guarded"]
