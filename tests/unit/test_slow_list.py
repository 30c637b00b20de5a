"""``tests/slow.py`` names only tests that exist, each with a reason, and the fast loop leaves them out."""

from __future__ import annotations

import ast
from pathlib import Path

from slow import SLOW

ROOT = Path(__file__).resolve().parents[2]


def _functions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    return {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_every_slow_entry_names_a_test_that_exists_and_says_why() -> None:
    missing = []
    for test_id, why in SLOW.items():
        path, _, name = test_id.partition("::")
        file = ROOT / path
        if file.suffix == ".py":
            if not file.is_file() or name not in _functions(file):
                missing.append(test_id)
        elif not file.is_file():  # a pack case the plugin collects (``CASE.yaml::CASE_ID``)
            missing.append(test_id)
        assert why.strip(), test_id
    assert missing == [], "tests/slow.py names tests that no longer exist: " + ", ".join(missing)


def test_the_hook_marks_every_case_of_a_listed_test_and_nothing_else() -> None:
    from conftest import pytest_collection_modifyitems

    class Item:
        def __init__(self, nodeid: str) -> None:
            self.nodeid, self.marks = nodeid, []

        def add_marker(self, mark) -> None:
            self.marks.append(mark.name)

    listed = next(iter(SLOW))
    items = [Item(f"{listed}[case-1]"), Item(listed), Item("tests/unit/test_slow_list.py::not_listed")]
    pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    assert [i.marks for i in items] == [["slow"], ["slow"], []]
