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

    code = ("import sys, crashpoint.engine.worker, crashpoint.fakes.world, crashpoint.harness.run.crashpoints; "
            "print(sorted(m for m in ('pandas', 'faker', 'jsonschema', 'yaml') if m in sys.modules))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.strip() == "[]"


#: Folders whose modules a documented command imports (the adapters' and targets' engines are extras).
RUNTIME = ("crashpoint", "engine", "fakes", "reports", "harness/cli", "harness/faults", "harness/judge",
           "harness/load", "harness/run", "harness/traces")


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
