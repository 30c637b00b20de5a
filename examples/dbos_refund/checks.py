"""The refund team's own invariants, judged by crashpoint like its oracles."""

from __future__ import annotations

import crashpoint


@crashpoint.invariant
def issued_or_voided_never_both(run: crashpoint.RunView) -> str | None:
    """A refund's draft is either issued or voided, never both."""
    for call in run.applied("issue_refund"):
        if any(v.thread == call.thread for v in run.applied("void_draft")):
            return f"{call.thread}: the refund was issued and its draft voided"
    return None
