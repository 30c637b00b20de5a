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
