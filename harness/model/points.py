"""Crash point ids as data (the probe that passes them is :mod:`crashpoint.harness.process.crashpoints`).

An id is ``KIND:WHAT`` (``after_effect:issue_refund``), numbered by occurrence when passed again
(``before_effect:refunds.draftRefundRequest#2``); a schedule of two kills is ``A >> B`` (killed at ``A``, then at
``B`` during the recovery).
"""

#: Between the two points of a schedule ``"A >> B"``.
THEN = " >> "
#: Before a crash spec's race clause: ``"A with P held"`` (kill at ``A`` while a thread is held at ``P``), see
#: :class:`crashpoint.harness.process.crashpoints.Spec`.
WITH = " with "

#: A crash spec part that makes one effect call fail instead of killing: ``"fault:issue_refund#1=timeout"`` (see
#: :func:`crashpoint.harness.process.crashpoints.fault_part`).
FAULT_PREFIX = "fault:"

__all__ = ["THEN", "WITH", "FAULT_PREFIX"]
