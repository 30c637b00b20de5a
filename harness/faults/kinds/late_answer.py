"""``late_answer``: a tool that answers after its timeout: the caller gave up, the effect still landed.

``{kind: late_answer, tool: NAME, call: N, times?: T, seconds?: S}``: the ``call``-th call of ``tool``
(and the ``times - 1`` after it) times out for its caller after ``seconds`` of virtual time (default
30), and the service applies the effect anyway (recorded ``applied``, ``lost``). The caller gets a
retryable ``timeout`` error that says the call may still be applied. An engine that retries with
the same idempotency key gets the first answer back (a ``duplicate``): the effect happens once. An
engine that takes a timeout for "it never reached the service" and retries under a new key applies
it twice; neither a plain ``timeout`` (nothing applied) nor a ``lost_response`` (a connection reset)
shows that. Within the task's retry budget a correct engine masks it, as a transient tool fault.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from crashpoint.fakes.ledger import Behaviour
from crashpoint.harness.faults.kinds import Fault, FaultKind, Space, register
from crashpoint.harness.faults.kinds.tool import check_tool, tool_calls, within_retry_budget

#: How late the answer is, by default: virtual seconds the caller waits before it gives up.
DEFAULT_SECONDS = 30.0
#: What the fake world does with such a call.
BEHAVIOUR = Behaviour(applies=True, error="retryable", lost=True, takes_time=True,
                      message="{tool}: timeout: no answer within the caller's deadline "
                              "(the service may still apply the call)")


@register
class LateAnswer(FaultKind):
    """See the module docstring."""

    name = "late_answer"
    order = 70
    summary = ("`tool`, `call`, `times`, `seconds` (default 30): the call times out for its caller after "
               "`seconds`, and the effect is applied anyway (a retry under a new key applies it twice)")
    masking = "within the task's retry budget"
    injected = True
    columns = ("tool_late_answer",)

    def normalize(self, fault: Fault) -> Fault:
        return {**fault, "times": fault.get("times", 1)}

    def check(self, fault: Fault, tools: Iterable[str], workflow: str) -> None:
        check_tool(fault, tools, workflow)

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        return st.builds(lambda where, times: {"kind": "late_answer", "tool": where[0], "call": where[1],
                                               "times": times}, tool_calls(space), st.integers(1, 2))

    def describe(self, fault: Fault) -> str:
        return f"{fault['tool']} call {fault['call']}: answers after its timeout x{fault.get('times', 1)}"

    def is_masked(self, fault: Fault, schedule: Sequence[Fault], case: Any, pack: Any) -> bool:
        return case is not None and pack is not None and within_retry_budget(fault["tool"], schedule, case, pack)

    def inject(self, fault: Fault, into: Any) -> None:
        into.tool_faults.append(fault)

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("tool_late_answer", f"tool:{fault['tool']}")]

    def script_entry(self, fault: Fault) -> dict[str, Any]:
        return {"type": self.name, "tool": fault["tool"], "seconds": float(fault.get("seconds", DEFAULT_SECONDS))}

    def script(self, ledger: Any, entry: dict[str, Any]) -> None:
        ledger.script(entry["tool"], self.name, times=entry.get("times", 1), seconds=entry["seconds"],
                      behaviour=BEHAVIOUR)
