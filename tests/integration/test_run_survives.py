"""The exit code and the results survive what happens around ``crashpoint run`` (issue 27 item 9): a standard output
whose reader went away (``crashpoint run ... | head -1``: before, a failing sweep exited 0 and wrote no ``--json``),
a second sweep started in the same ``--workdir`` while one runs there (refused, naming it), and a ``chdir`` in the
code under test (the ``--json`` file and the run folders stay where they were named at the start)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SEED = ROOT / "scenarios" / "refunds" / "cases" / "approval_timeout_after_refund_draft.json"


def _run_into_a_closed_pipe(tmp_path: Path, *argv: str) -> tuple[int, str]:
    """``crashpoint run ARGV`` with a standard output whose reader has already gone (as after ``| head -1``):
    its exit code and standard error."""
    read, write = os.pipe()
    os.close(read)
    try:
        done = subprocess.run([sys.executable, "-m", "crashpoint", "run", *argv], stdout=write,
                              stderr=subprocess.PIPE, text=True, cwd=tmp_path, timeout=300)
    finally:
        os.close(write)
    return done.returncode, done.stderr


def test_a_failing_sweep_into_a_closed_pipe_still_exits_1_and_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    rc, err = _run_into_a_closed_pipe(tmp_path, str(SEED), "--crash-point", "after_checkpoint:nowhere",
                                      "--json", str(out))
    assert rc == 1, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    verdicts = [r["verdict"] for r in json.loads(out.read_text())["results"]]
    assert verdicts == ["passed", "error"], verdicts


def test_a_sweep_with_its_standard_streams_closed_exits_with_its_code_and_writes_its_json(tmp_path: Path) -> None:
    """``2>&-`` and ``>&-`` (the shell closes the descriptor: Python's ``sys.stderr`` is ``None``): before, the first
    progress dot raised AttributeError, exit 3 and no ``--json`` (the attack on issue 27 item 9)."""
    for closed in ("2>&-", ">&-", ">&- 2>&-"):
        out = tmp_path / f"out{len(closed)}.json"
        command = (f"{sys.executable} -m crashpoint run {SEED} --crash-point after_checkpoint:nowhere "
                   f"--json {out} {closed}")
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=tmp_path, timeout=300)
        assert done.returncode == 1, (closed, done.stdout[-500:], done.stderr[-500:])
        assert [r["verdict"] for r in json.loads(out.read_text())["results"]] == ["passed", "error"], closed


def test_a_passing_sweep_into_a_closed_pipe_exits_0_and_writes_its_json(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    rc, err = _run_into_a_closed_pipe(tmp_path, str(SEED), "--crash", "none", "--json", str(out))
    assert rc == 0 and "Traceback" not in err, err
    assert [r["verdict"] for r in json.loads(out.read_text())["results"]] == ["passed"]
