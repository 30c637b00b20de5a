"""Verdicts: the five outcomes a run can have, and the one order in which a group of runs is summed up.

Every front end (``crashpoint run``, ``--resume``, ``search``, ``certify``, ``pytest --chaos``) and every report
speaks these; a verdict is a :class:`str` (``Verdict.PASSED == "passed"``), so stored and JSON results keep their
plain strings.

* ``passed``: every rule held and the run tested what it claims (its kills verified, its faults fired).
* ``failed``: a rule found something.
* ``error``: the run did not test what it claims (a kill that did not land, a crash point never reached, faults
  that never fired), or the engine or crashpoint broke.
* ``unknown``: nothing could decide it (a worker hung, a rule raised).
* ``unsupported``: the engine lacks what the run needs; neither passed nor failed.

A group of runs (a case, a sweep, a pytest item of many runs) gets :func:`merge` of its runs' verdicts, in the
order of :data:`SEVERITY`: a failure is the strongest news, then a run that tested nothing, then a run nothing
could decide; ``passed`` only when every run that could be judged passed; ``unsupported`` only when no run could
be judged at all. Exit codes follow it: 0 only for ``passed`` (:func:`is_green`).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Iterable


class Verdict(StrEnum):
    """The verdict of one run (or, through :func:`merge`, of a group of runs)."""

    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    UNKNOWN = "unknown"
    UNSUPPORTED = "unsupported"


#: The verdicts in the order the JSON report counts them.
VERDICTS: tuple[Verdict, ...] = (Verdict.PASSED, Verdict.FAILED, Verdict.ERROR, Verdict.UNKNOWN,
                                  Verdict.UNSUPPORTED)
#: The merge order, strongest first: a group's verdict is the first of these any of its runs has.
SEVERITY: tuple[Verdict, ...] = (Verdict.FAILED, Verdict.ERROR, Verdict.UNKNOWN, Verdict.PASSED,
                                  Verdict.UNSUPPORTED)


def merge(verdicts: Iterable[str]) -> Verdict:
    """The verdict of a group of runs (:data:`SEVERITY`): ``failed`` if any run failed, else ``error`` if any
    did not test what it claims, else ``unknown`` if any could not be decided, else ``passed`` if any passed,
    else ``unsupported`` (every run unsupported, or no run at all: nothing was judged).

    Raises:
        ValueError: a value that is not a verdict.
    """
    seen = {Verdict(v) for v in verdicts}
    return next((v for v in SEVERITY if v in seen), Verdict.UNSUPPORTED)


def is_green(verdicts: Iterable[str]) -> bool:
    """``True`` when the group's :func:`merge` is ``passed``: at least one run passed and every run that could be
    judged passed (``unsupported`` runs are reported, never counted as passed nor as failed). The exit code 0 of
    ``crashpoint run`` and the ``passed`` of a sweep's result."""
    return merge(verdicts) is Verdict.PASSED


__all__ = ["Verdict", "VERDICTS", "SEVERITY", "merge", "is_green"]
