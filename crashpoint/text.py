"""Strings that came from outside (an engine, a case, a trace) made safe to keep and to show: lone
surrogates escaped, length bounded with a marker. A leaf module (no imports of ours), shared by the
harness, which bounds what it records, and the reports, which escape what they show.

Limits (README, "Hostile input and misbehaving engines"):

* :data:`MAX_TEXT` characters per string of a result (a stop reason, an error, a finding, an
  evidence line, a trace event's text); the rest is cut and replaced by ``CUT_MARK``.
"""

from __future__ import annotations

import re
from typing import Any

#: Characters kept of one engine-supplied string in a result (about 4 KiB of ASCII).
MAX_TEXT = 4000
#: What replaces the cut part: ``... [N more characters cut]``.
CUT_MARK = " ... [{n} more characters cut]"

_SURROGATE = re.compile("[\ud800-\udfff]")


def no_surrogates(text: str) -> str:
    """``text`` with every lone surrogate (``\\ud800``-``\\udfff``, which UTF-8 cannot encode: writing
    it raises ``UnicodeEncodeError``) written as the escape ``\\udXXX``."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def clip(text: str, limit: int = MAX_TEXT) -> str:
    """``text`` without lone surrogates (:func:`no_surrogates`) and at most ``limit`` characters plus
    :data:`CUT_MARK` (which says how many were cut)."""
    if len(text) > limit:
        text = text[:limit] + CUT_MARK.format(n=len(text) - limit)
    return no_surrogates(text)


def bounded(value: Any, limit: int = MAX_TEXT) -> Any:
    """A copy of a JSON-like ``value`` (dicts, lists, tuples, scalars) with :func:`clip` applied to
    every string in it, keys included; other values unchanged."""
    if isinstance(value, str):
        return clip(value, limit)
    if isinstance(value, dict):
        return {bounded(k, limit) if isinstance(k, str) else k: bounded(v, limit) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [bounded(v, limit) for v in value]
    return value
