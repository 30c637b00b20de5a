"""Replay: re-drive a fresh engine through a recorded run and compare its decisions.

:func:`replay` reads a trace file (:mod:`crashpoint.harness.traces.tracefile`), deploys the recorded
workflow definition on a fresh engine in a temporary folder, and makes the recorded external
deliveries (start, approvals, cancels, clock moves, restarts) in order, letting one worker run
after each step. Nothing is killed: crash points do not matter to a replay.

The tools do not act on any world: the replay toolbox (world factory :func:`world`, i.e.
``crashpoint.harness.traces.replay:world``) answers each call of ``(tool, idempotency key)`` with the
recorded answers for that pair, in order, read from ``RUN_DIR/replay.calls.json``. A call with
no recorded answer left is a divergence (the toolbox fails it fatally and notes it). In a run
that was killed, answers the recorded engine never durably acted on (the call in flight when a
worker died) are left out, by aligning the recorded calls with the ``tool_result`` events of
the recorded journal.

The comparison is over **decisions**, the journal events that say what the engine decided:

=====================  ===========================================
kind                   fields compared
=====================  ===========================================
``transition``         ``from``, ``to``
``checkpoint``         ``name``
``step_result``        ``task``, ``transition``
``tool_call``          ``tool``, ``idempotency_key``
``approval_requested`` ``approval_id``
``approval_granted`` / ``approval_denied`` / ``approval_timeout``  ``approval_id`` (and ``by``)
``workflow_finished``  ``status``
=====================  ===========================================

Timestamps, sequence numbers, ``workflow_resumed`` and worker ids are ignored, and a
``tool_call`` that repeats the previous decision (same tool and key: a call retried after a
kill, at-least-once) counts once, so a trace recorded from a killed run replays too.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.adapters.protocol import EngineAdapter, RunContext
from crashpoint.protocols import Probe, ToolError, no_probe

# Worker processes import this module for :func:`world`; the driver, the loader and jsonschema
# are imported inside the functions that need them, so a replay worker starts as fast as any.

#: World factory of the replay toolbox, for ``RunContext.world``.
WORLD_SPEC = "crashpoint.harness.traces.replay:world"
#: File of the run folder holding the recorded answers the toolbox gives.
CALLS_FILE = "replay.calls.json"
#: File of the run folder listing calls that had no recorded answer (JSON lines).
UNANSWERED_FILE = "replay.unanswered.jsonl"
#: Fields compared per decision kind.
DECISION_FIELDS: dict[str, tuple[str, ...]] = {
    "transition": ("from", "to"),
    "checkpoint": ("name",),
    "step_result": ("task", "transition"),
    "tool_call": ("tool", "idempotency_key"),
    "approval_requested": ("approval_id",),
    "approval_granted": ("approval_id", "by"),
    "approval_denied": ("approval_id", "by"),
    "approval_timeout": ("approval_id",),
    "workflow_finished": ("status",),
}
#: Delivery kinds a replay sends again (as the driver sent them; a ``kill`` is not one).
REDELIVERED = frozenset({"start", "approval", "cancel", "approval_timeout", "advance_clock", "deploy", "restart"})
#: The error a toolbox gives for an answer the caller never got (a ``lost`` call).
LOST_ANSWER = "{tool}: connection reset after the effect (the answer was lost)"


# --------------------------------------------------------------------------- decisions

def decisions(journal: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The decision events of a journal, reduced to ``{"kind", field: value}`` (see the module docstring)."""
    out: list[dict[str, Any]] = []
    for event in journal:
        kind = event.get("kind")
        if kind not in DECISION_FIELDS:
            continue
        item = {"kind": kind, **{f: event.get(f) for f in DECISION_FIELDS[kind] if f in event}}
        if kind == "tool_call" and out and out[-1] == item:
            continue  # the same call again after a kill: one decision
        out.append(item)
    return out


def render_decision(item: Mapping[str, Any] | None) -> str:
    """One decision as text: ``tool_call tool=refunds.issueRefund idempotency_key=wf-x/issue_refund``."""
    if item is None:
        return "<end of run>"
    fields = " ".join(f"{k}={v}" for k, v in item.items() if k != "kind")
    return f"{item['kind']} {fields}".rstrip()


@dataclass(frozen=True)
class Divergence:
    """The first decision where the replay differs from the recording.

    Attributes:
        index: 1-based position in the decision sequence.
        expected: the recorded decision (``None``: the recording had ended).
        got: the replayed decision (``None``: the replay had ended).
        detail: why, when the decisions alone do not say it (a call with no recorded answer,
            a worker that crashed).
    """

    index: int
    expected: dict[str, Any] | None
    got: dict[str, Any] | None
    detail: str = ""

    def message(self) -> str:
        """``first divergence at decision #k: expected <event>, got <event>``."""
        text = (f"first divergence at decision #{self.index}: expected {render_decision(self.expected)}, "
                f"got {render_decision(self.got)}")
        return text + (f" ({self.detail})" if self.detail else "")


@dataclass
class ReplayResult:
    """What a replay found.

    Attributes:
        ok: no divergence.
        decisions: decisions compared (the recorded run's count).
        divergence: the first divergence, or ``None``.
        recorded_engine / engine: the engine the trace was recorded on and the one replayed.
        status: the replayed workflow's final status.
        notes: facts worth showing (recorded answers never asked for, events not re-delivered).
        replayed: the replayed decision sequence.
    """

    ok: bool
    decisions: int
    divergence: Divergence | None
    recorded_engine: str = ""
    engine: str = ""
    status: str | None = None
    notes: list[str] = field(default_factory=list)
    replayed: list[dict[str, Any]] = field(default_factory=list)

    def message(self) -> str:
        """``replay: N decisions, no divergence`` or the divergence's message."""
        if self.divergence is None:
            return f"replay: {self.decisions} decisions, no divergence"
        return self.divergence.message()


def compare(expected: list[dict[str, Any]], got: list[dict[str, Any]]) -> Divergence | None:
    """The first position where two decision sequences differ, or ``None``."""
    for i in range(max(len(expected), len(got))):
        a = expected[i] if i < len(expected) else None
        b = got[i] if i < len(got) else None
        if a != b:
            return Divergence(i + 1, a, b)
    return None


# --------------------------------------------------------------------------- recorded answers

def _answer(call: Mapping[str, Any]) -> dict[str, Any]:
    """What the caller of a recorded call got: ``{"tool", "idempotency_key", "ok", "result" | "error", ...}``."""
    base = {"tool": call["tool"], "idempotency_key": call.get("idempotency_key"), "args": call.get("args"),
            "outcome": call["outcome"], "seq": call.get("seq"), "duration_s": call.get("duration_s")}
    if call.get("lost"):
        return base | {"ok": False, "error": LOST_ANSWER.format(tool=call["tool"]), "retryable": True}
    if call["outcome"] == "failed" or call.get("error") is not None:
        retryable = bool(call.get("retryable")) and call["outcome"] == "failed"
        return base | {"ok": False, "error": call.get("error") or f"{call['tool']}: failed", "retryable": retryable}
    return base | {"ok": True, "result": call.get("result")}


def recorded_answers(trace: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The answers the replay toolbox gives, in recorded order.

    For a run that was not killed, every recorded call. For a killed run, the calls of each
    ``(tool, key)`` are aligned with the journal's ``tool_result`` events for that key: a recorded
    call skipped before the next matching result was answered to a worker that died before it
    made the answer durable, so the replayed engine never asks for it.
    """
    answers = [_answer(c) for c in trace["calls"]]
    if not trace["run"].get("kills"):
        return answers
    results: dict[tuple[str, Any], list[dict[str, Any]]] = {}
    for event in trace["journal"]:
        if event.get("kind") == "tool_result" and "idempotency_key" in event:
            results.setdefault((event.get("tool"), event["idempotency_key"]), []).append(event)
    dropped: set[int] = set()
    by_key: dict[tuple[str, Any], list[int]] = {}
    for i, a in enumerate(answers):
        by_key.setdefault((a["tool"], a["idempotency_key"]), []).append(i)
    for key, indexes in by_key.items():
        cursor = 0
        for event in results.get(key, []):
            match = next((j for j in range(cursor, len(indexes)) if _same(answers[indexes[j]], event)), None)
            if match is None:
                break
            dropped.update(indexes[cursor:match])
            cursor = match + 1
    return [a for i, a in enumerate(answers) if i not in dropped]


def _same(answer: Mapping[str, Any], event: Mapping[str, Any]) -> bool:
    if bool(event.get("ok")) != answer["ok"]:
        return False
    return not answer["ok"] or "result" not in event or event["result"] == answer["result"]


# --------------------------------------------------------------------------- the replay toolbox

class ReplayToolbox:
    """A :class:`~crashpoint.protocols.ToolPort` that answers from a recording.

    Each ``(tool, key)`` pair has a queue of recorded answers; a cursor per pair lives in the
    run's ledger file (so it survives the worker processes of a replay), and every answer is
    recorded in its ``calls`` table like a real call. A call with no answer left fails fatally
    and is appended to :data:`UNANSWERED_FILE`.

    Args:
        run_dir: the replay's run folder (``replay.calls.json``, ``ledger.db``).
        ledger: the run's ledger (virtual clock, cursors, the calls answered).
        probe: crash-point hook (``before_effect:TOOL`` / ``after_effect:TOOL``; nothing is killed).
    """

    def __init__(self, run_dir: str | Path, ledger: Ledger, probe: Probe = no_probe) -> None:
        self.run_dir = Path(run_dir)
        self.ledger = ledger
        self.probe = probe
        data = json.loads((self.run_dir / CALLS_FILE).read_text(encoding="utf-8"))
        self.queues: dict[str, list[dict[str, Any]]] = {}
        for answer in data["answers"]:
            self.queues.setdefault(self._pair(answer["tool"], answer["idempotency_key"]), []).append(answer)

    @staticmethod
    def _pair(tool: str, key: str | None) -> str:
        return json.dumps([tool, key])

    def call(self, tool: str, args: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        """The next recorded answer of ``(tool, idempotency_key)``; see the class docstring.

        Raises:
            ToolError: a recorded failure (retryable as recorded), or no recorded answer left (fatal).
        """
        key = idempotency_key or None
        pair = self._pair(tool, key)
        self.probe(f"before_effect:{tool}")
        with self.ledger.transaction() as conn:
            row = conn.execute("SELECT value FROM state WHERE key=?", ("replay:" + pair,)).fetchone()
            used = json.loads(row[0]) if row else 0
            queue = self.queues.get(pair, [])
            answer = queue[used] if used < len(queue) else None
            conn.execute("INSERT INTO state VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                         ("replay:" + pair, json.dumps(used + 1)))
            at = float(conn.execute("SELECT now FROM clock WHERE id=1").fetchone()[0])
            if answer is None:
                error = (f"replay: no recorded answer for {tool} key={key} (call {used + 1}; the recording "
                         f"has {len(queue)})")
                self.ledger.record_call(conn, tool, args, key, "failed", at, error=error, retryable=False)
            elif answer["ok"]:
                self.ledger.record_call(conn, tool, args, key, answer["outcome"], at, result=answer.get("result"))
            else:
                self.ledger.record_call(conn, tool, args, key, answer["outcome"], at, error=answer["error"],
                                        retryable=bool(answer["retryable"]))
                if answer.get("duration_s"):  # the recorded call took this long (a slow tool)
                    conn.execute("UPDATE clock SET now = now + ? WHERE id=1", (float(answer["duration_s"]),))
        self.probe(f"after_effect:{tool}")
        if answer is None:
            with open(self.run_dir / UNANSWERED_FILE, "a", encoding="utf-8") as fh:
                fh.write(json.dumps({"tool": tool, "idempotency_key": key, "call": used + 1}) + "\n")
            raise ToolError(error, retryable=False)
        if not answer["ok"]:
            raise ToolError(answer["error"], retryable=bool(answer["retryable"]))
        return answer["result"]


def world(run_dir: str, probe: Probe = no_probe) -> tuple[ReplayToolbox, VirtualClock]:
    """World factory (``crashpoint.harness.traces.replay:world``): the replay toolbox of ``run_dir`` and its clock."""
    ledger = Ledger(Path(run_dir) / LEDGER_FILE)
    return ReplayToolbox(run_dir, ledger, probe), VirtualClock(ledger)


# --------------------------------------------------------------------------- the replay

def _adapter(engine: str | None) -> EngineAdapter:
    from crashpoint.harness.adapters.reference import ReferenceAdapter

    return ReferenceAdapter(engine=engine, name=engine) if engine else ReferenceAdapter()


def replay(trace: Mapping[str, Any] | str | Path, engine: str | None = None, *,
           adapter: EngineAdapter | None = None, workdir: str | Path | None = None,
           worker_timeout_s: float = 60.0) -> ReplayResult:
    """Re-drive a fresh engine through the recorded run ``trace`` and compare decisions.

    Args:
        trace: a trace document (from :func:`~crashpoint.harness.traces.tracefile.read_trace`) or a trace file path.
        engine: ``MODULE:CLASS`` of a reference-engine subclass to replay on (default: the reference engine).
        adapter: any adapter instead (``engine`` is then ignored).
        workdir: the run folder to use (must not exist; kept); default a temporary folder, removed.
        worker_timeout_s: wall seconds one worker may take.

    Returns:
        a :class:`ReplayResult`; ``ok`` when the replayed decisions equal the recorded ones and every
        call had a recorded answer.

    An engine that raises while being driven, or a worker that crashes or times out, is a divergence
    (at the first decision the replay did not reach) whose ``detail`` says what happened.

    Raises:
        CaseError: ``trace`` is a path to a malformed trace file.
    """
    if not isinstance(trace, Mapping):
        from crashpoint.harness.traces.tracefile import read_trace

        trace = read_trace(trace)
    adapter = adapter or _adapter(engine)
    expected = decisions(trace["journal"])
    recorded = trace["engine"].get("spec") or trace["engine"]["name"]
    result = ReplayResult(False, len(expected), None, recorded_engine=recorded,
                          engine=f"{adapter.name} {adapter.version()}")
    own = workdir is None
    root = Path(tempfile.mkdtemp(prefix="crashpoint-replay-")) if own else Path(workdir)
    run_dir = root / "run" if own else root
    run_dir.mkdir(parents=True, exist_ok=False)
    try:
        answers = recorded_answers(trace)
        (run_dir / CALLS_FILE).write_text(json.dumps({"answers": answers}, indent=1), encoding="utf-8")
        ctx = RunContext(run_dir=run_dir, world=WORLD_SPEC)
        wid = trace["run"]["workflow_id"]
        try:
            crashed = _drive(adapter, ctx, trace, wid, worker_timeout_s, result.notes)
        except Exception as exc:  # the engine (or its adapter) broke while being driven: a finding, not a crash
            crashed = f"the engine raised during the replay: {type(exc).__name__}: {exc}"
        try:
            got = decisions(adapter.trace(ctx, wid))
            result.status = adapter.status(ctx, wid).get("status")
        except Exception as exc:
            got = []
            crashed = crashed or f"the engine's trace cannot be read: {type(exc).__name__}: {exc}"
        result.replayed = got
        result.divergence = compare(expected, got)
        if crashed:
            at = result.divergence or Divergence(len(got) + 1, None, None)
            result.divergence = Divergence(at.index, at.expected, at.got, crashed)
        unanswered = _unanswered(run_dir)
        if result.divergence is None and unanswered:
            first = unanswered[0]
            probe = {"kind": "tool_call", "tool": first["tool"], "idempotency_key": first["idempotency_key"]}
            index = max((i for i, d in enumerate(got) if d == probe), default=len(got) - 1)
            result.divergence = Divergence(index + 1, expected[index] if index < len(expected) else None,
                                           got[index] if index < len(got) else None,
                                           f"call {first['call']} of {first['tool']} key={first['idempotency_key']} "
                                           "has no recorded answer")
        elif unanswered:
            first = unanswered[0]
            if not result.divergence.detail:
                result.divergence = Divergence(result.divergence.index, result.divergence.expected,
                                               result.divergence.got,
                                               f"before it, call {first['call']} of {first['tool']} "
                                               f"key={first['idempotency_key']} had no recorded answer")
        used = Ledger(run_dir / LEDGER_FILE)
        try:
            spare = len(answers) - len([c for c in used.calls() if not (c.error or "").startswith("replay: ")])
        finally:
            used.close()
        if spare > 0 and result.divergence is None:
            result.notes.append(f"{spare} recorded answer(s) were not asked for (calls repeated after a kill)")
        result.ok = result.divergence is None
        return result
    finally:
        if own:
            shutil.rmtree(root, ignore_errors=True)


def _unanswered(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / UNANSWERED_FILE
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()] if path.exists() else []


def _drive(adapter: EngineAdapter, ctx: RunContext, trace: Mapping[str, Any], wid: str, worker_timeout_s: float,
           notes: list[str]) -> str:
    """Make the recorded deliveries, one worker segment after each step (the driver's mechanism:
    :mod:`crashpoint.harness.run.delivery`, new interpreters, nothing killed); returns why a worker
    crashed, or ``""``."""
    from crashpoint.errors import EngineCrashed
    from crashpoint.harness.run.delivery import run_segment
    from crashpoint.harness.model.outcomes import RunOutcome
    from crashpoint.harness.process.launch import ColdLauncher

    adapter.prepare(ctx, {trace["workflow"]["workflow"]: trace["workflow"]})
    ledger = Ledger(ctx.run_dir / LEDGER_FILE)
    clock = VirtualClock(ledger)
    log = RunOutcome(trace["case"]["case_id"], None, wid, ctx.run_dir)
    launch = ColdLauncher(adapter, worker_timeout_s)
    try:
        steps: list[list[dict[str, Any]]] = []
        for d in trace["deliveries"]:
            if d["kind"] == "kill":
                continue
            if not steps or steps[-1][0]["step"] != d["step"]:
                steps.append([])
            steps[-1].append(d)
        for step in steps:
            for d in step:
                _deliver(adapter, ctx, ledger, clock, wid, d, notes)
            try:
                run_segment(adapter, ctx, launch, log, None, witness=False)
            except EngineCrashed as exc:
                return f"the replay worker crashed: {exc}"
            finally:
                notes += log.notes
                log.notes = []
        return ""
    finally:
        ledger.close()


def _deliver(adapter: EngineAdapter, ctx: RunContext, ledger: Ledger, clock: VirtualClock, wid: str,
             d: Mapping[str, Any], notes: list[str]) -> None:
    """Send one recorded delivery (as the driver sent it), noting what cannot be sent again."""
    from crashpoint.harness.run.delivery import send

    kind = d["kind"]
    if kind == "approval_timeout" and "clock_to" not in d:
        return  # nothing was pending in the recorded run: the clock did not move
    if kind not in REDELIVERED or (kind == "deploy" and not hasattr(adapter, "deploy")):
        notes.append(f"step {d['step']}: a recorded {kind!r} is not re-delivered by replay")
        return
    # a late duplicate (``redelivery_of``) is no new human decision
    if send(adapter, ctx, ledger, clock, wid, d, first="redelivery_of" not in d) is None and kind == "approval_timeout":
        notes.append(f"step {d['step']} approval_timeout: no approval was pending in the replay")
