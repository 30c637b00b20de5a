"""The refund team's own invariants, judged by crashpoint like its oracles."""

from __future__ import annotations

import crashpoint


@crashpoint.invariant
def refund_never_exceeds_order(run: crashpoint.RunView) -> None:
    """No order is refunded more than it cost, whatever crashed."""
    for refund in run.applied("issue_refund"):
        order = refund.thread
        drafted = [c for c in run.applied("draft_refund", thread=order)]
        assert drafted, f"{order}: refund issued with no draft"
        assert refund.args["amount_cents"] <= max(d.args["amount_cents"] for d in drafted), \
            f"{order}: refund of {refund.args['amount_cents']} above every draft"


@crashpoint.invariant
def customer_told_once_per_template(run: crashpoint.RunView) -> None:
    """A customer gets each kind of e-mail at most once."""
    seen: dict[tuple, int] = {}
    for call in run.applied("notify_customer"):
        k = (call.thread, call.args["template"])
        seen[k] = seen.get(k, 0) + 1
        assert seen[k] == 1, f"{call.thread}: e-mail {call.args['template']!r} sent {seen[k]} times"
