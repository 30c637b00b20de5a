"""Fake tools: the refund service, the customer notifier and the approval request.

Every call goes to the :class:`~crashpoint.fakes.ledger.Ledger`. Idempotency follows the
common contract of payment APIs (e.g. Stripe's ``Idempotency-Key``): a call repeated with
the key of an applied call is recorded as a ``duplicate`` and returns the first result
without applying the effect again; a key whose call failed fatally fails the same way
again; a new key (or no key) is a new effect.

Each call passes two crash points, ``before_effect:TOOL`` and ``after_effect:TOOL``,
through the probe: after the second one the effect is durable in the ledger but the
caller has not seen the response yet.

A tool's next calls may be scripted (:data:`crashpoint.fakes.ledger.BEHAVIOURS`, or a fault kind's own
:class:`~crashpoint.fakes.ledger.Behaviour`): a
``retryable`` or ``fatal`` failure, a ``timeout`` (retryable, nothing applied), a
``lost_response`` (the effect is applied and recorded ``applied`` with ``lost=1``, then the
caller gets a retryable "connection reset"; a refusal whose answer is lost is recorded
``failed`` with ``lost=1`` the same way), or a ``slow`` call (the virtual clock moves forward
by the script's ``seconds`` in the call's own transaction, then it answers). Answers as real APIs give them:
``rate_limited`` (nothing applied; a retryable :class:`~crashpoint.protocols.ToolError` with ``status`` 429 and
``retry_after``, the script's ``seconds``), ``empty_answer`` / ``malformed_answer`` (applied and recorded with its
real answer, ``lost=1``; the call returns ``{}`` / a text that is not the answer, no error), ``stale_read`` (the
handler reads the records as they were before their latest write; a refusal is made retryable). A repeated key
never consumes the script: it is answered from the ledger (the real answer).

A tool is a :class:`Tool`: a handler ``f(box, args, ref) -> dict`` plus the arguments it reads.
The built-in ones are :data:`BUILTIN_TOOLS`; a pack adds its own in a tools module (``pack.yaml``
``world.tools``, loaded by :func:`crashpoint.fakes.world.load_tools`) and gets the same ledger,
scripted faults, idempotency keys and crash points, because the :class:`Toolbox` does all of that
around whichever handler it calls.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from crashpoint.fakes.ads import ADS_ARGS, ADS_HANDLERS
from crashpoint.fakes.agent import AGENT_ARGS, AGENT_HANDLERS
from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger, garbled
from crashpoint.protocols import Probe, ToolError, no_probe

Handler = Callable[["Toolbox", Mapping[str, Any], str], dict[str, Any]]


@dataclass(frozen=True)
class Tool:
    """One tool a world provides.

    Attributes:
        handler: ``f(box, args, ref) -> dict``: computes the answer of an applied call from ``args``
            (the call's arguments, a dict) and ``ref`` (a stable reference derived from the idempotency
            key, ``"x_" + 10 hex``), may read and write the service's own records with
            :meth:`Toolbox.get_state` / :meth:`Toolbox.put_state` (inside the call's transaction), and
            raises :class:`~crashpoint.protocols.ToolError` to refuse (``retryable=False`` for invalid
            arguments). It must not call other tools or sleep; time moves with the virtual clock only.
        args: argument name -> what it is (``"int > 0, in cents"``); a name ending in ``?`` is optional.
            Shown by ``crashpoint tools``; not enforced (the handler checks what it needs).
        description: one line on what the tool does.
    """

    handler: Handler
    args: Mapping[str, str] = field(default_factory=dict)
    description: str = ""


def _ref(prefix: str, key: str | None, seq: int) -> str:
    basis = key if key else f"nokey-{seq}"
    return f"{prefix}_{hashlib.sha1(basis.encode()).hexdigest()[:10]}"


class Toolbox:
    """The fake tools behind :class:`crashpoint.protocols.ToolPort`.

    Args:
        ledger: where calls, scripts and service state live.
        clock: virtual time for call timestamps (default: the ledger's clock).
        probe: crash-point hook (``before_effect:TOOL`` / ``after_effect:TOOL``).
        tools: a pack's own tools (name -> :class:`Tool`), added to :data:`BUILTIN_TOOLS`.

    Raises:
        ValueError: a name in ``tools`` is a built-in tool's.

    Built-in tools: ``refunds.draftRefundRequest``, ``refunds.issueRefund``,
    ``refunds.cancelRefundDraft``, ``notify.sendCustomerEmail``, ``approvals.request``; the ads
    API and report service of :mod:`crashpoint.fakes.ads`; the scripted agent of :mod:`crashpoint.fakes.agent`.
    """

    def __init__(self, ledger: Ledger, clock: VirtualClock | None = None, probe: Probe = no_probe,
                 tools: Mapping[str, Tool] | None = None) -> None:
        self.ledger = ledger
        self.clock = clock or VirtualClock(ledger)
        self.probe = probe
        clash = sorted(set(tools or ()) & set(BUILTIN_TOOLS))
        if clash:
            raise ValueError(f"tool(s) {', '.join(clash)} are built in; give a pack's own tools other names")
        self.handlers: dict[str, Handler] = dict(HANDLERS)
        self._stale = False  # a stale_read call's handler is running: get_state reads the records before their write
        self.handlers.update((name, t.handler) for name, t in (tools or {}).items())

    def call(self, tool: str, args: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        """Call ``tool``; see the module docstring for the idempotency contract.

        Raises:
            ToolError: scripted failure, a fatal failure replayed for its key, a service
                refusal (e.g. issuing a cancelled draft), or an unknown tool (fatal).
        """
        handler = self.handlers.get(tool)
        if handler is None:
            raise ToolError(f"unknown tool {tool!r}", retryable=False)
        key = idempotency_key or None
        at = self.clock.now()
        ledger = self.ledger
        if key is not None:
            prior = ledger.db.execute(
                "SELECT * FROM calls WHERE tool=? AND idempotency_key=? AND "
                "(outcome='applied' OR (outcome='failed' AND retryable=0)) ORDER BY seq LIMIT 1",
                (tool, key)).fetchone()
            if prior is not None:
                with ledger.transaction() as conn:
                    ledger.record_call(conn, tool, args, key, "duplicate", at, error=prior["error"],
                                       retryable=None if prior["retryable"] is None else bool(prior["retryable"]),
                                       result_json=prior["result"])
                if prior["outcome"] == "failed":
                    raise ToolError(prior["error"], retryable=False)
                return json.loads(prior["result"])
        self.probe(f"before_effect:{tool}")
        error: ToolError | None = None
        with ledger.transaction() as conn:
            outcome, how, seconds = ledger.next_script(conn, tool)
            wait_s = seconds if how.waits else None
            message = how.message.replace("{tool}", tool).replace("{retry_after}", f"{wait_s:g}" if wait_s else "")
            seq = conn.execute("SELECT COALESCE(MAX(seq), 0) + 1 FROM calls").fetchone()[0]
            if not how.applies:
                error = ToolError(message or f"{tool}: scripted {outcome} failure", retryable=how.error == "retryable",
                                  status=how.status, retry_after=wait_s)
            else:
                self._stale = how.stale
                try:
                    result = handler(self, dict(args), _ref("x", key, seq))
                except ToolError as exc:  # a stale read's refusal ("not found" yet) is worth another call
                    error = ToolError(f"{exc} (a stale read: the latest write was not seen yet)", retryable=True) \
                        if how.stale else exc
                finally:
                    self._stale = False
            if error is not None:
                ledger.record_call(conn, tool, args, key, "failed", at, error=str(error), retryable=error.retryable,
                                   lost=how.lost)
            else:
                ledger.record_call(conn, tool, args, key, "applied", at, result=result, lost=how.lost)
            if seconds and how.takes_time:  # the call takes this long: time moves with the effect, atomically
                conn.execute("UPDATE clock SET now = now + ? WHERE id=1", (seconds,))
        self.probe(f"after_effect:{tool}")
        if (how.lost and how.answer is None) or (how.applies and how.error and error is None):  # no answer came
            raise ToolError(message or f"{tool}: no answer after the effect", retryable=how.error != "fatal",
                            maybe_applied=True)
        if error is not None:
            raise error
        if how.answer is not None:  # applied, and what came back is not the answer
            return garbled(how.answer)
        return result

    # -- the fake services' own records (inside the call's transaction) -------
    def get_state(self, name: str) -> Any:
        """The service record ``name`` (a JSON value), ``None`` when never written. For handlers. In a
        ``stale_read`` call: the record as it was before its latest write (``None`` before its first)."""
        db = self.ledger.db
        row = db.execute("SELECT value FROM state_before WHERE key=?", (name,)).fetchone() if self._stale else None
        if row is None:
            row = db.execute("SELECT value FROM state WHERE key=?", (name,)).fetchone()
        return None if row is None or row[0] is None else json.loads(row[0])

    def put_state(self, name: str, value: Any) -> None:
        """Write the service record ``name`` (a JSON value) in the call's transaction: it is durable
        exactly when the call's ledger row is. For handlers. The value it replaces is kept for stale reads."""
        self.ledger.db.execute("INSERT OR REPLACE INTO state_before VALUES (?, (SELECT value FROM state WHERE key=?))",
                               (name, name))
        self.ledger.db.execute("INSERT INTO state VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                               (name, json.dumps(value)))


def _draft(box: Toolbox, args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    if not args.get("order_id") or not isinstance(args.get("amount_cents"), int) or args["amount_cents"] <= 0:
        raise ToolError(f"refunds.draftRefundRequest: invalid order_id/amount_cents in {dict(args)}", retryable=False)
    draft_id = "dr" + ref[1:]
    box.put_state(f"draft:{draft_id}", {"status": "drafted", "order_id": args["order_id"],
                                   "amount_cents": args["amount_cents"]})
    return {"draft_id": draft_id, "status": "drafted"}


def _issue(box: Toolbox, args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    draft = box.get_state(f"draft:{args.get('draft_id')}")
    if draft is None or draft["status"] != "drafted":
        raise ToolError(f"refunds.issueRefund: draft {args.get('draft_id')!r} is "
                        f"{'missing' if draft is None else draft['status']}", retryable=False)
    draft["status"] = "issued"
    box.put_state(f"draft:{args['draft_id']}", draft)
    return {"refund_id": "rf" + ref[1:], "status": "issued", "amount_cents": draft["amount_cents"]}


def _cancel_draft(box: Toolbox, args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    result = args.get("result") or {}
    draft_id = result.get("draft_id") if isinstance(result, dict) else None
    draft = box.get_state(f"draft:{draft_id}")
    if draft is None:
        raise ToolError(f"refunds.cancelRefundDraft: no draft {draft_id!r}", retryable=False)
    if draft["status"] == "issued":
        raise ToolError(f"refunds.cancelRefundDraft: draft {draft_id} was already issued", retryable=False)
    draft["status"] = "cancelled"
    box.put_state(f"draft:{draft_id}", draft)
    return {"draft_id": draft_id, "status": "cancelled"}


def _notify(box: Toolbox, args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    return {"message_id": "msg" + ref[1:], "to": args.get("to"), "template": args.get("template")}


def _approval_request(box: Toolbox, args: Mapping[str, Any], ref: str) -> dict[str, Any]:
    return {"request_id": "apr" + ref[1:], "approval_id": args.get("approval_id"), "status": "sent"}


#: The tools every world provides, by name.
BUILTIN_TOOLS: dict[str, Tool] = {
    "refunds.draftRefundRequest": Tool(_draft, {"order_id": "str", "amount_cents": "int > 0", "reason?": "str"},
                                       "draft a refund (reversible: refunds.cancelRefundDraft)"),
    "refunds.issueRefund": Tool(_issue, {"draft_id": "str, from draftRefundRequest", "amount_cents?": "int"},
                                "issue a drafted refund (irreversible)"),
    "refunds.cancelRefundDraft": Tool(_cancel_draft, {"result": "{draft_id}: the draft call's result"},
                                      "cancel a refund draft (the compensation of draftRefundRequest)"),
    "notify.sendCustomerEmail": Tool(_notify, {"to": "email address", "template": "str", "refund_id?": "str"},
                                     "send the customer an email"),
    "approvals.request": Tool(_approval_request, {"workflow_id": "str", "approval_id": "str", "timeout_s": "number",
                                                  "revision?": "int"},
                              "ask a human for an approval (called by the engine at every human_gate)"),
    # the ads API and report service of the ads-audit pack (fakes/ads.py), its scripted agent (fakes/agent.py)
    **{name: Tool(h, ADS_ARGS[name][0], ADS_ARGS[name][1]) for name, h in ADS_HANDLERS.items()},
    **{name: Tool(h, AGENT_ARGS, description) for name, (h, description) in AGENT_HANDLERS.items()},
}
#: The built-in handlers by tool name (the handlers of :data:`BUILTIN_TOOLS`).
HANDLERS: dict[str, Handler] = {name: t.handler for name, t in BUILTIN_TOOLS.items()}
