"""Workers start isolated from the harness's working directory (issue 17, item 4).

``python -m MODULE`` puts the working directory first on ``sys.path``: run from a folder that holds a
``crashpoint/`` directory, every worker imported that folder instead of the installed package, and every
run was an ``error`` blamed on the engine. Each launch mode and an adapter without ``fork_workers`` are
run from such a folder here.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack


@pytest.fixture()
def hostile_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    fake = tmp_path / "cwd" / "crashpoint"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("the crashpoint/ folder of the working directory")\n')
    monkeypatch.chdir(fake.parent)
    return fake.parent


def _golden(adapter, crash_mode: str, workdir: Path) -> list[str]:
    pack, cases = load_target(builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml")
    result = sweep(pack, cases, adapter, crash="none", executor="threads", jobs=1, workdir=workdir,
                   crash_mode=crash_mode)
    return [f"{r.verdict} {r.error or ''}".strip() for r in result.results]


@pytest.mark.parametrize("crash_mode", ["kill", "kill-cold"])
def test_reference_workers_ignore_a_crashpoint_folder_in_the_working_directory(
        hostile_cwd: Path, tmp_path: Path, crash_mode: str) -> None:
    assert _golden(ReferenceAdapter(), crash_mode, tmp_path / "runs") == ["passed"]


def test_an_adapter_without_fork_workers_ignores_a_crashpoint_folder_too(hostile_cwd: Path, tmp_path: Path) -> None:
    pytest.importorskip("langgraph.checkpoint.sqlite")
    from crashpoint.harness.adapters.langgraph_adapter import LangGraphSync

    assert not getattr(LangGraphSync(), "fork_workers", False)
    assert _golden(LangGraphSync(), "kill", tmp_path / "runs") == ["passed"]
