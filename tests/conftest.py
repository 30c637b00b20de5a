"""Shared test set-up: make ``tests/`` importable, here and in engine worker subprocesses.

``tests/quality/test_quality.py`` points ``ReferenceAdapter(engine="variants.engines:NAME")`` at the
deliberately broken engines in ``tests/variants/``. The adapter imports that class in this
process, and every worker subprocess (started with this process's environment) imports it
again, so ``tests/`` goes on both ``sys.path`` and ``PYTHONPATH``, keeping what was there.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

import freezegun
import pytest

# What the plugin imports lazily inside a pytester run: dropped afterwards, a module imported
# again holds new classes (sqlite3's exceptions included, a multi-phase extension), so a connection made
# by a module kept from before raises exceptions the new module's ``except`` clauses do not catch.
import concurrent.futures.process  # noqa: E402,F401
import sqlite3  # noqa: E402,F401

import crashpoint.engine.engine  # noqa: E402,F401
import crashpoint.fakes.world  # noqa: E402,F401
import crashpoint.harness.adapters.reference  # noqa: E402,F401
import crashpoint.harness.run.pack_driver  # noqa: E402,F401
import crashpoint.reports.results_store  # noqa: E402,F401

TESTS_DIR = str(Path(__file__).resolve().parent)

if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if TESTS_DIR not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([TESTS_DIR, *_paths])


# freezegun's freeze_time reads every attribute of every loaded module; pydantic's are lazy imports, and after a
# pytester in-process run dropped the pydantic submodules it had imported, one of them (pydantic.root_model)
# imported again met a second BaseModel: "ValueError: tuple.index(x): x not in tuple" in tests/unit/test_weekly.py
# under -n 2 (5 errors on 2026-12-02, pydantic 2.14.4, freezegun 1.5.5). pydantic keeps no clock to freeze.
# The same through langchain_core.runnables' lazy attributes (7 errors in CI at aa51126 under -n 2, and that worker's
# later `import langgraph.checkpoint.sqlite` failed too): the engines' packages keep no clock the weekly report reads.
# pytester's in-process runs drop from sys.modules what they imported: a pydantic first imported inside one (by an
# engine's package) was imported again afterwards beside objects of the first, and `import langgraph.checkpoint.sqlite`
# in a later test of that process failed in pydantic.root_model with the same ValueError (CI at f20b358, -n 2). Loaded
# here, before any test, pydantic is in every snapshot and never dropped.
try:
    import pydantic.main  # noqa: F401
    import pydantic.root_model  # noqa: F401
except ImportError:  # the test extra without the engines
    pass
freezegun.configure(extend_ignore_list=["pydantic", "langchain_core", "langchain", "langgraph", "langsmith", "dbos",
                                        "temporalio", "prefect", "distributed", "dask"])


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Import pandas before a test's ``pytester`` takes its snapshot of ``sys.modules``: numpy cannot be imported
    twice in one process, and pytester's in-process runs drop the modules they imported (pandas among them: the
    judge's metrics import it). Here rather than at the top: it cost every collection about 1 s."""
    if "pytester" in getattr(item, "fixturenames", ()):
        import pandas  # noqa: F401


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``slow`` every test :data:`slow.SLOW` names (before ``-m`` selects), so that the fast loop,
    ``python -m pytest -m "not slow" -n 2``, leaves them to the full suite."""
    from slow import SLOW

    for item in items:
        if item.nodeid.split("[", 1)[0] in SLOW:
            item.add_marker(pytest.mark.slow)


#: The seed's case, the one every pack copy below keeps.
SEED = "approval_timeout_after_refund_draft.json"


@pytest.fixture()
def pack_dir(tmp_path: Path) -> Path:
    """A private copy of the built-in refunds pack with only its seed case, to break at will."""
    from crashpoint.scenarios import builtin_pack

    dst = Path(shutil.copytree(builtin_pack("refunds"), tmp_path / "refunds"))
    for case in (dst / "cases").iterdir():
        if case.name != SEED:
            case.unlink()
    return dst


@pytest.fixture()
def pack(pack_dir: Path):
    """The pack of :func:`pack_dir`, loaded."""
    from crashpoint.harness.load.loader import load_pack

    return load_pack(pack_dir)
