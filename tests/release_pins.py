"""The per-release pins of an example (its ``known_findings.yaml``: ``probes`` and a row of wanted outcomes per
release), shared by the engines' release tests (tests/adapters/test_target_*_releases.py)."""

from __future__ import annotations

from importlib.metadata import version
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]


def pins(example: str, package: str) -> tuple[Path, dict[str, Any], str, dict[str, Any] | None]:
    """``(example folder, pins, installed version of package, that version's row or None)``."""
    folder = ROOT / "examples" / example
    found = yaml.safe_load((folder / "known_findings.yaml").read_text())
    installed = version(package)
    return folder, found, installed, found["releases"].get(installed)


def check(result: Any, want: str | list[str]) -> None:
    """``result`` (a run's RunResult) gives ``want``: that verdict, or ``failed`` with at least those rules."""
    if isinstance(want, str):
        assert result.verdict == want, (result.verdict, result.error, [f.message for f in result.failures])
    else:
        assert result.verdict == "failed", (result.verdict, result.error)
        assert set(want) <= {f.rule for f in result.failures}, [f.message for f in result.failures]


def check_rows(found: dict[str, Any], outcomes: tuple[str, ...], prefixes: tuple[str, ...]) -> None:
    """Every release row names known probes, and each wants one of ``outcomes`` or a list of rule ids with one of
    ``prefixes``."""
    for release, row in found["releases"].items():
        assert set(row) <= set(found["probes"]), release
        for want in row.values():
            assert want in outcomes or (isinstance(want, list) and all(r.startswith(prefixes) for r in want)), \
                (release, want)
