"""Prefect's two rules (harness/engines/prefect.py) on the facts its workers record (prefect-tasks.log,
prefect-transactions.log): each fails on the facts of a broken flow and passes on those of the correct one, with no
Prefect installed (the facts are the worker's lines, as a run folder holds them)."""

from __future__ import annotations

import json
from pathlib import Path

from crashpoint.harness.model import rules
from crashpoint.harness.model.outcomes import TargetOutcome

rules.registered()  # every rule module, then every engine's, in the registry's own order (docs/reference/rules.md)
from crashpoint.harness.engines import prefect  # noqa: E402


def _lookup(pid: int, attempt: int, task: str, key: str, hit: bool, flow_run: str = "fr1") -> dict:
    return {"pid": pid, "thread": "refund-1", "flow_run": flow_run, "attempt": attempt, "event": "lookup",
            "task": task, "call": 1, "key": key, "hit": hit}


def _persisted(pid: int, attempt: int, task: str, key: str) -> dict:
    return {"pid": pid, "thread": "refund-1", "flow_run": "fr1", "attempt": attempt, "event": "persisted",
            "task": task, "key": key}


def _txn(pid: int, attempt: int, event: str, **more: object) -> dict:
    return {"pid": pid, "thread": "refund-1", "flow_run": "fr1", "attempt": attempt, "txn": "transaction 1",
            "event": event, **more}


def _run(tmp_path: Path, tasks: list[dict], txns: list[dict], killed: tuple[int, ...] = ()) -> TargetOutcome:
    (tmp_path / prefect.TASKS_FILE).write_text("".join(json.dumps(r) + "\n" for r in tasks) + '{"torn": ')
    (tmp_path / prefect.TXNS_FILE).write_text("".join(json.dumps(r) + "\n" for r in txns))
    out = TargetOutcome("approved", "sync", "after_result:refund-1@issue_refund", tmp_path)
    out.engine_facts = prefect.facts(tmp_path)  # the torn last line (a SIGKILL mid-write) is no record
    out.pids = [{"pid": p, "phase": "answer", "rc": -9} for p in killed]
    return out


def test_a_retry_that_computes_another_cache_key_is_caught(tmp_path: Path) -> None:
    broken = _run(tmp_path, [_lookup(10, 2, "draft", "draft-1-111", False), _persisted(10, 2, "draft", "draft-1-111"),
                             _lookup(11, 3, "draft", "draft-1-222", False)], [], killed=(10,))
    [found] = prefect.cached_not_rerun(None, broken, None)
    assert "the retry computed another key, draft-1-222" in found.message and "draft-1-111" in found.message
    correct = _run(tmp_path, [_lookup(10, 2, "draft", "k1", False), _persisted(10, 2, "draft", "k1"),
                              _lookup(11, 3, "draft", "k1", True)], [], killed=(10,))
    assert prefect.cached_not_rerun(None, correct, None) == []


def test_a_persisted_key_that_prefect_misses_is_caught(tmp_path: Path) -> None:
    broken = _run(tmp_path, [_lookup(10, 2, "issue", "k2", False), _persisted(10, 2, "issue", "k2"),
                             _lookup(11, 1, "issue", "k2", False, flow_run="fr2")], [], killed=(10,))
    [found] = prefect.cached_not_rerun(None, broken, None)
    assert "did not find it (a miss on the same key)" in found.message


def test_a_key_never_persisted_before_the_kill_may_change(tmp_path: Path) -> None:
    """Killed before its transaction committed: nothing was persisted, so a retry with another key breaks nothing."""
    run = _run(tmp_path, [_lookup(10, 2, "draft", "draft-1-111", False), _lookup(11, 3, "draft", "draft-1-222", False),
                          _persisted(11, 3, "draft", "draft-1-222")], [], killed=(10,))
    assert prefect.cached_not_rerun(None, run, None) == []


def test_a_rollback_hook_that_raised_is_caught(tmp_path: Path) -> None:
    broken = _run(tmp_path, [], [_txn(10, 2, "rollback", hooks=["void"]),
                                 _txn(10, 2, "hook", hook="void", ok=False, error="KeyError: 'draft'"),
                                 _txn(10, 2, "rolled_back")])
    [found] = prefect.rollback_complete(None, broken, None)
    assert "rollback hook void of transaction transaction 1 raised KeyError: 'draft'" in found.message
    correct = _run(tmp_path, [], [_txn(10, 2, "rollback", hooks=["void"]), _txn(10, 2, "hook", hook="void", ok=True),
                                  _txn(10, 2, "rolled_back")])
    assert prefect.rollback_complete(None, correct, None) == []


def test_a_rollback_cut_by_a_kill_must_be_finished_by_a_later_attempt(tmp_path: Path) -> None:
    cut = [_txn(10, 2, "rollback", hooks=["void"])]
    [found] = prefect.rollback_complete(None, _run(tmp_path, [], cut, killed=(10,)), None)
    assert "was never finished" in found.message
    redone = cut + [_txn(11, 3, "rollback", hooks=["void"]), _txn(11, 3, "hook", hook="void", ok=True),
                    _txn(11, 3, "rolled_back")]
    assert prefect.rollback_complete(None, _run(tmp_path, [], redone, killed=(10,)), None) == []
