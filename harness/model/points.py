"""Crash point ids as data (the probe that passes them is :mod:`crashpoint.harness.process.crashpoints`).

An id is ``KIND:WHAT`` (``after_effect:issue_refund``), numbered by occurrence when passed again
(``before_effect:refunds.draftRefundRequest#2``); a schedule of two kills is ``A >> B`` (killed at ``A``, then at
``B`` during the recovery).
"""

#: Between the two points of a schedule ``"A >> B"``.
THEN = " >> "

__all__ = ["THEN"]
