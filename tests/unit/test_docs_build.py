"""The docs site builds with ``mkdocs build --strict`` (issue 24 item 1): a broken link, a missing anchor, a page
left out of the nav or any other warning fails here, as it would fail the site's build."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from needs import need

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # a whole mkdocs build of the site (about 3 s)
def test_the_site_builds_strict_with_no_warning(tmp_path: Path) -> None:
    need(importlib.util.find_spec("mkdocs") is not None, "mkdocs is not installed (the test extra has it)")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site"),
                           "--config-file", str(ROOT / "mkdocs.yml")], capture_output=True, text=True, timeout=300)
    said = done.stdout + done.stderr
    warnings = [line for line in said.splitlines() if "WARNING" in line or "ERROR" in line]
    assert done.returncode == 0 and warnings == [], "\n".join(warnings) or said[-3000:]
    assert (tmp_path / "site" / "tutorials" / "langgraph" / "index.html").is_file()
