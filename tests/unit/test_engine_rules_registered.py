"""An engine's rules judge through the registry as they do when called directly: the registered check hands the
rule the run's Target (the context's subject). It handed over ``ctx.case`` (``None`` for a target run), so every
DBOS target run was ``unknown`` ('target.queued_once: AttributeError: 'NoneType' object has no attribute
'inputs''), found by the DBOS tutorial's commands (tests/integration/test_docs_tutorials.py)."""

from __future__ import annotations

from pathlib import Path

from crashpoint.harness.engines import dbos  # noqa: F401 - registers DBOS's rules
from crashpoint.harness.load.target import Target
from crashpoint.harness.model import rules as registry
from crashpoint.harness.model.outcomes import TargetOutcome

TARGET = Target(name="t", entry="m:wf", engine="dbos", inputs=[{"thread": "w1", "queue": "q", "input": 1}])


def _run(status: str) -> TargetOutcome:
    out = TargetOutcome("c", "sync", "p", Path("."))
    out.engine_facts = {"queued": [{"id": "w1", "name": "wf", "queue": "q", "status": status, "digest": "d1",
                                    "executor": "e", "waiting": False}], "outcomes": [], "overlaps": [], "dequeues": []}
    return out


def test_the_registered_rule_reads_the_target_of_the_context() -> None:
    check = registry.get("target.queued_once").check
    assert check(registry.RuleContext(case=None, pack=TARGET, outcome=_run("SUCCESS"))) == []
    found = check(registry.RuleContext(case=None, pack=TARGET, outcome=_run("ENQUEUED")))
    assert [f.rule for f in found] == ["target.queued_once"] and "still ENQUEUED" in found[0].message
