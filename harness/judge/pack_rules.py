"""The built-in oracle rules: each reads a finished run and says what, if anything, is wrong with it.

Every rule is registered with :func:`crashpoint.harness.model.rules.rule` under a stable id whose
prefix is its oracle family (README "Oracle rules" lists them all):

* ``final_status.*``: the case's expected status and stop reason.
* ``side_effects.*``: from the ledger, the external world's own record: at most once per
  effect, exactly once when the workflow succeeded, never without the approval that
  gates it, never before the effects the pack says come first (``after``), compensated
  when the workflow failed or was cancelled after it, never without an idempotency key,
  no more repeated calls than kills plus lost responses (each may repeat the one call whose answer
  it cut off); the case's ``must_not_*``, ``effects`` and ``compensated``.
* ``trace.*``: required events and checkpoints present, every transition legal in
  :data:`crashpoint.engine.states.TRANSITIONS` and chained, every side effect audited with
  its key, a checkpoint after every side effect and approval request, no step run again
  after its result was checkpointed or after a later step had begun (a resume that lost its place),
  one definition version
  for the whole run (every event that names a ``version``), a stop reason on every terminal state.
  A ``revision_started`` event (a denied ``revise`` gate) lets the steps it names run again.
* ``agent.*``: an uncertain or evidence-missing answer of an agent step (a task with
  ``agent: true``), read from the ledger's calls of its tool, never lets the run report success.
* ``differential.*``: a crashed-and-resumed run ends in the golden run's state with the
  golden run's effects (after the differential testing of McKeeman, 1998, and the
  crash-consistency checkers of ALICE, OSDI 2014).

The functions :func:`final_status`, :func:`side_effects`, :func:`trace_completeness`,
:func:`agent_verdicts`, :func:`differential` and :func:`judge` run one family (or all) on a run and
return its findings (an empty list is a pass); the verdict of a run is
:func:`crashpoint.harness.judge.verdict.judge`'s.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from crashpoint.engine.states import TERMINAL, Status, is_legal
from crashpoint.harness.model.rules import Failure, Finding, RuleContext, found, rule, run_family
from crashpoint.harness.load.loader import APPROVAL_TOOL, Case, Pack
from crashpoint.harness.model.outcomes import RunOutcome

STATUS_ALIASES = {"waiting_or_escalated": {"waiting_approval", "escalated"}}
TERMINAL_NAMES = {s.value for s in TERMINAL}
#: Trace kinds that describe a step's outcome inside the commit that checkpoints it; anything
#: else between a side effect's result and its checkpoint means the checkpoint came later.
SAME_COMMIT = frozenset({"tool_result", "step_result", "approval_requested", "task_skipped", "retry_scheduled",
                         "compensation_required", "compensation_result", "transition", "progress"})
#: Rules whose findings mean an effect (or a request to a human) happened more than once: what the
#: ``duplicate_event_safety`` metric counts (a *missing* effect is not a duplicate).
DUPLICATE_RULES = frozenset({"side_effects.at_most_once", "side_effects.compensation_at_most_once",
                             "side_effects.approval_asked_once"})


def trace_line(event: dict[str, Any]) -> str:
    """One trace event as a compact line: ``#12 checkpoint name=refund_draft``."""
    fields = " ".join(f"{k}={json.dumps(v, sort_keys=True) if isinstance(v, (dict, list)) else v}"
                      for k, v in event.items() if k not in ("seq", "kind", "at", "side_effects", "args", "result"))
    return f"#{event.get('seq', '?')} {event.get('kind')} {fields}".rstrip()


def call_line(call: dict[str, Any]) -> str:
    """One ledger call as a line: ``ledger#3 refunds.issueRefund key=... applied``."""
    return f"ledger#{call['seq']} {call['tool']} key={call['idempotency_key']} {call['outcome']}"


# --------------------------------------------------------------------------- final_status

@rule("final_status.expected", kind="expectation", description="the run ends in the case's expected.final_status "
                                            "(waiting_or_escalated: waiting_approval or escalated)")
def _status_expected(ctx: RuleContext) -> list[Finding]:
    out, expected = ctx.outcome, ctx.case.expected.get("final_status")
    if expected and out.status not in STATUS_ALIASES.get(expected, {expected}):
        return [found(f"expected final status {expected}, got {out.status} (stop reason: {out.stop_reason})")]
    return []


@rule("final_status.stop_reason", kind="expectation", description="the stop reason contains the case's expected.stop_reason")
def _status_stop_reason(ctx: RuleContext) -> list[Finding]:
    out, reason = ctx.outcome, ctx.case.expected.get("stop_reason")
    if reason and reason not in (out.stop_reason or ""):
        return [found(f"expected a stop reason containing {reason!r}, got {out.stop_reason!r}")]
    return []


# --------------------------------------------------------------------------- side_effects

def _applied(out: RunOutcome) -> list[dict[str, Any]]:
    return [c for c in out.calls if c["outcome"] == "applied"]


def _effects(ctx: RuleContext):
    """``(name, info, applied calls of its tool, ledger lines of its tool)`` per effect of the pack."""
    applied = _applied(ctx.outcome)
    for name, info in (ctx.pack.effects if ctx.pack else {}).items():
        done = [c for c in applied if c["tool"] == info["tool"]]
        yield name, info, done, [call_line(c) for c in ctx.outcome.calls if c["tool"] == info["tool"]]


def _undone(ctx: RuleContext, info: dict[str, Any]) -> list[dict[str, Any]]:
    comp = info.get("compensation")
    return [c for c in _applied(ctx.outcome) if comp and c["tool"] == comp]


@rule("side_effects.idempotency_key", description="every applied tool call carries an idempotency key")
def _effect_keyed(ctx: RuleContext) -> list[Finding]:
    return [found(f"{c['tool']} was applied without an idempotency key", [call_line(c)])
            for c in _applied(ctx.outcome) if not c["idempotency_key"]]


@rule("side_effects.exactly_once_on_success",
      description="a succeeded run applied every effect exactly once (unless the pack says required_on_success: false)")
def _exactly_once_on_success(ctx: RuleContext) -> list[Finding]:
    if ctx.outcome.status != "succeeded":
        return []
    return [found(f"workflow succeeded but effect {name} was applied {len(done)} times; exactly once is required",
                  lines)
            for name, info, done, lines in _effects(ctx) if info.get("required_on_success", True) and len(done) != 1]


def _gated_calls(ctx: RuleContext):
    """``(effect name, approval id, applied call, grants of that approval before it)`` per applied
    call of an effect the pack gates by an approval."""
    for name, info, done, _ in _effects(ctx):
        gate = info.get("gated_by")
        for call in done if gate else ():
            yield name, gate, call, [item for kind, item in ctx.outcome.sequence if kind == "decision"
                                     and item["approval_id"] == gate and item["granted"] and item["gseq"] < call["gseq"]]


@rule("side_effects.gated_by_approval",
      description="an effect gated_by an approval is applied only after that approval was granted")
def _gated_by_approval(ctx: RuleContext) -> list[Finding]:
    return [found(f"effect {name} applied without a granted approval {gate!r} before it", [call_line(call)])
            for name, gate, call, grants in _gated_calls(ctx) if not grants]


@rule("side_effects.approval_in_time",
      description="a gated effect is never applied on a grant that came after its request's deadline")
def _approval_in_time(ctx: RuleContext) -> list[Finding]:
    out, failures = ctx.outcome, []
    for name, gate, call, grants in _gated_calls(ctx):
        # each grant answers the request (revision) made last before it, with that request's deadline
        late = [(g, d) for g in grants if (d := _deadline(out, gate, _revision_at(out, gate, g["gseq"])))
                is not None and g["at"] > d]
        if grants and len(late) == len(grants):
            failures.append(found(f"effect {name} was applied on approval {gate!r} granted at "
                                  f"{late[0][0]['at']:.0f}, after its deadline {late[0][1]:.0f}: an expired "
                                  "request was honoured", [call_line(call)]))
    return failures


@rule("side_effects.ordered_after", description="an effect is applied only after the effects the pack lists in its after")
def _ordered_after(ctx: RuleContext) -> list[Finding]:
    applied, failures = _applied(ctx.outcome), []
    for name, info, done, _ in _effects(ctx):
        for before in info.get("after", ()):
            tool = ctx.pack.effects[before]["tool"]
            for call in done:
                if not any(c["tool"] == tool and c["gseq"] < call["gseq"] for c in applied):
                    failures.append(found(f"effect {name} was applied before effect {before}, which must come first",
                                          [call_line(call)]))
    return failures


@rule("side_effects.compensated_on_failure",
      description="a run that ended failed or cancelled after an effect applied that effect's compensation "
                  "(unless the world refused it and the stop reason says so)")
def _compensated_on_failure(ctx: RuleContext) -> list[Finding]:
    out, failures = ctx.outcome, []
    for name, info, done, lines in _effects(ctx):
        comp = info.get("compensation")
        refused = [c for c in out.calls if comp and c["tool"] == comp and c["outcome"] == "failed"
                   and not c.get("retryable")]  # the world refused the compensation: reported, not hidden
        if comp and done and out.status in ("failed", "cancelled") and not _undone(ctx, info) and not (
                refused and out.status == "failed" and "compensation" in (out.stop_reason or "")):
            failures.append(found(f"workflow ended {out.status} after effect {name} was applied, "
                                  f"but its compensation {comp} was never applied", lines))
    return failures


@rule("side_effects.compensation_at_most_once", description="no compensation is applied more than once")
def _compensation_at_most_once(ctx: RuleContext) -> list[Finding]:
    return [found(f"compensation {info.get('compensation')} of {name} applied {len(undone)} times",
                  [call_line(c) for c in undone])
            for name, info, _, _ in _effects(ctx) if len(undone := _undone(ctx, info)) > 1]


@rule("side_effects.must_not", kind="expectation", description="an effect the case forbids (expected.must_not_EFFECT) is never applied")
def _must_not(ctx: RuleContext) -> list[Finding]:
    return [found(f"must_not_{name}: effect {name} was applied {len(done)} time(s)", lines)
            for name, _, done, lines in _effects(ctx) if ctx.case.expected.get(f"must_not_{name}") and done]


@rule("side_effects.expected_count", kind="expectation", description="each effect is applied as many times as the case's expected.effects says")
def _expected_count(ctx: RuleContext) -> list[Finding]:
    wanted = ctx.case.expected.get("effects", {})
    return [found(f"expected effect {name} applied {wanted[name]} time(s), got {len(done)}", lines)
            for name, _, done, lines in _effects(ctx) if wanted.get(name) is not None and len(done) != wanted[name]]


@rule("side_effects.expected_compensated", kind="expectation", description="each effect in the case's expected.compensated was compensated")
def _expected_compensated(ctx: RuleContext) -> list[Finding]:
    return [found(f"expected effect {name} compensated, but its compensation "
                  f"{info.get('compensation') or '(none in the pack)'} was never applied", lines)
            for name, info, _, lines in _effects(ctx)
            if name in ctx.case.expected.get("compensated", ()) and not _undone(ctx, info)]


@rule("side_effects.forward_after_pivot",
      description="after an irreversible effect the run neither compensates nor ends cancelled (sagas complete forward)")
def _forward_after_pivot(ctx: RuleContext) -> list[Finding]:
    out, pack = ctx.outcome, ctx.pack
    wf = (pack.workflows.get(ctx.case.workflow) if pack else None) or {"phases": []}
    pivots = {t["tool"] for p in wf["phases"] for t in p["tasks"] if t.get("irreversible")}
    turned = [c for c in _applied(out) if c["tool"] in pivots]
    if not turned:  # after its pivot a saga completes forward (Garcia-Molina & Salem, "Sagas", 1987)
        return []
    undo_tools = {info["compensation"] for info in pack.effects.values() if info.get("compensation")}
    late = [c for c in out.calls if c["tool"] in undo_tools and c["gseq"] > turned[0]["gseq"]]
    if late or out.status == "cancelled":
        return [found(f"the irreversible effect {turned[0]['tool']} was applied, yet the run then "
                      f"{'compensated' if late else 'ended cancelled'}: after its pivot a saga must complete forward",
                      [call_line(c) for c in [turned[0], *late]][:6])]
    return []


@rule("side_effects.repeats_bounded",
      description="calls that repeat an idempotency key are at most the kills plus the lost responses")
def _repeats_bounded(ctx: RuleContext) -> list[Finding]:
    out = ctx.outcome
    repeats = [c for c in out.calls if c["outcome"] == "duplicate"]
    lost = sum(1 for c in out.calls if c.get("lost"))  # answers the tool never delivered (tool_lost_response)
    if len(repeats) > out.kills + lost:
        return [found(f"{len(repeats)} tool calls repeated an idempotency key after {out.kills} kill(s) and {lost} "
                      "lost response(s): each may repeat at most the one call whose result it cut off; the rest "
                      "re-ran finished steps", [call_line(c) for c in repeats][:6])]
    return []


def _asked(out: RunOutcome) -> Counter[tuple[Any, Any]]:
    return Counter((c["args"].get("approval_id"), c["args"].get("revision", 0)) for c in _applied(out)
                   if c["tool"] == APPROVAL_TOOL)


@rule("side_effects.approval_asked_once", description="a human is asked for one approval (revision) once")
def _approval_asked_once(ctx: RuleContext) -> list[Finding]:
    return [found(f"approval {approval_id!r} was requested from a human {n} times"
                  + (f" in revision {revision}" if revision else ""))
            for (approval_id, revision), n in _asked(ctx.outcome).items() if n > 1]


@rule("side_effects.revision_after_denial", description="a new request (revision) of an approval follows a denial of the last one")
def _revision_after_denial(ctx: RuleContext) -> list[Finding]:
    out, asked, failures = ctx.outcome, _asked(ctx.outcome), []
    for approval_id in {a for a, _ in asked}:
        revisions = sum(1 for a, _ in asked if a == approval_id)
        denials = sum(1 for d in out.decisions if d["approval_id"] == approval_id and not d["granted"])
        if revisions > denials + 1:
            failures.append(found(f"approval {approval_id!r} was requested in {revisions} revisions after {denials} "
                                  "denial(s): a revision follows a denial"))
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


# --------------------------------------------------------------------------- trace

@rule("trace.required_events", kind="expectation", description="every kind in the case's expected.required_trace_events is in the trace")
def _required_events(ctx: RuleContext) -> list[Finding]:
    kinds = [e["kind"] for e in ctx.trace]
    missing = [k for k in ctx.case.expected.get("required_trace_events", ()) if k not in kinds]
    return [found(f"required trace events missing: {missing}")] if missing else []


@rule("trace.forbidden_events", kind="expectation", description="no kind in the case's expected.forbidden_trace_events is in the trace")
def _forbidden_events(ctx: RuleContext) -> list[Finding]:
    kinds = [e["kind"] for e in ctx.trace]
    present = [k for k in ctx.case.expected.get("forbidden_trace_events", ()) if k in kinds]
    return [found(f"forbidden trace events present: {present}",
                  [trace_line(e) for e in ctx.trace if e["kind"] in present][:5])] if present else []


@rule("trace.required_checkpoints", kind="expectation", description="every checkpoint in the case's expected.requires_checkpoint was written")
def _required_checkpoints(ctx: RuleContext) -> list[Finding]:
    names = {e.get("name") for e in ctx.trace if e["kind"] == "checkpoint"}
    lost = [c for c in ctx.case.expected.get("requires_checkpoint", ()) if c not in names]
    return [found(f"required checkpoints missing: {lost}; seen: {sorted(n for n in names if n)}")] if lost else []


def _transitions(trace: list[dict[str, Any]]):
    """``(event, status before it as the trace tells)`` per transition event."""
    current = Status.ACCEPTED.value if trace else None
    for event in trace:
        if event["kind"] == "transition":
            yield event, current
            current = event["to"]


@rule("trace.transition_legal", description="every transition is legal in the engine's state table (engine/states.py)")
def _transition_legal(ctx: RuleContext) -> list[Finding]:
    return [found(f"illegal transition {e['from']} -> {e['to']}", [trace_line(e)])
            for e, _ in _transitions(ctx.trace) if not is_legal(e["from"], e["to"])]


@rule("trace.transition_chained", description="every transition starts from the status the previous one ended in")
def _transition_chained(ctx: RuleContext) -> list[Finding]:
    return [found(f"transition from {e['from']} while the workflow was {current}", [trace_line(e)])
            for e, current in _transitions(ctx.trace) if is_legal(e["from"], e["to"]) and e["from"] != current]


@rule("trace.ends_in_status", description="the trace's last transition ends in the status the engine reports")
def _ends_in_status(ctx: RuleContext) -> list[Finding]:
    trace, current = ctx.trace, Status.ACCEPTED.value if ctx.trace else None
    for event, _ in _transitions(trace):
        current = event["to"]
    if trace and current != ctx.outcome.status:
        return [found(f"the trace ends in {current} but the engine reports {ctx.outcome.status}")]
    return []


@rule("trace.effect_keyed", description="every side-effecting tool call in the trace carries an idempotency key")
def _trace_effect_keyed(ctx: RuleContext) -> list[Finding]:
    return [found(f"side effect {e.get('tool')} called without an idempotency key", [trace_line(e)])
            for e in ctx.trace if e["kind"] == "tool_call" and e.get("side_effect") and not e.get("idempotency_key")]


@rule("trace.effect_audited", description="every effect applied in the ledger is a tool_call in the trace with its key")
def _effect_audited(ctx: RuleContext) -> list[Finding]:
    keys_traced = {(e.get("tool"), e.get("idempotency_key")) for e in ctx.trace if e["kind"] == "tool_call"}
    return [found(f"{c['tool']} effect in the ledger is not audited in the trace (key {c['idempotency_key']})",
                  [call_line(c)])
            for c in ctx.ledger if c["outcome"] == "applied" and (c["tool"], c["idempotency_key"]) not in keys_traced]


@rule("trace.checkpoint_after_effect",
      description="a checkpoint closes the commit of every successful tool result and approval request")
def _checkpoint_after_effect(ctx: RuleContext) -> list[Finding]:
    trace, failures = ctx.trace, []
    for i, event in enumerate(trace):
        needs = (event["kind"] == "tool_result" and event.get("ok")) or event["kind"] == "approval_requested"
        if not needs:
            continue
        # The checkpoint must close the same commit: only events that describe this step's
        # outcome may stand between the result and its checkpoint.
        nxt = next((e for e in trace[i + 1:] if e["kind"] not in SAME_COMMIT), None)
        if nxt is None or nxt["kind"] != "checkpoint":
            what = event.get("tool") if event["kind"] == "tool_result" else f"approval {event.get('approval_id')}"
            failures.append(found(f"no checkpoint after {what} before the next step",
                                  [trace_line(event)] + ([trace_line(nxt)] if nxt else [])))
    return failures


@rule("trace.no_rerun_after_checkpoint", description="no step starts again after its result was checkpointed "
                                                     "(unless a revision_started event sends it back)")
def _no_rerun_after_checkpoint(ctx: RuleContext) -> list[Finding]:
    settled: set[str] = set()
    pending: set[str] = set()
    failures = []
    for event in ctx.trace:
        if event["kind"] == "revision_started":  # a denied gate sends these steps back: they run again
            settled -= set(event.get("steps") or ())
        elif event["kind"] == "tool_result" and event.get("ok"):
            pending.add(event.get("task"))
        elif event["kind"] == "checkpoint":
            settled |= pending
            pending = set()
        elif event["kind"] == "step_started" and event.get("task") in settled:
            failures.append(found(f"step {event.get('task')} ran again after its result was checkpointed: "
                                  "the resumed workflow lost its place", [trace_line(event)]))
            settled.discard(event.get("task"))
    return failures


@rule("trace.no_step_going_back", description="no step starts again after a later step had begun "
                                              "(unless a revision_started event sends it back)")
def _no_step_going_back(ctx: RuleContext) -> list[Finding]:
    begun: list[str] = []  # tasks in the order their steps began; going back means a lost record of progress
    for event in ctx.trace:
        if event["kind"] == "revision_started":
            begun = [b for b in begun if b not in (event.get("steps") or ())]
            continue
        if event["kind"] != "step_started" or (begun and event.get("task") == begun[-1]):
            continue
        if event.get("task") in begun:
            return [found(f"step {event.get('task')} ran again after step {begun[-1]} had begun: "
                          "the resumed workflow lost its place", [trace_line(event)])]
        begun.append(event.get("task"))
    return []


@rule("trace.one_version", description="the run keeps the definition version it started with")
def _one_version(ctx: RuleContext) -> list[Finding]:
    versions = [e for e in ctx.trace if e.get("version") is not None
                and e["kind"] in ("workflow_accepted", "workflow_started", "workflow_resumed")]
    changed = [e for e in versions if e["version"] != versions[0]["version"]]
    if changed:
        return [found(f"the run changed definition version mid-run: it started on version "
                      f"{versions[0]['version']}, then ran version {changed[0]['version']}",
                      [trace_line(versions[0]), trace_line(changed[0])])]
    return []


@rule("trace.no_retry_after_fatal", description="a task is never retried after a non-retryable error")
def _no_retry_after_fatal(ctx: RuleContext) -> list[Finding]:
    last_error: dict[str, dict[str, Any]] = {}
    failures = []
    for event in ctx.trace:
        if event["kind"] == "tool_result" and not event.get("ok"):
            last_error[event.get("task")] = event
        elif event["kind"] == "retry_scheduled":
            error = last_error.get(event.get("task"))
            if error is not None and error.get("retryable") is False:
                failures.append(found(f"task {event.get('task')} was retried after a non-retryable error",
                                      [trace_line(error), trace_line(event)]))
    return failures


@rule("trace.approval_deadline", description="a run left waiting_approval is not waiting past its request's deadline")
def _approval_deadline(ctx: RuleContext) -> list[Finding]:
    out = ctx.outcome
    if out.status == Status.WAITING_APPROVAL.value and out.pending_approval and out.clock_now is not None:
        deadline = _deadline(out, out.pending_approval.get("approval_id", ""),
                             int(out.pending_approval.get("revision", 0) or 0))
        if deadline is not None and out.clock_now > deadline:
            return [found(f"approval {out.pending_approval.get('approval_id')!r} is still waited for at "
                          f"{out.clock_now:.0f}, past its deadline {deadline:.0f}")]
    return []


@rule("trace.terminal_stop_reason", description="a terminal status has a stop reason")
def _terminal_stop_reason(ctx: RuleContext) -> list[Finding]:
    out = ctx.outcome
    if out.status in TERMINAL_NAMES and not out.stop_reason:
        return [found(f"terminal status {out.status} has no stop reason")]
    return []


@rule("trace.workflow_finished",
      description="a terminal status has a last workflow_finished event with that status and a stop reason")
def _workflow_finished(ctx: RuleContext) -> list[Finding]:
    out = ctx.outcome
    if out.status not in TERMINAL_NAMES:
        return []
    finished = [e for e in ctx.trace if e["kind"] == "workflow_finished"]
    if not finished or not finished[-1].get("stop_reason") or finished[-1].get("status") != out.status:
        return [found(f"terminal status {out.status} has no workflow_finished event with that status and a stop "
                      "reason", [trace_line(e) for e in finished[-1:]])]
    return []


# --------------------------------------------------------------------------- agent

#: Agent verdicts that must stop a run short of success.
AGENT_STOP_VERDICTS = ("uncertain", "evidence_missing")


@rule("agent.unsure_never_succeeds",
      description="a run never ends succeeded after an agent step answered uncertain or evidence_missing")
def _unsure_never_succeeds(ctx: RuleContext) -> list[Finding]:
    """Reads the world's record: every call of an agent step's tool (a task with ``agent: true`` in the
    case's workflow) whose answer reached the engine (``applied`` and not lost, or a ``duplicate``
    that replayed it) with a verdict in :data:`AGENT_STOP_VERDICTS`."""
    out, pack = ctx.outcome, ctx.pack
    if out.status != Status.SUCCEEDED.value:
        return []
    wf = (pack.workflows.get(ctx.case.workflow) if pack else None) or {"phases": []}
    tools = {t["tool"] for p in wf["phases"] for t in p["tasks"] if t.get("agent")}
    unsure = [c for c in out.calls if c["tool"] in tools and isinstance(c.get("result"), dict)
              and c["result"].get("verdict") in AGENT_STOP_VERDICTS
              and (c["outcome"] == "duplicate" or (c["outcome"] == "applied" and not c.get("lost")))]
    if not unsure:
        return []
    first = unsure[0]
    return [found(f"the run ended succeeded after the agent answered {first['result']['verdict']} "
                  f"({first['tool']}): an unsure answer must escalate, never reach success",
                  [f"{call_line(c)} verdict={c['result']['verdict']}" for c in unsure][:5])]


# --------------------------------------------------------------------------- one family, or all, on a run

def final_status(case: Case, out: RunOutcome) -> list[Failure]:
    """The ``final_status.*`` findings of this module's rules: the status and stop reason against ``expected``."""
    return run_family(RuleContext(case, None, out), "final_status", module=__name__)


def side_effects(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """The ``side_effects.*`` findings (this module's rules and the shared ``side_effects.at_most_once``)."""
    return run_family(RuleContext(case, pack, out), "side_effects")


def trace_completeness(case: Case, out: RunOutcome) -> list[Failure]:
    """The ``trace.*`` findings of this module's rules (see the module docstring)."""
    return run_family(RuleContext(case, None, out), "trace", module=__name__)


def agent_verdicts(case: Case, pack: Pack, out: RunOutcome) -> list[Failure]:
    """The ``agent.*`` findings: an uncertain or evidence-missing agent answer never lets the run
    report success (see :func:`_unsure_never_succeeds`)."""
    return run_family(RuleContext(case, pack, out), "agent", module=__name__)


def differential(out: RunOutcome, golden: RunOutcome) -> list[Failure]:
    """The ``differential.*`` findings: ``out`` must end like ``golden``: same status, stop reason, and
    the same effects with the same arguments (a resume that lost data sends different arguments)."""
    return run_family(RuleContext(None, None, out, golden, (("golden", golden),)),  # type: ignore[arg-type]
                      "differential")


def judge(case: Case, pack: Pack, out: RunOutcome, golden: RunOutcome | None) -> list[Failure]:
    """The findings of every registered rule (this module's and those of the other
    :data:`~crashpoint.harness.model.rules.RULE_MODULES`) on one run; the differential rules compare
    only crashed runs with a golden run. (The verdict of a run, with vacuity and rules that raise,
    is :func:`crashpoint.harness.judge.verdict.judge`'s.)"""
    refs = (("golden", golden),) if golden is not None and out.crash_point is not None else ()
    return run_family(RuleContext(case, pack, out, golden, refs))
