"""Oracles: each reads a finished run and says what, if anything, is wrong with it.

* ``final_status``: the case's expected status and stop reason.
* ``side_effects``: from the ledger, the external world's own record: at most once per
  effect, exactly once when the workflow succeeded, never without the approval that
  gates it, never before the effects the pack says come first (``after``), compensated
  when the workflow failed or was cancelled after it, never without an idempotency key,
  no more repeated calls than kills plus lost responses (each may repeat the one call whose answer
  it cut off); the case's ``must_not_*``, ``effects`` and ``compensated``.
* ``trace``: required events and checkpoints present, every transition legal in
  :data:`crashpoint.engine.states.TRANSITIONS` and chained, every side effect audited with
  its key, a checkpoint after every side effect and approval request, no step run again
  after its result was checkpointed or after a later step had begun (a resume that lost its place),
  one definition version
  for the whole run (every event that names a ``version``), a stop reason on every terminal state.
  A ``revision_started`` event (a denied ``revise`` gate) lets the steps it names run again.
* ``agent``: an uncertain or evidence-missing answer of an agent step (a task with
  ``agent: true``), read from the ledger's calls of its tool, never lets the run report success.
* ``differential``: a crashed-and-resumed run ends in the golden run's state with the
  golden run's effects (after the differential testing of McKeeman, 1998, and the
  crash-consistency checkers of ALICE, OSDI 2014).

Each oracle returns a list of :class:`Failure`; an empty list is a pass.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from crashpoint.engine.states import TERMINAL, Status, is_legal
from crashpoint.harness.run.driver import RunOutcome
from crashpoint.harness.load.loader import APPROVAL_TOOL, Case, Pack

STATUS_ALIASES = {"waiting_or_escalated": {"waiting_approval", "escalated"}}
TERMINAL_NAMES = {s.value for s in TERMINAL}
#: Trace kinds that describe a step's outcome inside the commit that checkpoints it; anything
#: else between a side effect's result and its checkpoint means the checkpoint came later.
SAME_COMMIT = frozenset({"tool_result", "step_result", "approval_requested", "task_skipped", "retry_scheduled",
                         "compensation_required", "compensation_result", "transition", "progress"})


@dataclass(frozen=True)
class Failure:
    """One oracle finding.

    Attributes:
        oracle: ``final_status`` | ``side_effects`` | ``trace`` | ``agent`` | ``differential``.
        message: what was expected and what was seen.
        evidence: the trace or ledger lines that show it (at most a few).
    """

    oracle: str
    message: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"oracle", "message", "evidence"}``."""
        return {"oracle": self.oracle, "message": self.message, "evidence": list(self.evidence)}


def trace_line(event: dict[str, Any]) -> str:
    """One trace event as a compact line: ``#12 checkpoint name=refund_draft``."""
    fields = " ".join(f"{k}={json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}"
                      for k, v in event.items() if k not in ("seq", "kind", "at", "side_effects", "args", "result"))
    return f"#{event.get('seq', '?')} {event.get('kind')} {fields}".rstrip()


def call_line(call: dict[str, Any]) -> str:
    """One ledger call as a line: ``ledger#3 refunds.issueRefund key=... applied``."""
    return f"ledger#{call['seq']} {call['tool']} key={call['idempotency_key']} {call['outcome']}"


def final_status(case: Case, out: RunOutcome) -> list[Failure]:
    """The run's status and stop reason against ``expected.final_status`` / ``expected.stop_reason``."""
    failures = []
    expected = case.expected.get("final_status")
    if expected and out.status not in STATUS_ALIASES.get(expected, {expected}):
        failures.append(Failure("final_status", f"expected final status {expected}, got {out.status} "
                                                f"(stop reason: {out.stop_reason})"))
    reason = case.expected.get("stop_reason")
    if reason and reason not in (out.stop_reason or ""):
        failures.append(Failure("final_status", f"expected a stop reason containing {reason!r}, "
                                                f"got {out.stop_reason!r}"))
    return failures


def side_effects(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """Side-effect safety, read from the ledger (see the module docstring)."""
    failures: list[Failure] = []
    applied = [c for c in out.calls if c["outcome"] == "applied"]
    for call in applied:
        if not call["idempotency_key"]:
            failures.append(Failure("side_effects", f"{call['tool']} was applied without an idempotency key",
                                    [call_line(call)]))
    for name, info in pack.effects.items():
        done = [c for c in applied if c["tool"] == info["tool"]]
        lines = [call_line(c) for c in out.calls if c["tool"] == info["tool"]]
        if len(done) > 1:
            failures.append(Failure("side_effects", f"effect {name} ({info['tool']}) applied {len(done)} times; "
                                                    "at most once is allowed", lines))
        if out.status == "succeeded" and info.get("required_on_success", True) and len(done) != 1:
            failures.append(Failure("side_effects", f"workflow succeeded but effect {name} was applied "
                                                    f"{len(done)} times; exactly once is required", lines))
        gate = info.get("gated_by")
        if gate:
            for call in done:
                grants = [item for kind, item in out.sequence if kind == "decision" and item["approval_id"] == gate
                          and item["granted"] and item["gseq"] < call["gseq"]]
                if not grants:
                    failures.append(Failure("side_effects", f"effect {name} applied without a granted approval "
                                                            f"{gate!r} before it", [call_line(call)]))
                # each grant answers the request (revision) made last before it, with that request's deadline
                late = [(g, d) for g in grants if (d := _deadline(out, gate, _revision_at(out, gate, g["gseq"])))
                        is not None and g["at"] > d]
                if grants and len(late) == len(grants):
                    failures.append(Failure("side_effects", f"effect {name} was applied on approval {gate!r} granted "
                                                            f"at {late[0][0]['at']:.0f}, after its deadline "
                                                            f"{late[0][1]:.0f}: an expired request was honoured",
                                            [call_line(call)]))
        for before in info.get("after", ()):
            tool = pack.effects[before]["tool"]
            for call in done:
                if not any(c["tool"] == tool and c["gseq"] < call["gseq"] for c in applied):
                    failures.append(Failure("side_effects", f"effect {name} was applied before effect {before}, "
                                                            f"which must come first", [call_line(call)]))
        comp = info.get("compensation")
        undone = [c for c in applied if comp and c["tool"] == comp]
        refused = [c for c in out.calls if comp and c["tool"] == comp and c["outcome"] == "failed"
                   and not c.get("retryable")]  # the world refused the compensation: reported, not hidden
        if comp and done and out.status in ("failed", "cancelled") and not undone and not (
                refused and out.status == "failed" and "compensation" in (out.stop_reason or "")):
            failures.append(Failure("side_effects", f"workflow ended {out.status} after effect {name} was applied, "
                                                    f"but its compensation {comp} was never applied", lines))
        if len(undone) > 1:
            failures.append(Failure("side_effects", f"compensation {comp} of {name} applied {len(undone)} times",
                                    [call_line(c) for c in undone]))
        if case.expected.get(f"must_not_{name}") and done:
            failures.append(Failure("side_effects", f"must_not_{name}: effect {name} was applied {len(done)} time(s)",
                                    lines))
        want = case.expected.get("effects", {}).get(name)
        if want is not None and len(done) != want:
            failures.append(Failure("side_effects", f"expected effect {name} applied {want} time(s), got {len(done)}",
                                    lines))
        if name in case.expected.get("compensated", ()) and not undone:
            failures.append(Failure("side_effects", f"expected effect {name} compensated, but its compensation "
                                                    f"{comp or '(none in the pack)'} was never applied", lines))
    wf = pack.workflows.get(case.workflow) or {"phases": []}
    pivots = {t["tool"] for p in wf["phases"] for t in p["tasks"] if t.get("irreversible")}
    turned = [c for c in applied if c["tool"] in pivots]
    if turned:  # after its pivot a saga completes forward (Garcia-Molina & Salem, "Sagas", 1987)
        undo_tools = {info["compensation"] for info in pack.effects.values() if info.get("compensation")}
        late = [c for c in out.calls if c["tool"] in undo_tools and c["gseq"] > turned[0]["gseq"]]
        if late or out.status == "cancelled":
            failures.append(Failure("side_effects", f"the irreversible effect {turned[0]['tool']} was applied, yet the "
                                                    f"run then {'compensated' if late else 'ended cancelled'}: after "
                                                    "its pivot a saga must complete forward",
                                    [call_line(c) for c in [turned[0], *late]][:6]))
    repeats = [c for c in out.calls if c["outcome"] == "duplicate"]
    lost = sum(1 for c in out.calls if c.get("lost"))  # answers the tool never delivered (tool_lost_response)
    if len(repeats) > out.kills + lost:
        failures.append(Failure("side_effects", f"{len(repeats)} tool calls repeated an idempotency key after "
                                                f"{out.kills} kill(s) and {lost} lost response(s): each may repeat "
                                                "at most the one call whose result it cut off; the rest re-ran "
                                                "finished steps", [call_line(c) for c in repeats][:6]))
    asked = Counter((c["args"].get("approval_id"), c["args"].get("revision", 0)) for c in applied
                    if c["tool"] == APPROVAL_TOOL)
    for (approval_id, revision), n in asked.items():
        if n > 1:
            failures.append(Failure("side_effects", f"approval {approval_id!r} was requested from a human {n} times"
                                    + (f" in revision {revision}" if revision else "")))
    for approval_id in {a for a, _ in asked}:  # a new request (revision) only after a denial of the last one
        revisions = sum(1 for a, _ in asked if a == approval_id)
        denials = sum(1 for d in out.decisions if d["approval_id"] == approval_id and not d["granted"])
        if revisions > denials + 1:
            failures.append(Failure("side_effects", f"approval {approval_id!r} was requested in {revisions} revisions "
                                                    f"after {denials} denial(s): a revision follows a denial"))
    return failures


def _revision_at(out: RunOutcome, approval_id: str, gseq: int) -> int:
    """The revision of the last request of ``approval_id`` made before ledger position ``gseq`` (0 if none)."""
    asked = [c for c in out.calls if c["tool"] == APPROVAL_TOOL and c["outcome"] == "applied"
             and c["args"].get("approval_id") == approval_id and c["gseq"] < gseq]
    return int(asked[-1]["args"].get("revision", 0)) if asked else 0


def _deadline(out: RunOutcome, approval_id: str, revision: int = 0) -> float | None:
    """The deadline of the first request of ``approval_id`` (of its ``revision``, 0 before any): as the
    engine announced it in its first ``approval_requested`` trace event, else from the ledger (request
    time + ``timeout_s``), seconds."""
    for event in out.trace:
        if event.get("kind") == "approval_requested" and event.get("approval_id") == approval_id and \
                event.get("revision", 0) == revision and isinstance(event.get("deadline"), (int, float)):
            return float(event["deadline"])
    for call in out.calls:
        if call["tool"] == APPROVAL_TOOL and call["outcome"] == "applied" and \
                call["args"].get("approval_id") == approval_id and call["args"].get("revision", 0) == revision \
                and call["args"].get("timeout_s") is not None:
            return float(call["at"]) + float(call["args"]["timeout_s"])
    return None


def trace_completeness(case: Case, out: RunOutcome) -> list[Failure]:
    """Trace completeness (see the module docstring)."""
    failures: list[Failure] = []
    trace = out.trace
    kinds = [e["kind"] for e in trace]
    missing = [k for k in case.expected.get("required_trace_events", ()) if k not in kinds]
    if missing:
        failures.append(Failure("trace", f"required trace events missing: {missing}"))
    present = [k for k in case.expected.get("forbidden_trace_events", ()) if k in kinds]
    if present:
        failures.append(Failure("trace", f"forbidden trace events present: {present}",
                                [trace_line(e) for e in trace if e["kind"] in present][:5]))
    names = {e.get("name") for e in trace if e["kind"] == "checkpoint"}
    lost = [c for c in case.expected.get("requires_checkpoint", ()) if c not in names]
    if lost:
        failures.append(Failure("trace", f"required checkpoints missing: {lost}; seen: {sorted(n for n in names if n)}"))
    current = Status.ACCEPTED.value if trace else None
    for event in trace:
        if event["kind"] != "transition":
            continue
        if not is_legal(event["from"], event["to"]):
            failures.append(Failure("trace", f"illegal transition {event['from']} -> {event['to']}",
                                    [trace_line(event)]))
        elif event["from"] != current:
            failures.append(Failure("trace", f"transition from {event['from']} while the workflow was {current}",
                                    [trace_line(event)]))
        current = event["to"]
    if trace and current != out.status:
        failures.append(Failure("trace", f"the trace ends in {current} but the engine reports {out.status}"))
    keys_traced = {(e.get("tool"), e.get("idempotency_key")) for e in trace if e["kind"] == "tool_call"}
    for event in trace:
        if event["kind"] == "tool_call" and event.get("side_effect") and not event.get("idempotency_key"):
            failures.append(Failure("trace", f"side effect {event.get('tool')} called without an idempotency key",
                                    [trace_line(event)]))
    for call in out.calls:
        if call["outcome"] == "applied" and (call["tool"], call["idempotency_key"]) not in keys_traced:
            failures.append(Failure("trace", f"{call['tool']} effect in the ledger is not audited in the trace "
                                             f"(key {call['idempotency_key']})", [call_line(call)]))
    for i, event in enumerate(trace):
        needs = (event["kind"] == "tool_result" and event.get("ok")) or event["kind"] == "approval_requested"
        if not needs:
            continue
        # The checkpoint must close the same commit: only events that describe this step's
        # outcome may stand between the result and its checkpoint.
        nxt = next((e for e in trace[i + 1:] if e["kind"] not in SAME_COMMIT), None)
        if nxt is None or nxt["kind"] != "checkpoint":
            what = event.get("tool") if event["kind"] == "tool_result" else f"approval {event.get('approval_id')}"
            failures.append(Failure("trace", f"no checkpoint after {what} before the next step",
                                    [trace_line(event)] + ([trace_line(nxt)] if nxt else [])))
    settled: set[str] = set()
    pending: set[str] = set()
    for event in trace:
        if event["kind"] == "revision_started":  # a denied gate sends these steps back: they run again
            settled -= set(event.get("steps") or ())
        elif event["kind"] == "tool_result" and event.get("ok"):
            pending.add(event.get("task"))
        elif event["kind"] == "checkpoint":
            settled |= pending
            pending = set()
        elif event["kind"] == "step_started" and event.get("task") in settled:
            failures.append(Failure("trace", f"step {event.get('task')} ran again after its result was checkpointed: "
                                             "the resumed workflow lost its place", [trace_line(event)]))
            settled.discard(event.get("task"))
    begun: list[str] = []  # tasks in the order their steps began; going back means a lost record of progress
    for event in trace:
        if event["kind"] == "revision_started":
            begun = [b for b in begun if b not in (event.get("steps") or ())]
            continue
        if event["kind"] != "step_started" or (begun and event.get("task") == begun[-1]):
            continue
        if event.get("task") in begun:
            failures.append(Failure("trace", f"step {event.get('task')} ran again after step {begun[-1]} had begun: "
                                             "the resumed workflow lost its place", [trace_line(event)]))
            break
        begun.append(event.get("task"))
    versions = [e for e in trace if e.get("version") is not None
                and e["kind"] in ("workflow_accepted", "workflow_started", "workflow_resumed")]
    changed = [e for e in versions if e["version"] != versions[0]["version"]]
    if changed:
        failures.append(Failure("trace", f"the run changed definition version mid-run: it started on version "
                                         f"{versions[0]['version']}, then ran version {changed[0]['version']}",
                                [trace_line(versions[0]), trace_line(changed[0])]))
    last_error: dict[str, dict[str, Any]] = {}
    for event in trace:
        if event["kind"] == "tool_result" and not event.get("ok"):
            last_error[event.get("task")] = event
        elif event["kind"] == "retry_scheduled":
            error = last_error.get(event.get("task"))
            if error is not None and error.get("retryable") is False:
                failures.append(Failure("trace", f"task {event.get('task')} was retried after a non-retryable error",
                                        [trace_line(error), trace_line(event)]))
    if out.status == Status.WAITING_APPROVAL.value and out.pending_approval and out.clock_now is not None:
        deadline = _deadline(out, out.pending_approval.get("approval_id", ""),
                             int(out.pending_approval.get("revision", 0) or 0))
        if deadline is not None and out.clock_now > deadline:
            failures.append(Failure("trace", f"approval {out.pending_approval.get('approval_id')!r} is still waited "
                                             f"for at {out.clock_now:.0f}, past its deadline {deadline:.0f}"))
    if out.status in TERMINAL_NAMES:
        if not out.stop_reason:
            failures.append(Failure("trace", f"terminal status {out.status} has no stop reason"))
        finished = [e for e in trace if e["kind"] == "workflow_finished"]
        if not finished or not finished[-1].get("stop_reason") or finished[-1].get("status") != out.status:
            failures.append(Failure("trace", f"terminal status {out.status} has no workflow_finished event "
                                             "with that status and a stop reason",
                                    [trace_line(e) for e in finished[-1:]]))
    return failures


#: Agent verdicts that must stop a run short of success.
AGENT_STOP_VERDICTS = ("uncertain", "evidence_missing")


def agent_verdicts(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """An uncertain or evidence-missing agent answer never lets the run report success.

    Reads the world's record: every call of an agent step's tool (a task with ``agent: true`` in the
    case's workflow) whose answer reached the engine (``applied`` and not lost, or a ``duplicate``
    that replayed it) with a verdict in :data:`AGENT_STOP_VERDICTS`. A run that ended ``succeeded``
    after any such answer fails.
    """
    if out.status != Status.SUCCEEDED.value:
        return []
    wf = pack.workflows.get(case.workflow) or {"phases": []}
    tools = {t["tool"] for p in wf["phases"] for t in p["tasks"] if t.get("agent")}
    unsure = [c for c in out.calls if c["tool"] in tools and isinstance(c.get("result"), dict)
              and c["result"].get("verdict") in AGENT_STOP_VERDICTS
              and (c["outcome"] == "duplicate" or (c["outcome"] == "applied" and not c.get("lost")))]
    if not unsure:
        return []
    first = unsure[0]
    return [Failure("agent", f"the run ended succeeded after the agent answered {first['result']['verdict']} "
                             f"({first['tool']}): an unsure answer must escalate, never reach success",
                    [f"{call_line(c)} verdict={c['result']['verdict']}" for c in unsure][:5])]


def effect_signature(out: RunOutcome) -> Counter[tuple[str, str | None, str]]:
    """Applied effects of a run as a multiset of ``(tool, idempotency_key, arguments as JSON)``."""
    return Counter((c["tool"], c["idempotency_key"], json.dumps(c["args"], sort_keys=True))
                   for c in out.calls if c["outcome"] == "applied")


def differential(out: RunOutcome, golden: RunOutcome) -> list[Failure]:
    """A crashed-and-resumed run must end like the golden run: same status, stop reason, and the
    same effects with the same arguments (a resume that lost data sends different arguments)."""
    failures = []
    if (out.status, out.stop_reason) != (golden.status, golden.stop_reason):
        failures.append(Failure("differential", f"golden run ended {golden.status} ({golden.stop_reason}); "
                                                f"after the crash the run ended {out.status} ({out.stop_reason})"))
    mine, gold = effect_signature(out), effect_signature(golden)
    if mine != gold:
        extra = sorted(f"{t} key={k} args={a} x{n}" for (t, k, a), n in (mine - gold).items())
        lost = sorted(f"{t} key={k} args={a} x{n}" for (t, k, a), n in (gold - mine).items())
        failures.append(Failure("differential", f"effects differ from the golden run: extra {extra}, missing {lost}"))
    return failures


def judge(case: Case, pack: Pack, out: RunOutcome, golden: RunOutcome | None) -> list[Failure]:
    """Every oracle on one run; the differential one only for crashed runs with a golden run."""
    from crashpoint.harness.judge import invariants  # it builds on this module's Failure and lines

    failures = final_status(case, out) + side_effects(case, pack, out) + trace_completeness(case, out) + \
        agent_verdicts(case, pack, out) + invariants.check(case, pack, out)
    if golden is not None and out.crash_point is not None:
        failures += differential(out, golden)
    return failures
