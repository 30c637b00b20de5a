"""The fake ads API and report service behind the ads-audit workflow.

Read tools return *summaries* of the seeded account (:func:`crashpoint.fakes.data.ads_account`):
counts, totals and a top-N, never the 5,000 keywords, so the workflow state stays small.
Write tools are side effects recorded in the ledger like the refund tools (the
:class:`~crashpoint.fakes.tools.Toolbox` handles idempotency keys, scripts and the
``before_effect``/``after_effect`` crash points; a handler only computes the answer and
updates the service's own records in the call's transaction).

Every call takes virtual time (:data:`DURATIONS_S`): the clock moves forward in the call's
own transaction, so an audit takes hours of virtual time and no wall time.

Tools (handler ``f(box, args, ref) -> dict``; ``ref`` is a stable reference derived from the key):

* ``ads.listCampaigns {account_seed, top_n?}``: campaign counts, totals, the top-N by spend.
* ``ads.keywordStats {account_seed, top_n?}``: keyword counts by match type, cost, wasted cost,
  the top-N by cost.
* ``ads.listAds {account_seed, top_n?}``: ad counts, disapprovals, CTR, the top-N by CTR.
* ``ads.applyBudgetChanges {account_seed, changes: [{campaign_id, new_daily_budget_cents}]}``:
  irreversible; ``{"change_set_id", "applied", "delta_cents"}``.
* ``ads.applyBidChanges {account_seed, changes: [{keyword_id, new_bid_cents}]}``: irreversible;
  ``{"change_set_id", "applied", "delta_cents"}``.
* ``reports.draftReport {account_id, title}``: ``{"draft_id", "status": "drafted"}``.
* ``reports.discardDraft {result: {draft_id}}``: the compensation of ``draftReport``.
* ``reports.finalizeReport {draft_id, ...}``: ``{"report_id", "status": "final", "sections"}``.

Every handler raises :class:`~crashpoint.protocols.ToolError` (fatal) on invalid arguments.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any, Mapping

from crashpoint.fakes.data import (KW_BID, KW_CAMPAIGN, KW_CLICKS, KW_CONVERSIONS, KW_COST, KW_ID, KW_IMPRESSIONS,
                                   KW_MATCH, KW_QS, KW_TEXT, AdsAccount, ads_account)
from crashpoint.protocols import ToolError

if TYPE_CHECKING:
    from crashpoint.fakes.tools import Toolbox

#: Virtual seconds each tool's call takes (the clock moves with the call).
DURATIONS_S = {
    "ads.listCampaigns": 900.0, "ads.keywordStats": 2400.0, "ads.listAds": 1200.0,
    "ads.applyBudgetChanges": 600.0, "ads.applyBidChanges": 1200.0,
    "reports.draftReport": 300.0, "reports.discardDraft": 60.0, "reports.finalizeReport": 2700.0,
}
#: Largest ``top_n`` a read tool accepts (a summary stays a summary).
MAX_TOP_N = 25


def spend_time(box: "Toolbox", seconds: float) -> None:
    """Move the virtual clock ``seconds`` forward inside the current call's ledger transaction."""
    box.ledger.db.execute("UPDATE clock SET now = now + ? WHERE id=1", (float(seconds),))


def account_of(tool: str, args: Mapping[str, Any]) -> AdsAccount:
    """The seeded account named by ``args["account_seed"]``.

    Raises:
        ToolError: (fatal) the seed is missing or not an int >= 0.
    """
    seed = args.get("account_seed")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ToolError(f"{tool}: invalid account_seed {seed!r} (an int >= 0)", retryable=False)
    return ads_account(seed)


def _top_n(tool: str, args: Mapping[str, Any], default: int) -> int:
    n = args.get("top_n", default)
    if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= MAX_TOP_N:
        raise ToolError(f"{tool}: top_n must be an int in [1, {MAX_TOP_N}], got {n!r}", retryable=False)
    return n


def cpa_cents(spend_cents: int, conversions: int) -> int | None:
    """Cost per conversion in cents, ``None`` without conversions."""
    return spend_cents // conversions if conversions else None


def _list_campaigns(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "ads.listCampaigns"
    acc, n = account_of(tool, args), _top_n(tool, args, 5)
    spend_time(box, DURATIONS_S[tool])
    top = sorted(acc.campaigns, key=lambda c: (-c["spend_cents"], c["id"]))[:n]
    return {"account_id": acc.account_id, "campaigns": len(acc.campaigns),
            "enabled": sum(1 for c in acc.campaigns if c["status"] == "enabled"),
            "spend_cents": sum(c["spend_cents"] for c in acc.campaigns),
            "conversions": sum(c["conversions"] for c in acc.campaigns),
            "budget_limited": sum(1 for c in acc.campaigns if c["lost_is_budget"] > 0.1),
            "top_spend": [{"id": c["id"], "name": c["name"], "spend_cents": c["spend_cents"],
                           "conversions": c["conversions"], "cpa_cents": cpa_cents(c["spend_cents"], c["conversions"])}
                          for c in top]}


def _keyword_stats(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "ads.keywordStats"
    acc, n = account_of(tool, args), _top_n(tool, args, 10)
    spend_time(box, DURATIONS_S[tool])
    kws = acc.keywords
    by_match: dict[str, int] = {}
    for k in kws:
        by_match[k[KW_MATCH]] = by_match.get(k[KW_MATCH], 0) + 1
    wasted = [k for k in kws if k[KW_COST] > 0 and k[KW_CONVERSIONS] == 0]
    top = sorted(kws, key=lambda k: (-k[KW_COST], k[KW_ID]))[:n]
    return {"account_id": acc.account_id, "keywords": len(kws),
            "campaigns_covered": len({k[KW_CAMPAIGN] for k in kws}), "by_match_type": dict(sorted(by_match.items())),
            "impressions": sum(k[KW_IMPRESSIONS] for k in kws), "clicks": sum(k[KW_CLICKS] for k in kws),
            "cost_cents": sum(k[KW_COST] for k in kws), "conversions": sum(k[KW_CONVERSIONS] for k in kws),
            "zero_conversion_keywords": len(wasted), "zero_conversion_cost_cents": sum(k[KW_COST] for k in wasted),
            "low_quality_keywords": sum(1 for k in kws if k[KW_QS] <= 3),
            "top_cost": [{"id": k[KW_ID], "text": k[KW_TEXT], "campaign_id": k[KW_CAMPAIGN], "cost_cents": k[KW_COST],
                          "conversions": k[KW_CONVERSIONS]} for k in top]}


def _list_ads(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "ads.listAds"
    acc, n = account_of(tool, args), _top_n(tool, args, 5)
    spend_time(box, DURATIONS_S[tool])
    ctr = {a["id"]: a["clicks"] / a["impressions"] for a in acc.ads}
    top = sorted(acc.ads, key=lambda a: (-ctr[a["id"]], a["id"]))[:n]
    impressions = sum(a["impressions"] for a in acc.ads)
    return {"account_id": acc.account_id, "ads": len(acc.ads),
            "disapproved": sum(1 for a in acc.ads if a["status"] == "disapproved"),
            "low_ctr": sum(1 for v in ctr.values() if v < 0.01),
            "ctr": round(sum(a["clicks"] for a in acc.ads) / impressions, 4) if impressions else 0.0,
            "top_ctr": [{"id": a["id"], "headline": a["headline"], "ctr": round(ctr[a["id"]], 4)} for a in top]}


@lru_cache(maxsize=8)
def _keyword_index(seed: int) -> dict[str, tuple[Any, ...]]:
    return {k[KW_ID]: k for k in ads_account(seed).keywords}


def _changes(tool: str, args: Mapping[str, Any], id_field: str, value_field: str,
             known: Mapping[str, int]) -> list[tuple[str, int, int]]:
    """``[(id, old, new)]`` from ``args["changes"]``; raises a fatal :class:`ToolError` on anything invalid."""
    changes = args.get("changes")
    if not isinstance(changes, list):
        raise ToolError(f"{tool}: changes must be a list, got {type(changes).__name__}", retryable=False)
    out = []
    for i, change in enumerate(changes):
        ident = change.get(id_field) if isinstance(change, dict) else None
        new = change.get(value_field) if isinstance(change, dict) else None
        if ident not in known or not isinstance(new, int) or isinstance(new, bool) or new <= 0:
            raise ToolError(f"{tool}: change {i} needs a known {id_field} and an int {value_field} > 0, "
                            f"got {change!r}", retryable=False)
        out.append((ident, known[ident], new))
    return out


def _apply_changes(box: "Toolbox", tool: str, args: Mapping[str, Any], id_field: str, value_field: str,
                   known: Mapping[str, int], slot: str) -> tuple[int, int]:
    """Apply a change set of ``tool`` (each change sets ``slot:ACCOUNT:ID`` in the service state);
    ``(changes applied, sum of new minus old, cents)``."""
    acc = account_of(tool, args)
    changes = _changes(tool, args, id_field, value_field, known)
    spend_time(box, DURATIONS_S[tool])
    for ident, _, new in changes:
        box.put_state(f"{slot}:{acc.account_id}:{ident}", new)
    return len(changes), sum(n - o for _, o, n in changes)


def _apply_budgets(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "ads.applyBudgetChanges"
    known = {c["id"]: c["daily_budget_cents"] for c in account_of(tool, args).campaigns}
    applied, delta = _apply_changes(box, tool, args, "campaign_id", "new_daily_budget_cents", known, "budget")
    return {"change_set_id": "bcs" + ref[1:], "applied": applied, "delta_cents": delta}


def _apply_bids(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "ads.applyBidChanges"
    known = {ident: k[KW_BID] for ident, k in _keyword_index(account_of(tool, args).seed).items()}
    applied, delta = _apply_changes(box, tool, args, "keyword_id", "new_bid_cents", known, "bid")
    return {"change_set_id": "kcs" + ref[1:], "applied": applied, "delta_cents": delta}


def _draft_report(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    if not args.get("account_id") or not isinstance(args.get("title"), str):
        raise ToolError(f"reports.draftReport: account_id and title are required, got {dict(args)}", retryable=False)
    spend_time(box, DURATIONS_S["reports.draftReport"])
    draft_id = "rd" + ref[1:]
    box.put_state(f"report:{draft_id}", {"status": "drafted", "account_id": args["account_id"], "title": args["title"]})
    return {"draft_id": draft_id, "status": "drafted"}


def _report(box: "Toolbox", tool: str, draft_id: Any) -> dict[str, Any]:
    report = box.get_state(f"report:{draft_id}")
    if report is None:
        raise ToolError(f"{tool}: no report draft {draft_id!r}", retryable=False)
    return report


def _discard_draft(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "reports.discardDraft"
    result = args.get("result") or {}
    draft_id = result.get("draft_id") if isinstance(result, dict) else None
    report = _report(box, tool, draft_id)
    if report["status"] == "final":
        raise ToolError(f"{tool}: report {draft_id} is already final", retryable=False)
    spend_time(box, DURATIONS_S[tool])
    report["status"] = "discarded"
    box.put_state(f"report:{draft_id}", report)
    return {"draft_id": draft_id, "status": "discarded"}


def _finalize_report(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    tool = "reports.finalizeReport"
    report = _report(box, tool, args.get("draft_id"))
    if report["status"] != "drafted":
        raise ToolError(f"{tool}: draft {args.get('draft_id')} is {report['status']}", retryable=False)
    spend_time(box, DURATIONS_S[tool])
    sections = sorted(k for k, v in args.items() if k != "draft_id" and v is not None)
    report.update(status="final", sections=sections)
    box.put_state(f"report:{args['draft_id']}", report)
    return {"report_id": "rp" + ref[1:], "status": "final", "sections": len(sections)}


_READ_ARGS = {"account_seed": "int >= 0", "top_n?": f"int in [1, {MAX_TOP_N}]"}
#: Tool name -> (arguments, description), for :data:`crashpoint.fakes.tools.BUILTIN_TOOLS`.
ADS_ARGS = {
    "ads.listCampaigns": (_READ_ARGS, "campaign counts, totals and the top-N by spend"),
    "ads.keywordStats": (_READ_ARGS, "keyword counts by match type, cost, wasted cost, the top-N by cost"),
    "ads.listAds": (_READ_ARGS, "ad counts, disapprovals, CTR, the top-N by CTR"),
    "ads.applyBudgetChanges": ({"account_seed": "int >= 0", "changes": "[{campaign_id, new_daily_budget_cents}]"},
                               "apply campaign budget changes (irreversible)"),
    "ads.applyBidChanges": ({"account_seed": "int >= 0", "changes": "[{keyword_id, new_bid_cents}]"},
                            "apply keyword bid changes (irreversible)"),
    "reports.draftReport": ({"account_id": "str", "title": "str"}, "draft an audit report"),
    "reports.discardDraft": ({"result": "{draft_id}: the draft call's result"},
                             "discard a report draft (the compensation of draftReport)"),
    "reports.finalizeReport": ({"draft_id": "str", "...?": "any other argument becomes a report section"},
                               "finalize a drafted report"),
}
#: The handlers of this module, registered in :data:`crashpoint.fakes.tools.BUILTIN_TOOLS`.
ADS_HANDLERS = {
    "ads.listCampaigns": _list_campaigns,
    "ads.keywordStats": _keyword_stats,
    "ads.listAds": _list_ads,
    "ads.applyBudgetChanges": _apply_budgets,
    "ads.applyBidChanges": _apply_bids,
    "reports.draftReport": _draft_report,
    "reports.discardDraft": _discard_draft,
    "reports.finalizeReport": _finalize_report,
}
