"""What a case needs of an engine, and whether an adapter says its engine has it (issue 17, item 4).

A case that uses a feature the engine's adapter lacks is graded ``unsupported``, naming the feature,
never ``failed`` (a finding the engine did not earn) nor ``passed``. An adapter declares what it has
with two optional attributes; an adapter that declares neither (the reference adapter, most teams'
own) is taken to support everything:

* ``supported_features``: the workflow-definition features it runs, in the names of
  :func:`crashpoint.harness.adapters.interpreter.features_used` (``"task.agent"``,
  ``"human_gate.on_deny: revise"``...). Whatever a case's workflow uses beyond them is lacking; so a
  field added to the workflow format later is lacking until the adapter says otherwise. A case's
  ``hold`` faults add ``"hold: TYPE"`` (an event delivered while a worker is held mid-step).
* ``trace_kinds``: the trace event kinds its traces hold. A case whose ``required_trace_events``
  names another kind is lacking ``trace event KIND``.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.adapters.interpreter import features_used


def case_features(case: Any) -> set[str]:
    """What a case asks of an engine beyond its workflow: ``"hold: TYPE"`` for each external event a ``hold``
    fault delivers while a worker is held mid-step (a cancel at a step boundary, not at a wait)."""
    used = set()
    for fault in getattr(case, "faults", ()) or ():
        if fault.get("kind", "hold" if "at" in fault and "event" in fault else None) == "hold":
            used.add(f"hold: {(fault.get('event') or {}).get('type')}")
    return used


def lacking(adapter: Any, case: Any, pack: Any) -> list[str]:
    """The features ``case`` (a :class:`~crashpoint.harness.load.loader.Case` of ``pack``) needs that
    ``adapter`` declares it lacks, sorted; ``[]`` when it has them all or declares nothing."""
    missing: list[str] = []
    supported = getattr(adapter, "supported_features", None)
    if supported is not None:
        workflow = pack.workflows.get(case.workflow) or {}
        missing += sorted((features_used(workflow) | case_features(case)) - set(supported))
    kinds = getattr(adapter, "trace_kinds", None)
    if kinds is not None:
        wanted = case.expected.get("required_trace_events") or ()
        missing += [f"trace event {k}" for k in dict.fromkeys(wanted) if k not in set(kinds)]
    return missing


def unsupported_message(adapter: Any, missing: list[str]) -> str:
    """``adapter NAME does not support: A; B`` (the text of an ``unsupported`` verdict)."""
    return f"adapter {getattr(adapter, 'name', type(adapter).__name__)} does not support: " + "; ".join(missing)
