"""The second kill of a target's sampled pair is a point the recovery reaches in every run (each engine picks it:
:meth:`crashpoint.harness.engines.base.Engine.sampled_second`)."""

from __future__ import annotations

from crashpoint.harness.engines.base import engine_for, point_subject as _subject

LANGGRAPH, DBOS, TEMPORAL = (engine_for(name) for name in ("langgraph", "dbos", "temporal"))


def test_a_checkpoint_write_comes_first() -> None:
    recovery = ["node:t1@draft", "before_put:t1#3", "after_put:t1#3"]
    assert LANGGRAPH.sampled_second(recovery, "after_effect:draft_refund") == ["before_put:t1#3"]
    assert DBOS.sampled_second(recovery, "after_effect:draft_refund") == ["node:t1@draft"]  # not a kind of its own


def test_without_writes_the_workflow_the_first_kill_cut_is_chosen_over_another() -> None:
    """DBOS: which workflow a recovery dequeues first is a race; the one the first kill cut resumes where it was."""
    recovery = ["dequeued:refund-1001@_dbos_internal_queue#2", "step:refund-1001@notify",
                "dequeued:refund-1002@_dbos_internal_queue#2", "before_result:refund-1002@issue#2"]
    assert DBOS.sampled_second(recovery, "before_result:refund-1002@issue") == \
        ["dequeued:refund-1002@_dbos_internal_queue#2"]


def test_with_nothing_about_the_first_kill_the_recovery_first_point_is_chosen() -> None:
    recovery = ["activity:refund-1001@issue", "task_done:refund-1001#4"]
    assert TEMPORAL.sampled_second(recovery, "after_effect:issue_refund") == ["activity:refund-1001@issue"]
    assert TEMPORAL.sampled_second([], "after_effect:issue_refund") == []


def test_subject() -> None:
    assert _subject("before_result:refund-1002@issue") == "refund-1002"
    assert _subject("dequeued:refund-1001@_dbos_internal_queue#2") == "refund-1001"
    assert _subject("after_effect:issue_refund#2") == "issue_refund"
    assert _subject("task_done:refund-1001#3") == "refund-1001"
