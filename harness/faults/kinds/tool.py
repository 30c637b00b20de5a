"""``tool``: a tool's ``call``-th call fails, times out, loses its answer, is slow, or answers as real APIs do.

``{kind: tool, tool: NAME, call: N, outcome: O, times?: T, seconds?: S}``: the ``call``-th call of
``tool`` (1-based; the calls before it follow the case's own tool events, or succeed) and the
``times - 1`` after it get ``outcome``: ``retryable`` / ``fatal`` (an error, nothing applied),
``timeout`` (retryable, nothing applied), ``lost_response`` (applied, the answer lost), ``slow``
(takes ``seconds`` of virtual time, then succeeds), and the answers real APIs give (:data:`ANSWER_OUTCOMES`):
``rate_limited`` (nothing applied; a retryable error with status 429 and ``retry_after`` = ``seconds``), ``empty_answer``
/ ``malformed_answer`` (applied; the caller gets ``{}`` / a text that is not the answer, no error: a correct caller
calls again with the same key, answered ``duplicate``), ``stale_read`` (packs only: the tool reads the service's
records as they were before their latest write; what it refuses then is retryable). A transient fault within the
task's retry budget is one a correct engine masks (:meth:`Tool.is_masked`).

On a target the tool is one of the target's effects (a :func:`crashpoint.effect` name or an ``effects:`` entry):
``{kind: tool, tool: EFFECT, call: N, outcome: O, times?: T, seconds?: S}`` (``slow``: ``seconds`` of real time,
default 0.2; ``rate_limited``: the :class:`crashpoint.EffectRateLimited`'s ``retry_after``, real seconds, default 0.2).
The target file's older spelling ``{effect: EFFECT, outcome: O, times?, seconds?}`` is the same fault
with ``call`` the effect's next call after the faults on it before (its faults take the effect's calls in turn).
``stale_read`` is refused on a target: crashpoint does not hold a team's provider state, so it has no earlier state
to answer from. A target's generator draws the transient outcomes only (:data:`TARGET_OUTCOMES`: a fatal error ends
a thread on an error the team's code cannot be expected to hide), and a correct target masks them and the answers of
:data:`ANSWER_OUTCOMES` (its retries and idempotency keys: the run ends as without them). Generators (packs and
targets) do not draw :data:`ANSWER_OUTCOMES`: a seed draws the schedules it drew before they existed; they are given
by explicit faults, case events and crash specs.

This module also holds the vocabulary of a case's tool events (:data:`TOOL_EVENTS`), which script
the same outcomes from the case's ``events``, and the placement of faults at their call (:func:`placed`).
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from crashpoint.harness.faults.kinds import Fault, FaultError, FaultKind, Space, register

#: Case event types that script a tool's next calls, with the ledger's script outcome (``tool_failure``
#: is ``retryable`` or ``fatal``); every other event type is delivered from outside, in order.
TOOL_EVENTS = {"tool_success": "success", "tool_failure": None, "tool_timeout": "timeout",
               "tool_lost_response": "lost_response", "tool_slow": "slow", "tool_rate_limited": "rate_limited",
               "tool_empty_answer": "empty_answer", "tool_malformed_answer": "malformed_answer",
               "tool_stale_read": "stale_read"}
#: Answers as real APIs give them: a rate limit with its ``retry_after``, an empty or a malformed answer after the
#: effect was applied, a read right after a write that does not see it yet (packs only).
ANSWER_OUTCOMES = ("rate_limited", "empty_answer", "malformed_answer", "stale_read")
#: Outcomes the generator of a pack's schedules draws (a seed draws what it drew before :data:`ANSWER_OUTCOMES`).
GENERATED_OUTCOMES = ("retryable", "fatal", "timeout", "lost_response", "slow")
OUTCOMES = GENERATED_OUTCOMES + ANSWER_OUTCOMES
#: Outcomes a retry hides: nothing applied, or applied with the answer lost or garbled (same key), a rate limit
#: waited out, a stale read's refusal asked again.
RETRY_MASKED = frozenset({"retryable", "timeout", "lost_response", "rate_limited", "empty_answer", "malformed_answer",
                          "stale_read"})
#: Outcomes that take ``seconds``: a slow call's duration, a rate limit's ``retry_after``.
TIMED_OUTCOMES = ("slow", "rate_limited")
#: Outcomes a target's case may not give (:meth:`Tool.check_target`), with why.
PACK_ONLY = {"stale_read": "crashpoint does not hold a target's provider state, so it has no earlier state to answer "
                           "a read from; a target's stale read is its own fake provider's to give"}
#: Slow-call durations the generator draws, seconds.
SLOW_SECONDS = (30.0, 600.0, 7200.0)
#: Outcomes a target's generator draws (a transient failure, a lost answer, a slow call): what durable code retries.
TARGET_OUTCOMES = ("retryable", "timeout", "lost_response", "slow")
#: Outcomes a correct target masks: :data:`TARGET_OUTCOMES`, a rate limit (waited out, then the same key) and an empty
#: or malformed answer (seen for what it is, then the same key, answered with the real answer).
TARGET_MASKED = frozenset(TARGET_OUTCOMES + ("rate_limited", "empty_answer", "malformed_answer"))
#: Real seconds of a target's generated slow calls.
TARGET_SLOW_SECONDS = (0.2, 1.0)
#: Coverage column of each outcome (the tool event type that scripts it).
COLUMN = {"retryable": "tool_failure", "fatal": "tool_failure", "timeout": "tool_timeout",
          "lost_response": "tool_lost_response", "slow": "tool_slow", "rate_limited": "tool_rate_limited",
          "empty_answer": "tool_empty_answer", "malformed_answer": "tool_malformed_answer",
          "stale_read": "tool_stale_read"}


def script_event(ledger: Any, ev: dict[str, Any]) -> None:
    """Queue one tool event of a case (a type of :data:`TOOL_EVENTS`) on the ledger."""
    if ev["type"] == "tool_failure":
        ledger.script(ev["tool"], "retryable" if ev.get("retryable", True) else "fatal", ev.get("message", ""),
                      times=ev.get("times", 1))
    else:
        outcome = TOOL_EVENTS[ev["type"]]
        seconds = ev.get("seconds", RATE_LIMIT_S if outcome == "rate_limited" else None)
        ledger.script(ev["tool"], outcome, times=ev.get("times", 1), seconds=seconds)


def event_cells(events: Iterable[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Coverage cells of a case's own tool events (other than ``tool_success``)."""
    return [(ev["type"], f"tool:{ev['tool']}") for ev in events
            if ev["type"] in TOOL_EVENTS and ev["type"] != "tool_success"]


def tool_tasks(pack: Any, workflow: str, tool: str) -> list[dict[str, Any]]:
    """The tasks of ``workflow`` in ``pack`` that call ``tool``."""
    return [t for p in pack.workflows[workflow]["phases"] for t in p["tasks"] if t["tool"] == tool]


@register
class Tool(FaultKind):
    """See the module docstring."""

    name = "tool"
    order = 60
    summary = ("`tool`, `call` (1-based call number of that tool), `outcome` (`retryable`, `fatal`, `timeout`, "
               "`lost_response`, `slow`; answers as real APIs give them, never drawn by a generator: `rate_limited` "
               "(nothing applied, an error with status 429 and `retry_after`), `empty_answer` / `malformed_answer` "
               "(applied; the caller gets `{}` / an HTML error page's text), `stale_read` (packs: the records read as "
               "before their latest write)), `times`, `seconds` (`slow`: its duration; `rate_limited`: its "
               "`retry_after`)")
    masking = "transient ones within the task's retry budget"
    injected = True
    columns = ("tool_failure", "tool_timeout", "tool_lost_response", "tool_slow", "tool_rate_limited",
               "tool_empty_answer", "tool_malformed_answer", "tool_stale_read")
    subjects = ("pack", "target")
    target_summary = ("`tool` names an effect of the target (old spelling `{effect, outcome, times, seconds}`: the "
                      "effect's calls in turn); `slow` takes `seconds` of real time (default 0.2, at most 60), "
                      "`rate_limited` raises `crashpoint.EffectRateLimited` with `retry_after` = `seconds` (real, "
                      "default 0.2); no `stale_read`")

    def normalize(self, fault: Fault) -> Fault:
        if fault.get("outcome") not in OUTCOMES:
            raise ValueError(f"unknown tool outcome {fault.get('outcome')!r}; known: {', '.join(OUTCOMES)}")
        return {**fault, "times": fault.get("times", 1)}

    def check(self, fault: Fault, tools: Iterable[str], workflow: str) -> None:
        check_tool(fault, tools, workflow)

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        if space.subject == "target":  # a transient fault of an effect call the golden run made
            if not space.calls:
                return None
            return st.builds(_fault, tool_calls(space), st.sampled_from(TARGET_OUTCOMES), st.integers(1, 2),
                             st.sampled_from(TARGET_SLOW_SECONDS))
        return st.builds(_fault, tool_calls(space), st.sampled_from(GENERATED_OUTCOMES), st.integers(1, 3),
                         st.sampled_from(SLOW_SECONDS))

    def check_target(self, fault: Fault) -> None:
        outcome = fault.get("outcome")
        if outcome in PACK_ONLY:
            raise FaultError(f"tool outcome {outcome!r} is for packs only: {PACK_ONLY[outcome]}", ("outcome",))
        if outcome in TIMED_OUTCOMES and float(fault.get("seconds", 0.2)) > MAX_TARGET_SLOW_S:
            raise FaultError(f"a target's {outcome} call takes real time: at most {MAX_TARGET_SLOW_S:g} s, got "
                             f"{fault['seconds']}", ("seconds",))

    def masked_on_target(self, fault: Fault) -> bool:
        """A transient outcome (:data:`TARGET_MASKED`): durable code retries it (same key; a rate limit after its
        ``retry_after``; an empty or malformed answer once seen for what it is), so the run ends as without it; a
        ``fatal`` error ends the thread on an error."""
        return fault["outcome"] in TARGET_MASKED

    def describe(self, fault: Fault) -> str:
        return f"{fault['tool']} call {fault['call']}: {fault['outcome']} x{fault.get('times', 1)}"

    def is_masked(self, fault: Fault, schedule: Sequence[Fault], case: Any, pack: Any) -> bool:
        """A fault of :data:`RETRY_MASKED` (``retryable``, ``timeout``, ``lost_response``, the answers of
        :data:`ANSWER_OUTCOMES`) on a task's tool, with every tool fault of
        the schedule on that tool (``times`` summed) within the tasks' ``retries``, when the case scripts
        no failure of that tool itself."""
        if fault["outcome"] not in RETRY_MASKED or case is None or pack is None:
            return False
        return within_retry_budget(fault["tool"], schedule, case, pack)

    def inject(self, fault: Fault, into: Any) -> None:
        into.tool_faults.append(fault)

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [(COLUMN[fault["outcome"]], f"tool:{fault['tool']}")]

    def script_entry(self, fault: Fault) -> dict[str, Any]:
        outcome = fault["outcome"]
        if outcome in ("retryable", "fatal"):
            return {"type": "tool_failure", "tool": fault["tool"], "retryable": outcome == "retryable",
                    "message": f"scripted {outcome} failure"}
        ev: dict[str, Any] = {"type": f"tool_{outcome}", "tool": fault["tool"]}
        if outcome in TIMED_OUTCOMES:
            ev["seconds"] = float(fault.get("seconds", 60.0 if outcome == "slow" else RATE_LIMIT_S))
        return ev

    def script(self, ledger: Any, entry: dict[str, Any]) -> None:
        script_event(ledger, entry)


#: Real seconds a target's slow call (or rate limit's ``retry_after``) may take at most.
MAX_TARGET_SLOW_S = 60.0
#: Virtual seconds of a pack's ``rate_limited`` call's ``retry_after`` when the fault gives none.
RATE_LIMIT_S = 30.0


def placed(faults: Iterable[Fault], events: Iterable[dict[str, Any]] = ()) -> list[tuple[dict[str, Any], int | None]]:
    """The script of a case's tool calls: its tool ``events`` (types of :data:`TOOL_EVENTS`) in order, with its
    ``faults`` on tool calls (``{kind, tool, call, times?, ...}``, normalized) placed at their call: the ``call``-th
    call of ``tool`` gets ``times`` entries of the fault, the calls before it follow the events' script (or succeed:
    a ``tool_success`` entry). Returns ``(entry, index)`` pairs, each entry one call (``times: 1``): the event's, a
    success, or the fault itself with ``index`` its position in ``faults`` (``None`` for the others)."""
    tools: list[tuple[dict[str, Any], int | None]] = [({**e, "times": 1}, None) for e in events
                                                       if e["type"] in TOOL_EVENTS for _ in range(e.get("times", 1))]
    for index, fault in enumerate(faults):
        queue = [item for item in tools if item[0]["tool"] == fault["tool"]]
        while len(queue) < fault["call"] - 1:
            queue.append(({"type": "tool_success", "tool": fault["tool"], "times": 1}, None))
        queue[fault["call"] - 1:fault["call"] - 1] = [(fault, index)] * fault.get("times", 1)
        tools = [item for item in tools if item[0]["tool"] != fault["tool"]] + queue
    return tools


def check_tool(fault: Fault, tools: Iterable[str], workflow: str) -> None:
    """Raise :class:`FaultError` unless the fault's ``tool`` is one of ``tools`` (of workflow ``workflow``)."""
    known = sorted(tools)
    if fault["tool"] not in known:
        raise FaultError(f"tool {fault['tool']!r} is not used by workflow {workflow!r}; tools: {', '.join(known)}",
                         ("tool",))


def tool_calls(space: Space) -> Any:
    """A strategy of ``(tool, call number)`` over the calls the golden run made (or call 1 of any tool)."""
    from hypothesis import strategies as st

    called = space.calls
    if called:
        return st.sampled_from(sorted(called)).flatmap(lambda t: st.tuples(st.just(t), st.integers(1, called[t])))
    return st.tuples(st.sampled_from(sorted(space.tools)), st.just(1))


def within_retry_budget(tool: str, schedule: Sequence[Fault], case: Any, pack: Any) -> bool:
    """``True`` when ``tool`` is a task's tool, the case scripts no failure of it, and every fault of
    ``schedule`` on it (``times`` summed) fits the smallest ``retries`` of its tasks."""
    tasks = tool_tasks(pack, case.workflow, tool)
    scripted = any(e.get("tool") == tool and e["type"] != "tool_success" for e in case.events)
    total = sum(g.get("times", 1) for g in schedule if g.get("tool") == tool and "call" in g)
    return bool(tasks) and not scripted and total <= min(t.get("retries", 0) for t in tasks)


def _fault(where: tuple[str, int], outcome: str, times: int, seconds: float) -> Fault:
    tool, call = where
    fault: Fault = {"kind": "tool", "tool": tool, "call": call, "outcome": outcome, "times": times}
    if outcome == "slow":
        fault["seconds"] = seconds
    return fault
