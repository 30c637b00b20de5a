"""The refund team's own invariants, judged by crashpoint like its oracles."""

from __future__ import annotations

import crashpoint


@crashpoint.invariant
def issued_or_voided_never_both(run: crashpoint.RunView) -> str | None:
    """A refund's draft is either issued or voided, never both."""
    issued = {c.thread for c in run.applied("issue_refund")}
    voided = {c.thread for c in run.applied("void_draft")}
    both = sorted(issued & voided)
    return f"{both[0]}: the refund was issued and its draft voided" if both else None
