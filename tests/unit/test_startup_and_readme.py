"""Output a person meets first: ``crashpoint --version`` starts fast (no heavy import at start-up),
and the README's two set-up commands work on a stock Debian/Ubuntu Python (issue 17, "Output a person
reads" and the README bullet)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] if (Path(__file__).parents[2] / "README.md").is_file() \
    else Path(__file__).resolve().parents[1]
HEAVY = ("jsonschema", "pandas", "sqlalchemy", "matplotlib", "yaml", "tabulate", "faker",
         "crashpoint.engine", "crashpoint.fakes", "crashpoint.harness.run.pack_driver", "crashpoint.harness.load.loader")


@pytest.mark.parametrize("argv", [["--version"], ["run", "--help"], ["report", "--help"]])
def test_start_up_imports_nothing_heavy(argv: list[str]) -> None:
    probe = ("import sys\nfrom crashpoint.harness.cli.main import main\n"
             f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
             f"print(sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r} or m in {HEAVY!r} "
             "or any(m.startswith(h + '.') for h in " + repr(HEAVY) + ")))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert out.strip().splitlines()[-1] == "[]", f"crashpoint {' '.join(argv)} imported: {out.splitlines()[-1]}"


#: Libraries ``--version`` must not import (each costs tenths of a second at start-up).
HEAVY = ("pandas", "numpy", "sqlalchemy", "jinja2", "rich", "yaml", "jsonschema", "hypothesis", "tabulate")


def test_version_imports_no_heavy_library() -> None:
    """``--version`` took 1.1 s before (0.35 s on an idle machine), 0.06 s after, because it imported the
    whole harness. Checked by what it imports (``-X importtime``), not by a wall-clock bound that load
    breaks; the timing is a benchmark's job."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "crashpoint", "--version"], check=True,
                          capture_output=True, text=True)
    imported = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in done.stderr.splitlines() if "|" in line}
    assert "crashpoint" in imported and done.stdout.strip()
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def _commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Set-up: the two commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("#")]


def test_readme_commands_install_into_a_venv_they_make() -> None:
    commands = _commands()
    assert len(commands) == 2
    for line in commands:
        steps = [s.strip() for s in line.split("&&")]
        installs = [i for i, s in enumerate(steps) if " pip install" in f" {s}"]
        assert installs, line
        made = next(i for i, s in enumerate(steps) if s.startswith("python3 -m venv "))
        active = next(i for i, s in enumerate(steps) if s.startswith(". ") and s.endswith("/bin/activate"))
        assert made < active < min(installs), f"pip runs outside the venv: {line}"


def test_ci_runs_the_readme_test_command_exactly() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == _commands()[1]


DEBIAN_PYTHON = Path("/usr/bin/python3")


def _externally_managed() -> bool:
    if not DEBIAN_PYTHON.exists():
        return False
    where = subprocess.run([str(DEBIAN_PYTHON), "-c", "import sysconfig; print(sysconfig.get_path('stdlib'))"],
                           capture_output=True, text=True).stdout.strip()
    return (Path(where) / "EXTERNALLY-MANAGED").exists()


@pytest.mark.slow  # makes a virtual environment with pip (87 s under load 25); the full suite runs it
@pytest.mark.skipif(not _externally_managed(), reason="no externally managed (PEP 668) system Python here")
def test_readme_venv_step_works_where_system_pip_is_refused(tmp_path: Path) -> None:
    """On a stock Debian Python the old first command is refused; the README's venv step gives a pip
    that installs (checked with ``pip install --dry-run`` of a package that is already there, offline)."""
    env = {**os.environ, "PATH": f"{DEBIAN_PYTHON.parent}{os.pathsep}{os.environ['PATH']}"}
    env.pop("VIRTUAL_ENV", None)
    old = subprocess.run([str(DEBIAN_PYTHON), "-m", "pip", "install", "--dry-run", "--no-index", "pip"],
                         capture_output=True, text=True, env=env)
    assert old.returncode != 0 and "externally-managed-environment" in old.stdout + old.stderr
    venv_part = _commands()[0].split(" && python -m pip install", 1)[0]
    assert re.fullmatch(r"python3 -m venv \.venv && \. \.venv/bin/activate", venv_part)
    check = ("python -m pip install --dry-run --no-index pip && "
             "python -c 'import sys; assert sys.prefix != sys.base_prefix'")
    done = subprocess.run(["bash", "-c", f"{venv_part} && {check}"], cwd=tmp_path, capture_output=True, text=True,
                          env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_readme_example_output_is_the_tutorials_tested_one() -> None:
    """README's failure example is the LangGraph tutorial's output block, which the tutorial test compares with what
    the command prints (tests/integration/test_docs_tutorials.py): the front page cannot drift from the output."""
    fence = re.compile(r"```\n(\$ crashpoint run .*?)```", re.S)
    readme = fence.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    tutorial = fence.findall((ROOT / "docs" / "tutorials" / "langgraph.md").read_text(encoding="utf-8"))
    assert readme and tutorial and readme[0] == tutorial[0], (readme[:1], tutorial[:1])
