"""A target file's options block of another engine (``dbos:`` on a LangGraph target) is refused with its file,
line and field: since the engine protocol (68cf226) it was dropped unread, so a team that set ``dbos.settle_s`` on the
wrong target got the defaults and no word."""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.errors import CaseError
from crashpoint.harness.load.target import Target

TARGET = """target: t
engine: langgraph
entry: m:builder
inputs:
  - {thread: a, input: 1}
dbos:
  settle_s: 3
"""


def test_another_engines_options_block_is_refused_naming_its_line(tmp_path: Path) -> None:
    path = tmp_path / "target.yaml"
    path.write_text(TARGET)
    with pytest.raises(CaseError) as caught:
        Target.from_file(path)
    assert (caught.value.field, caught.value.line) == ("dbos", 6), caught.value
    assert "options of engine dbos, but this target's engine is langgraph" in str(caught.value)


def test_target_from_data_refuses_it_too() -> None:
    with pytest.raises(CaseError) as caught:
        Target.from_data({"target": "t", "engine": "langgraph", "entry": "m:g", "inputs": [{"thread": "a", "input": 1}],
                          "temporal": {"settle_s": 3}})
    assert caught.value.field == "temporal", caught.value


def test_the_engines_own_block_is_kept() -> None:
    target = Target.from_data({"target": "t", "engine": "dbos", "entry": "m:g", "inputs": [{"thread": "a", "input": 1}],
                               "dbos": {"settle_s": 3}})
    assert target.options == {"settle_s": 3} and target.to_data()["dbos"] == {"settle_s": 3}
