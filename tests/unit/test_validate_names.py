"""``crashpoint validate TARGET.yaml`` imports what the file names (in a child interpreter): an entry, invariant or
Temporal workflow that names nothing exits 2 with the file, the line and the field, where it printed ``ok`` before
and ``crashpoint run`` met it only inside the golden run's worker."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from crashpoint.harness.cli.main import main

TARGET = """target: t
engine: {engine}
entry: {entry}
pythonpath: ["."]
inputs:
  - {{thread: a, input: {{x: 1}}}}
{extra}"""


def _validate(tmp_path: Path, entry: str, engine: str = "langgraph", extra: str = "") -> tuple[int, str, str]:
    (tmp_path / "teamcode.py").write_text("builder = object()\n\ndef check(run):\n    return None\n")
    path = tmp_path / "target.yaml"
    path.write_text(TARGET.format(engine=engine, entry=entry, extra=extra))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["validate", str(path)])
    return code, out.getvalue(), err.getvalue()


def test_a_target_whose_names_import_is_valid(tmp_path: Path) -> None:
    code, out, err = _validate(tmp_path, "teamcode:builder", extra="invariants: [teamcode:check]\n")
    assert code == 0 and out.startswith("ok: target t"), err


@pytest.mark.parametrize(("entry", "extra", "where", "said"), [
    ("teamcode:nope", "", "target.yaml:3: field entry", "AttributeError"),
    ("nomodule_xyz:builder", "", "target.yaml:3: field entry", "ModuleNotFoundError"),
    ("teamcode:builder", "invariants: [teamcode:check, teamcode:missing]\n", "target.yaml:7: field invariants[1]",
     "'teamcode:missing'"),
])
def test_a_name_that_imports_nothing_exits_2_with_line_and_field(tmp_path: Path, entry: str, extra: str,
                                                                 where: str, said: str) -> None:
    code, out, err = _validate(tmp_path, entry, extra=extra)
    assert code == 2 and not out, out
    assert err.count("\n") == 1 and f"{tmp_path}/{where}:" in err and said in err, err
