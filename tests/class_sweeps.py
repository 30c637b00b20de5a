"""Helpers of the crash-point class tests (tests/integration/test_sweep_scale*.py): a ``crashpoint run`` of a target
file with ``--json``, and what its failing runs were."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def run_json(target: Path, out: Path, *options: str, timeout: float = 900) -> tuple[int, str, dict]:
    """``(exit code, stdout + stderr, the --json report)`` of ``crashpoint run TARGET -q --json OUT OPTIONS...``,
    run in the target file's folder (``timeout``: wall seconds)."""
    done = subprocess.run([sys.executable, "-m", "crashpoint", "run", str(target), "-q", "--json", str(out), *options],
                          capture_output=True, text=True, timeout=timeout, cwd=target.parent)
    return done.returncode, done.stdout + done.stderr, json.loads(out.read_text())


def failing(data: dict, unit: str) -> tuple[set[str], set[str]]:
    """The rules that failed, and the classes of the single kills that failed, of the sweep unit ``unit``
    (``"pay[sync]"``); every run that did not pass must have failed (a sampled recovery pair whose second point a
    broken recovery never reached, after its first kill paid twice, was an ``error`` on dbos 3.4.0 before: issue 27
    item 4). A held race counts for its kill's point."""
    of = {p: c["class"] for c in data["classes"][unit] for p in c["covered"] + c["left_out"]}
    assert all(r["verdict"] in ("passed", "failed") for r in data["results"]), [
        (r["crash_point"], r["verdict"], r["error"]) for r in data["results"] if r["verdict"] not in ("passed", "failed")]
    bad = [r for r in data["results"] if r["verdict"] == "failed"]
    singles = [r["crash_point"].split(" with ")[0] for r in bad if " >> " not in r["crash_point"]]
    return {f["rule"] for r in bad for f in r["failures"]}, {of[p] for p in singles if p in of}
