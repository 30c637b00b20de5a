"""The scripted agent: a stand-in for the model behind the ads audit's analysis steps.

Each tool answers ``{"verdict", "confidence", "reason", "findings", ...}`` where ``verdict`` is
one of :data:`VERDICTS`:

* ``confident``: findings and proposed changes computed from the seeded account
  (:func:`crashpoint.fakes.data.ads_account`); ``confidence`` 0.9.
* ``uncertain``: the same findings, ``confidence`` 0.35, and a reason: the agent does not stand
  behind them. A workflow must not act on them (the engine escalates an agent step's answer
  that is not ``confident``).
* ``evidence_missing``: no findings; ``missing`` names the evidence arguments that were empty.

The verdict is ``args["scripted_answer"]`` when given (a case scripts it through its workflow
input, e.g. ``$input.agent_answers.keyword_analysis``), else ``evidence_missing`` when an
evidence argument is empty (``None``, as a skipped collection task leaves it), else ``confident``.
The answer is deterministic for a given key: the :class:`~crashpoint.fakes.tools.Toolbox`
answers a repeated key from the ledger. A new key for the same tool is a *revision* (the human
denied the first proposal): the ``N``-th applied call proposes changes scaled by ``0.5**N``
(more conservative), and says ``revision: N``.

Tools (handler ``f(box, args, ref) -> dict``):

* ``agent.analyzeCampaigns {account_seed, evidence, scripted_answer?}``: ``budget_changes``
  (``[{campaign_id, old_daily_budget_cents, new_daily_budget_cents, why}]``, at most 8).
* ``agent.analyzeKeywords {account_seed, evidence, scripted_answer?}``: ``bid_changes``
  (``[{keyword_id, old_bid_cents, new_bid_cents, why}]``, at most 15).
* ``agent.analyzeCompetitors {account_seed, evidence, scripted_answer?}``: competitive findings only.

Raises :class:`~crashpoint.protocols.ToolError` (fatal) for an unknown scripted answer or seed.
"""

from __future__ import annotations

from statistics import median
from typing import TYPE_CHECKING, Any, Callable, Mapping

from crashpoint.fakes.ads import account_of, cpa_cents, spend_time
from crashpoint.fakes.data import KW_BID, KW_CONVERSIONS, KW_COST, KW_ID, KW_QS, AdsAccount
from crashpoint.protocols import ToolError

if TYPE_CHECKING:
    from crashpoint.fakes.tools import Toolbox

#: The answers the scripted agent gives; only the first lets a workflow act.
VERDICTS = ("confident", "uncertain", "evidence_missing")
#: Virtual seconds each analysis takes (the clock moves with the call).
DURATIONS_S = {"agent.analyzeCampaigns": 3000.0, "agent.analyzeKeywords": 4200.0, "agent.analyzeCompetitors": 1800.0}
#: Arguments that carry the evidence an analysis needs.
EVIDENCE_ARGS = ("evidence",)


def _scale(change: float, revision: int) -> float:
    return change * 0.5 ** revision


def _campaign_findings(acc: AdsAccount, revision: int) -> dict[str, Any]:
    live = [c for c in acc.campaigns if c["status"] == "enabled"]
    cpas = [cpa_cents(c["spend_cents"], c["conversions"]) for c in live]
    mid = median(v for v in cpas if v is not None)
    costly = sorted((c for c, v in zip(live, cpas) if v is None or v > 2 * mid),
                    key=lambda c: (-c["spend_cents"], c["id"]))[:5]
    limited = sorted((c for c, v in zip(live, cpas) if v is not None and v < mid and c["lost_is_budget"] > 0.1),
                     key=lambda c: (-c["lost_is_budget"], c["id"]))[:3]
    changes = [{"campaign_id": c["id"], "old_daily_budget_cents": c["daily_budget_cents"],
                "new_daily_budget_cents": max(100, int(c["daily_budget_cents"] * (1 - _scale(0.3, revision)))),
                "why": "cost per conversion above twice the median"} for c in costly]
    changes += [{"campaign_id": c["id"], "old_daily_budget_cents": c["daily_budget_cents"],
                 "new_daily_budget_cents": int(c["daily_budget_cents"] * (1 + _scale(0.2, revision))),
                 "why": "efficient and limited by budget"} for c in limited]
    return {"findings": {"median_cpa_cents": int(mid), "costly_campaigns": len(costly),
                         "budget_limited_efficient": len(limited)}, "budget_changes": changes}


def _keyword_findings(acc: AdsAccount, revision: int) -> dict[str, Any]:
    wasted = sorted((k for k in acc.keywords if k[KW_COST] > 0 and k[KW_CONVERSIONS] == 0),
                    key=lambda k: (-k[KW_COST], k[KW_ID]))
    winners = sorted((k for k in acc.keywords if k[KW_CONVERSIONS] >= 2 and k[KW_QS] >= 7),
                     key=lambda k: (-k[KW_CONVERSIONS], k[KW_ID]))[:5]
    changes = [{"keyword_id": k[KW_ID], "old_bid_cents": k[KW_BID],
                "new_bid_cents": max(10, int(k[KW_BID] * (1 - _scale(0.4, revision)))),
                "why": "spends without converting"} for k in wasted[:10]]
    changes += [{"keyword_id": k[KW_ID], "old_bid_cents": k[KW_BID],
                 "new_bid_cents": int(k[KW_BID] * (1 + _scale(0.15, revision))),
                 "why": "converts with a high quality score"} for k in winners]
    return {"findings": {"zero_conversion_keywords": len(wasted),
                         "wasted_cost_cents": sum(k[KW_COST] for k in wasted), "winners": len(winners)},
            "bid_changes": changes}


def _competitor_findings(acc: AdsAccount, revision: int) -> dict[str, Any]:
    top = sorted(acc.competitors, key=lambda c: (-c["impression_share"], c["domain"]))[:3]
    return {"findings": {"top_competitors": [c["domain"] for c in top],
                         "outranked_by": sum(1 for c in acc.competitors if c["outranking_share"] > 0.4)}}


def _analysis(tool: str, compute: Callable[[AdsAccount, int], dict[str, Any]]):
    """A handler for ``tool`` that answers with ``compute(account, revision)`` under a verdict."""
    def handler(box: "Toolbox", args: Mapping[str, Any], ref: str) -> dict[str, Any]:
        scripted = args.get("scripted_answer")
        if scripted is not None and scripted not in VERDICTS:
            raise ToolError(f"{tool}: unknown scripted answer {scripted!r}; one of {VERDICTS}", retryable=False)
        acc = account_of(tool, args)
        missing = [name for name in EVIDENCE_ARGS if args.get(name) in (None, [], {})]
        verdict = scripted or ("evidence_missing" if missing else "confident")
        revision = box.ledger.db.execute("SELECT COUNT(*) FROM calls WHERE tool=? AND outcome='applied'",
                                         (tool,)).fetchone()[0]
        spend_time(box, DURATIONS_S[tool])
        answer: dict[str, Any] = {"analysis_id": "an" + ref[1:], "account_id": acc.account_id, "verdict": verdict,
                                  "revision": revision}
        if verdict == "evidence_missing":
            return answer | {"confidence": 0.0, "findings": {}, "missing": missing,
                             "reason": f"evidence missing: {', '.join(missing) or 'the data the analysis needs'}"}
        answer |= {"confidence": 0.9 if verdict == "confident" else 0.35, **compute(acc, revision)}
        if verdict == "uncertain":
            answer["reason"] = "the data do not support these findings with confidence"
        return answer
    return handler


#: The arguments every analysis reads, for :data:`crashpoint.fakes.tools.BUILTIN_TOOLS`.
AGENT_ARGS = {"account_seed": "int >= 0", "evidence": "the collected data (empty: evidence_missing)",
              "scripted_answer?": f"one of {', '.join(VERDICTS)}"}
#: The handlers of this module with a description each, registered in :data:`crashpoint.fakes.tools.BUILTIN_TOOLS`.
AGENT_HANDLERS = {
    "agent.analyzeCampaigns": (_analysis("agent.analyzeCampaigns", _campaign_findings),
                               "scripted agent: budget changes for the account's campaigns"),
    "agent.analyzeKeywords": (_analysis("agent.analyzeKeywords", _keyword_findings),
                              "scripted agent: bid changes for the account's keywords"),
    "agent.analyzeCompetitors": (_analysis("agent.analyzeCompetitors", _competitor_findings),
                                 "scripted agent: competitive findings only"),
}
