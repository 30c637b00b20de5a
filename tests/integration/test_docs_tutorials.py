"""The commands of each tutorial (and every other docs page that marks some) run as the page says.

A page marks what a test must do with a comment right before a fenced block:

* ``<!-- test: file PATH -->``: the block is a file of the reader's project, written to ``PATH``;
* ``<!-- test: run -->``: each command of the block runs (``bash``), and must exit 0;
* ``<!-- test: run, exit N -->``: the same, the block's last command exiting ``N`` (a seeded bug caught: 1);
* ``<!-- test: output -->``: the block's lines (after a ``$ command`` line, which is not checked) are lines of what
  the last command before it printed, in order; pids and wall times are compared as ``N`` (:func:`shown`).

A page whose commands need an optional package (an engine of an extra the test venv may lack) says so anywhere,
``<!-- test: needs MODULE -->``: without ``MODULE`` installed, its commands are skipped with that reason.

The blocks of a page run in order. A page with files runs in a fresh folder holding them (the reader's own
project); a page without runs from the repository root (the built-in packs, the examples). The marked commands
are cheap on purpose (``--case``, ``--crash-point``, ``--crash none``); the full sweeps a page shows are not
marked. ``crashpoint`` and ``python`` are this venv's.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
MARK = re.compile(r"<!-- test: (?P<what>[^>]*?) -->[ \t]*\n```[A-Za-z0-9_-]*\n(?P<body>.*?)^```", re.S | re.M)
NEEDS = re.compile(r"<!-- test: needs (?P<module>[\w.]+) -->")
#: Seconds one command may take (a Temporal run starts a dev server).
TIMEOUT_S = 600


def steps(page: Path) -> list[tuple[str, str]]:
    """``(what, body)`` of each marked block of ``page``, in order."""
    return [(m.group("what").strip(), m.group("body")) for m in MARK.finditer(page.read_text(encoding="utf-8"))]


def commands(body: str) -> list[str]:
    """The commands of a shell block: one per line (a line ending in ``\\`` goes on), comments and blanks left out."""
    out, line = [], ""
    for raw in body.splitlines():
        line += raw.rstrip()
        if line.endswith("\\"):
            line = line[:-1] + " "
            continue
        if line.strip() and not line.lstrip().startswith("#"):
            out.append(line.strip())
        line = ""
    return out


PAGES = sorted(p for p in DOCS.rglob("*.md") if steps(p))


def shown(text: str) -> list[str]:
    """``text``'s non-blank lines with what changes from run to run (pids, seconds) written ``N``, right-stripped."""
    text = re.sub(r"pid(s?)[= ]\d+", r"pid\1=N", text)
    text = re.sub(r"\b\d+(\.\d+)? ?s\b", "N s", text)  # crashpoint's "4.1 s", pytest's "9.21s"
    return [line.rstrip() for line in text.splitlines() if line.strip() and not line.startswith("$ ")]


def missing_lines(want: str, got: str) -> list[str]:
    """The lines of ``want`` (:func:`shown`) not found in ``got``'s lines in order; ``[]`` when all are there."""
    have, at = shown(got), 0
    for n, line in enumerate(shown(want)):
        while at < len(have) and have[at] != line:
            at += 1
        if at == len(have):
            return shown(want)[n:]
        at += 1
    return []


def test_output_blocks_are_compared_line_by_line_in_order() -> None:
    got = "a\nledger#2 x pid=123 y\nb\n1 passed in 4.1 s\n"
    assert missing_lines("$ cmd\nledger#2 x pid=9 y\n1 passed in 2.0 s\n", got) == []
    assert missing_lines("1 passed in 9.21s\n", "1 passed in 48.11s\n") == []  # pytest's own wall time
    assert missing_lines("1 passed in 9.21s\n", "1 skipped in 0.5s\n") == ["1 passed in N s"]
    assert missing_lines("b\na\n", got) == ["a"]  # out of order
    assert missing_lines("c\n", got) == ["c"]


def test_the_tutorials_mark_commands_to_run() -> None:
    marked = {p.relative_to(DOCS).as_posix() for p in PAGES}
    tutorials = {p.relative_to(DOCS).as_posix() for p in (DOCS / "tutorials").glob("*.md")}
    assert tutorials and tutorials <= marked, f"tutorials with no command a test runs: {sorted(tutorials - marked)}"
    for page in PAGES:
        for what, _ in steps(page):
            assert re.fullmatch(r"file [\w./-]+|run(, exit \d+)?|output", what), \
                f"{page.name}: unknown marker {what!r}"


@pytest.mark.slow  # each page runs real sweeps: golden runs and kills (LangGraph, DBOS, a Temporal dev server)
@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(DOCS).as_posix() for p in PAGES])
def test_the_commands_of_the_page_run_as_it_says(page: Path, tmp_path: Path) -> None:
    for needed in NEEDS.findall(page.read_text(encoding="utf-8")):
        if importlib.util.find_spec(needed) is None:
            pytest.skip(f"{page.relative_to(DOCS).as_posix()} needs {needed}, which is not installed")
    marked = steps(page)
    has_files = any(what.startswith("file ") for what, _ in marked)
    folder = tmp_path / "project" if has_files else ROOT
    folder.mkdir(exist_ok=True)
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = None
    for what, body in marked:
        if what == "output":
            assert done is not None, f"{page.name}: an output block before any command"
            lost = missing_lines(body, done.stdout)
            assert not lost, (f"{page.relative_to(ROOT)}: the page shows lines `{done.args[-1]}` did not print: "
                              f"{lost[:3]}\n--- stdout\n{done.stdout[-3000:]}")
            continue
        if what.startswith("file "):
            path = folder / what.split(" ", 1)[1]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(body, encoding="utf-8")
            continue
        want = int(what.rsplit(" ", 1)[1]) if "exit" in what else 0
        lines = commands(body)
        assert lines, f"{page.name}: an empty command block"
        for n, line in enumerate(lines):
            done = subprocess.run(["bash", "-c", line], cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
            expected = want if n == len(lines) - 1 else 0
            assert done.returncode == expected, (
                f"{page.relative_to(ROOT)}: `{line}` exited {done.returncode}, the page says {expected}\n"
                f"--- stdout\n{done.stdout[-3000:]}\n--- stderr\n{done.stderr[-3000:]}")
