"""The dependency rules of the architecture, checked on the import statements themselves."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: package folder -> crashpoint subpackages it must never import
FORBIDDEN = {
    "engine": ("crashpoint.harness", "crashpoint.fakes", "crashpoint.reports"),
    "fakes": ("crashpoint.engine", "crashpoint.harness", "crashpoint.reports"),
    "reports": ("crashpoint.engine", "crashpoint.harness", "crashpoint.fakes"),
}


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize("folder", sorted(FORBIDDEN))
def test_dependencies_point_one_way(folder: str) -> None:
    offending = {f"{path.name}: {name}" for path in (ROOT / folder).glob("*.py") for name in imported(path)
                 if name.startswith(FORBIDDEN[folder])}
    assert not offending


def test_the_worker_imports_no_heavy_library() -> None:
    """A worker is started thousands of times: pandas, faker, jsonschema and yaml stay out of it."""
    import subprocess
    import sys

    code = ("import sys, crashpoint.engine.worker, crashpoint.fakes.world, crashpoint.harness.process.crashpoints; "
            "print(sorted(m for m in ('pandas', 'faker', 'jsonschema', 'yaml') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


#: Folders whose modules a documented command imports (the adapters' and targets' engines are extras).
RUNTIME = ("crashpoint", "engine", "fakes", "reports", "harness/cli", "harness/faults", "harness/judge",
           "harness/load", "harness/model", "harness/process", "harness/run", "harness/traces")


def test_every_third_party_module_a_command_imports_at_module_level_is_a_dependency() -> None:
    # issue 17: `crashpoint search` failed on a plain install (ModuleNotFoundError: hypothesis, a test extra only)
    import re
    import sys
    import tomllib
    from importlib.metadata import packages_distributions

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {re.split(r"[<>=\[ ;]", d, maxsplit=1)[0].lower().replace("_", "-") for d in project["dependencies"]}
    dists = packages_distributions()
    missing = {}
    for folder in RUNTIME:
        for path in sorted((ROOT / folder).glob("*.py")):
            for node in ast.parse(path.read_text(), str(path)).body:  # module level only (lazy imports are optional)
                names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                    [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top == "crashpoint" or top == "__future__":
                        continue
                    owners = {d.lower().replace("_", "-") for d in dists.get(top, [top])}
                    if not owners & declared:
                        missing[f"{path.relative_to(ROOT)}: {name}"] = sorted(owners)
    assert missing == {}


#: The subpackages of harness/, lowest first: a module may import its own subpackage and those before it, never
#: one after it (README "Layout"; issue 23). model is the leaf every part speaks (rules, findings, outcomes,
#: results, verdicts); process the worker processes (the crash probe inside them, zygotes, kill verification);
#: faults the registered fault kinds; engines the engines a target runs on (each declares its capabilities, which
#: load validates a target file against); load packs, cases and target files; adapters the engines a pack runs on;
#: judge the verdict of one run, from its outcome alone; run drivers and sweeps (they run, then judge); traces
#: replay and incidents; cli and pytest the front ends.
LAYERS = ("model", "process", "faults", "engines", "load", "adapters", "judge", "run", "traces", "cli", "pytest")


def _runtime_imports(path: Path) -> set[str]:
    """The crashpoint modules ``path`` imports, at module level or inside functions, leaving out the imports
    under ``if TYPE_CHECKING:`` (names for annotations only, never executed)."""
    tree = ast.parse(path.read_text(), str(path))
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skip.update(id(n) for child in node.body for n in ast.walk(child))
    names = set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
    return {n for n in names if n.startswith("crashpoint.")}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "harness" else None


def test_harness_subpackages_import_in_one_direction() -> None:
    assert sorted(p.name for p in (ROOT / "harness").iterdir() if (p / "__init__.py").exists()) == sorted(LAYERS)
    rank = {name: n for n, name in enumerate(LAYERS)}
    wrong = set()
    for path in sorted((ROOT / "harness").rglob("*.py")):
        own = path.relative_to(ROOT / "harness").parts[0]
        if own not in rank:
            continue
        for name in _runtime_imports(path):
            other = _layer(name)
            if other in rank and rank[other] > rank[own]:
                wrong.add(f"{path.relative_to(ROOT)} imports {name} ({own} is below {other})")
    assert sorted(wrong) == []


def test_the_top_level_package_imports_no_harness() -> None:
    """``import crashpoint`` (the target API a team's code imports) stays light: its modules import nothing of the
    harness, but for ``crashpoint.Target``, loaded on first use."""
    wrong = {f"{path.name}: {name}" for path in sorted((ROOT / "crashpoint").glob("*.py"))
             if path.name not in ("__init__.py", "__main__.py")  # ``python -m crashpoint`` is the command line
             for name in _runtime_imports(path) if name.startswith("crashpoint.harness")}
    assert sorted(wrong) == []


#: The folders installed as crashpoint's packages (pyproject.toml package-dir).
PACKAGE_FOLDERS = ("crashpoint", "engine", "fakes", "harness", "reports", "scenarios")


def test_one_name_per_module() -> None:
    """No two modules of crashpoint share a file name (``run/driver.py`` beside ``targets/driver.py`` made every
    traceback and every search ambiguous)."""
    seen: dict[str, list[str]] = {}
    for folder in PACKAGE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "__init__.py":
                seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def _engine_mentions(path: Path, names: list[str]) -> list[str]:
    """``FILE:LINE: TEXT`` of each line of ``path`` naming one of the engines ``names`` (in lower case, as a word's
    start: ``dbos``, ``dbos_worker``, ``temporalio``), a module path of a pack adapter left out (``adapters.NAME_adapter``:
    the engines a pack runs on, another protocol)."""
    import re

    word = re.compile(rf"(?<![A-Za-z0-9])({'|'.join(map(re.escape, names))})")
    adapter = re.compile(r"adapters[./][a-z0-9_]+")
    return [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for n, line in enumerate(path.read_text().splitlines(), 1)
            if word.search(adapter.sub("", line))]


def test_no_engine_is_named_outside_its_own_modules() -> None:
    """Issue 23: the driver, the sweep, the loader, the judge and the command line name no engine; everything about
    one is asked of its engine object (harness/engines/base.py). An engine's name appears only in its own modules,
    ``harness/engines/NAME.py``, ``NAME_worker.py`` and ``NAME_*.py`` (its helpers), which name no other engine;
    harness/adapters (a pack's engines) is another protocol."""
    from crashpoint.harness.engines.base import engines

    names = [e.name for e in engines()]
    assert len(names) >= 3, names
    found = []
    for path in sorted((ROOT / "harness").rglob("*.py")):
        parts = path.relative_to(ROOT / "harness").parts
        if parts[0] == "adapters":
            continue
        own = next((n for n in names if parts[0] == "engines" and (path.stem == n or path.stem.startswith(n + "_"))),
                   None)
        found += _engine_mentions(path, [n for n in names if n != own])
    assert found == []


def test_the_engine_name_check_finds_a_name() -> None:
    """The check above fails where a module names an engine (here: a per-engine dict, as the driver had)."""
    import tempfile

    with tempfile.TemporaryDirectory(dir=ROOT) as folder:
        path = Path(folder) / "driver.py"
        path.write_text('SERVERS = {"temporal": RunServer}\nhelp = "crashpoint.harness.adapters.dbos_adapter:X"\n'
                        "import crashpoint.harness.engines.dbos_worker\n")
        assert [m.split(": ", 1)[1] for m in _engine_mentions(path, ["dbos", "temporal"])] == \
            ['SERVERS = {"temporal": RunServer}', "import crashpoint.harness.engines.dbos_worker"]


#: Lines a function of harness/ may take at most (issue 23: ``run_target`` was 316).
MAX_FUNCTION_LINES = 120


def _long_functions(root: Path, limit: int) -> dict[str, int]:
    """``FILE::QUALNAME -> lines`` of each function (or method) of the ``*.py`` under ``root`` longer than ``limit``
    lines, from its ``def`` (decorators left out) to its last line."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        stack: list[tuple[ast.AST, str]] = [(tree, "")]
        while stack:
            node, prefix = stack.pop()
            for child in ast.iter_child_nodes(node):
                name = f"{prefix}{child.name}" if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                                      ast.ClassDef)) else prefix
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    lines = child.end_lineno - child.lineno + 1
                    if lines > limit:
                        found[f"{path.relative_to(root.parent).as_posix()}::{name}"] = lines
                stack.append((child, f"{name}." if name != prefix else prefix))
    return found


def test_no_function_in_harness_is_over_120_lines() -> None:
    found = _long_functions(ROOT / "harness", MAX_FUNCTION_LINES)
    assert found == {}


def test_the_function_length_check_finds_a_long_function(tmp_path: Path) -> None:
    (tmp_path / "harness").mkdir()
    (tmp_path / "harness" / "m.py").write_text(
        "def short():\n" + "    x = 1\n" * 5 + "\n\nclass C:\n    def long(self):\n" + "        x = 1\n" * 5
        + "        def inner():\n" + "            y = 2\n" * 5)
    assert _long_functions(tmp_path / "harness", 6) == {"harness/m.py::C.long": 12}
