"""Checkpoints write what changed: the engine store keeps the state's dicts and lists item by item."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from crashpoint.engine.store import Store, StoreError


def _state(n: int) -> dict:
    return {"phase": 0, "task": n, "stage": "task", "pending_approval": None,
            "results": {f"t{i}": {"rows": i, "ok": True} for i in range(n)},
            "side_effects": [{"task": f"t{i}", "status": "executed"} for i in range(n)], "skipped": []}


def _checkpoint_bytes(tmp_path: Path, n: int) -> int:
    store = Store(tmp_path / f"s{n}.db")
    with store.transaction() as conn:
        store.insert_workflow(conn, "wf", "w", 1, "running", _state(n), 0.0)
    st = store.load_state("wf")
    before = store.state_bytes_written
    st["results"][f"t{n}"] = {"rows": n, "ok": True}
    st["side_effects"].append({"task": f"t{n}", "status": "executed"})
    st["task"] = n + 1
    with store.transaction() as conn:
        store.save_state(conn, "wf", "running", st, 1.0)
    store.close()
    return store.state_bytes_written - before


def test_a_checkpoint_writes_only_the_changed_items(tmp_path: Path) -> None:
    small, large = _checkpoint_bytes(tmp_path, 10), _checkpoint_bytes(tmp_path, 5000)
    assert small > 0
    assert large <= 2 * small, (small, large)


def test_state_round_trips_through_a_new_connection(tmp_path: Path) -> None:
    store = Store(tmp_path / "e.db")
    state = _state(3)
    with store.transaction() as conn:
        store.insert_workflow(conn, "wf", "w", 1, "running", state, 0.0)
    state["side_effects"][1]["status"] = "compensated"  # a change inside an item
    state["skipped"] = ["t2"]
    del state["results"]["t0"]
    state["pending_approval"] = {"approval_id": "a", "deadline": 5.0}  # a scalar that became a dict
    with store.transaction() as conn:
        store.save_state(conn, "wf", "running", state, 1.0)
    store.close()
    assert Store(tmp_path / "e.db").load_state("wf") == state


def test_a_rolled_back_checkpoint_leaves_the_durable_state(tmp_path: Path) -> None:
    store = Store(tmp_path / "e.db")
    with store.transaction() as conn:
        store.insert_workflow(conn, "wf", "w", 1, "running", _state(2), 0.0)
    changed = {**_state(2), "task": 9}
    with pytest.raises(RuntimeError):
        with store.transaction() as conn:
            store.save_state(conn, "wf", "running", changed, 1.0)
            raise RuntimeError("crash inside the transaction")
    assert store.load_state("wf") == _state(2)
    other = Store(tmp_path / "e.db")
    assert other.load_state("wf") == _state(2)


def test_items_of_an_unknown_section_are_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "e.db")
    with store.transaction() as conn:
        store.insert_workflow(conn, "wf", "w", 1, "running", _state(1), 0.0)
    store.close()
    raw = sqlite3.connect(tmp_path / "e.db")
    raw.execute("INSERT INTO state_items VALUES ('wf', 'bogus', 'x', '1')")
    raw.execute("UPDATE workflows SET rev = rev + 1")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="unknown section 'bogus'"):
        Store(tmp_path / "e.db").load_state("wf")


@pytest.mark.parametrize("damage, message", [
    ("DELETE FROM state_items WHERE section='side_effects' AND item='000000001'", "missing or foreign positions|of 3"),
    ("DELETE FROM state_items WHERE section='results'", "should be a dict of 3"),
    ("INSERT INTO state_items VALUES ('wf', 'results', 'extra', '1')", "should be a dict of 3"),
    ("UPDATE state_items SET item='abc' WHERE section='side_effects' AND item='000000002'", "missing or foreign"),
    ("UPDATE workflows SET state=json_set(state, '$.__sections__.results', json('[\"set\", 3]'))", "a set of 3"),
])
def test_a_state_whose_items_do_not_add_up_is_refused(tmp_path: Path, damage: str, message: str) -> None:
    """Rows deleted, added or renamed behind the engine's back are a StoreError, never a quietly
    different state (a lost side effect would then never be compensated)."""
    store = Store(tmp_path / "e.db")
    with store.transaction() as conn:
        store.insert_workflow(conn, "wf", "w", 1, "running", _state(3), 0.0)
    store.close()
    raw = sqlite3.connect(tmp_path / "e.db")
    raw.execute(damage)
    raw.execute("UPDATE workflows SET rev = rev + 1")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match=message):
        Store(tmp_path / "e.db").load_state("wf")


def test_a_foreign_sqlite_file_is_not_adopted(tmp_path: Path) -> None:
    raw = sqlite3.connect(tmp_path / "customers.db")
    raw.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    raw.commit()
    raw.close()
    with pytest.raises(StoreError, match="not an engine database: it has tables of its own .customers."):
        Store(tmp_path / "customers.db")
    raw = sqlite3.connect(tmp_path / "customers.db")
    assert [r[0] for r in raw.execute("SELECT name FROM sqlite_master WHERE type='table'")] == ["customers"]
    raw.close()
