"""The harness itself killed: SIGKILL of ``crashpoint run --results-db`` at random moments loses no
finished result, corrupts neither the store nor the scenario files, and ``--resume`` finishes the
sweep without repeating a finished run, ending with the verdicts of an uninterrupted sweep."""

from __future__ import annotations

import hashlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import pytest

from crashpoint.harness.run.pack_driver import RUN_MARKER

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "scenarios"
CASE = SCENARIOS / "refunds" / "cases" / "draft_fatal_failure.yaml"
KILLS = 20


def _tree_hash(folder: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(folder.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(folder)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def _start(db: Path, workdir: Path, resume: bool) -> subprocess.Popen:
    argv = [sys.executable, "-m", "crashpoint", "run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2",
            "--workdir", str(workdir)] + (["--resume"] if resume else [])
    return subprocess.Popen(argv, cwd=db.parent, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def _marked(root: Path) -> list[int]:
    """Processes whose environment carries a run marker under ``root``."""
    needle = f"{RUN_MARKER}={root}".encode()
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if any(v.startswith(needle) for v in (entry / "environ").read_bytes().split(b"\0")):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _reap(root: Path) -> None:
    for pid in _marked(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _runs(db: Path) -> list[tuple[str, bool, dict[tuple[str, str], str], int]]:
    """(run_id, complete, {(case, point): verdict}, rows) per run, checking the file's integrity."""
    if not db.exists():
        return []
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        try:
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        except sqlite3.OperationalError as exc:
            # A sweep killed while it created the store leaves a hot rollback journal, which only a
            # writable connection may roll back (SQLite's own recovery, as the next sweep does): read
            # the file as that sweep will find it.
            if "readonly" not in str(exc):
                raise
            con.close()
            con = sqlite3.connect(db)
            assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        tables = {r[0] for r in con.execute("select name from sqlite_master where type='table'")}
        if "crashpoint_runs" not in tables:
            return []
        out = []
        for run_id, complete in con.execute("select run_id, complete from crashpoint_runs order by started_at"):
            rows = con.execute("select case_id, crash_point, verdict from crashpoint_results where run_id = ?",
                               (run_id,)).fetchall()
            out.append((run_id, bool(complete), {(c, p): v for c, p, v in rows}, len(rows)))
        return out
    finally:
        con.close()


@pytest.mark.slow  # about 40 s on an idle 2-core machine, 100 s on a loaded one
def test_sweep_killed_at_20_random_moments_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    before = _tree_hash(SCENARIOS)
    began = time.monotonic()
    ref_db = tmp_path / "reference.db"
    proc = _start(ref_db, tmp_path / "ref-work", resume=False)
    assert proc.wait(timeout=300) == 0
    wall = time.monotonic() - began
    ((_, complete, reference, rows),) = _runs(ref_db)
    assert complete and rows == len(reference) >= 5

    rng = random.Random(20261130)
    kills, sweeps, attempt, mid = 0, 0, 0, 0  # mid: kills that left a run with some but not all results
    db = tmp_path / "s0" / "results.db"
    db.parent.mkdir()
    seen: dict[tuple[str, str], str] = {}
    while kills < KILLS:
        attempt += 1
        work = tmp_path / f"work-{attempt}"
        proc = _start(db, work, resume=True)
        time.sleep(rng.uniform(0.3, wall * 0.8))
        killed = proc.poll() is None
        if killed:
            proc.kill()  # SIGKILL of the crashpoint process alone; its workers are in their own sessions
            proc.wait()
            kills += 1
        _reap(work)
        runs = _runs(db)
        mid += killed and any(not r[1] and 0 < len(r[2]) < len(reference) for r in runs)
        assert sum(1 for r in runs if not r[1]) <= 1, "a resume started a second run instead of finishing the first"
        for run_id, done, results, n in runs:
            assert n == len(results), f"run {run_id} recorded a (case, crash point) twice"
            assert all(reference[k] == v for k, v in results.items()), "a verdict differs from the uninterrupted run"
        live = [r for r in runs if not r[1]] or [r for r in runs if r[1]][-1:]
        if live:
            _, done, results, _ = live[0]
            assert set(seen) <= set(results), "a finished result was lost"
            seen = dict(results)
            if done:  # this sweep finished before the kill: check it, start another
                assert results == reference
                sweeps += 1
                db = tmp_path / f"s{sweeps}" / "results.db"
                db.parent.mkdir()
                seen = {}
    proc = _start(db, tmp_path / "work-final", resume=True)
    assert proc.wait(timeout=300) == 0
    _reap(tmp_path / "work-final")
    ((_, complete, results, rows),) = _runs(db)
    assert complete and results == reference and rows == len(reference)
    assert _tree_hash(SCENARIOS) == before, "the scenario files changed"
    assert not _marked(tmp_path), "a process of a killed sweep survived"
    assert mid >= KILLS // 4, f"only {mid} kills landed in the middle of a sweep"
    print(f"{kills} kills ({mid} with a sweep part-recorded) over {sweeps + 1} sweep(s), {attempt + 1} "
          f"invocations; uninterrupted sweep {wall:.1f} s")


def test_resume_needs_a_store(tmp_path: Path) -> None:
    from crashpoint.harness.cli.main import main

    assert main(["run", str(CASE), "--resume"]) == 2


def test_resume_refuses_recovery_mode(tmp_path: Path) -> None:
    from crashpoint.harness.cli.main import main

    assert main(["run", str(CASE), "--resume", "--crash", "recovery", "--results-db", str(tmp_path / "r.db")]) == 2


@pytest.mark.parametrize("crash", ["every"])
def test_resume_with_nothing_to_resume_starts_a_new_run(tmp_path: Path, crash: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from crashpoint.harness.cli.main import main
    from crashpoint.harness.run.resume import find_incomplete
    from crashpoint.reports.results_store import ResultStore

    db = tmp_path / "r.db"
    store = ResultStore(db)
    done = store.begin_run({"engine": "reference", "pack": "refunds", "pack_version": "1.0.0", "crash": crash,
                            "source": "cli"})
    store.finish_run(done)
    assert find_incomplete(store, {"engine": "reference", "pack": "refunds", "pack_version": "1.0.0",
                                   "crash": crash, "source": "cli"}) is None
    half = store.begin_run({"engine": "reference", "pack": "refunds", "pack_version": "1.0.0", "crash": crash,
                            "source": "cli"})
    assert find_incomplete(store, {"engine": "reference", "pack": "refunds", "pack_version": "1.0.0",
                                   "crash": crash, "source": "cli"}) == half
    assert find_incomplete(store, {"engine": "other", "pack": "refunds", "pack_version": "1.0.0",
                                   "crash": crash, "source": "cli"}) is None
    store.close()
    assert main(["run", str(CASE), "--crash", "none", "--resume", "--results-db", str(db), "-q"]) == 0
    assert "no incomplete run" in capsys.readouterr().out


def _recorded_then_cut(db: Path, *extra: str, cut: Callable[[list[str]], list[str]] | None = None) -> tuple:
    """A recorded sweep of CASE (``crashpoint run``'s default ``--crash sampled``, or ``extra`` options)
    whose last 3 results (or the crash points ``cut`` picks from the recorded ones) and end stamp are then
    taken away (what a kill leaves); returns the complete run's row as :func:`_runs` gives it, from before
    the cut."""
    from crashpoint.harness.cli.main import main

    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", *extra]) == 0
    (complete,) = _runs(db)
    con = sqlite3.connect(db)
    with con:
        if cut is None:
            con.execute("delete from crashpoint_results where id in (select id from crashpoint_results "
                        "order by id desc limit 3)")
        else:
            gone = cut(sorted(p for _, p in complete[2] if p))
            assert gone, "nothing to cut"
            con.executemany("delete from crashpoint_results where crash_point = ?", [(p,) for p in gone])
        con.execute("update crashpoint_runs set complete = 0, ended_at = null")
    con.close()
    return complete


def test_resume_in_process_runs_only_what_is_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded sweep whose last results and end stamp are taken away (what a kill leaves) is
    finished by --resume: the missing runs only, the same verdicts, one row per pair."""
    from crashpoint.harness.cli.main import main

    db = tmp_path / "r.db"
    run_id, _, reference, _ = _recorded_then_cut(db)
    capsys.readouterr()
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"resuming run {run_id}: {len(reference) - 3} result(s) already recorded" in out
    ((again, complete, results, rows),) = _runs(db)
    assert again == run_id and complete and results == reference and rows == len(reference)
    assert f"{len(reference)} passed" in out


def _pairs_beside_together_runs(points: list[str]) -> list[str]:
    """The recorded "A >> B" pairs whose A also starts an "A >> 3 workers" run."""
    together = {p.split(" >> ")[0] for p in points if p.endswith(" workers")}
    return [p for p in points if " >> " in p and not p.endswith(" workers") and p.split(" >> ")[0] in together]


def test_resume_runs_a_missing_pair_whose_kill_also_starts_a_together_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """issue 17: the cut of the pair ``before_checkpoint:refund_draft >> ...#2`` (its single kill and the
    ``... >> 3 workers`` run kept) was taken as done, since the together run starts with the same
    ``A >> ``: --resume ran nothing for it and stamped the run complete with the pair missing."""
    from crashpoint.harness.cli.main import main

    db = tmp_path / "r.db"
    run_id, _, reference, _ = _recorded_then_cut(db, cut=_pairs_beside_together_runs)
    gone = _pairs_beside_together_runs(sorted(p for _, p in reference if p))
    capsys.readouterr()
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--resume"]) == 0
    out = capsys.readouterr().out
    assert f"resuming run {run_id}: {len(reference) - len(gone)} result(s) already recorded" in out
    ((again, complete, results, rows),) = _runs(db)
    assert again == run_id and complete and rows == len(reference)
    assert results == reference


def test_resume_never_mixes_crash_modes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An incomplete real-kill run is not finished by simulated crashes: --resume --crash-mode inprocess
    starts a run of its own, stored as ``every+inprocess``, and the real-kill run stays incomplete."""
    from crashpoint.harness.cli.main import main

    db = tmp_path / "r.db"
    _recorded_then_cut(db, "--crash", "every")
    capsys.readouterr()
    assert main(["run", str(CASE), "--results-db", str(db), "-q", "--jobs", "2", "--resume", "--crash", "every",
                 "--crash-mode", "inprocess"]) == 0
    assert "resuming run" not in capsys.readouterr().out
    con = sqlite3.connect(db)
    stored = con.execute("select crash, complete from crashpoint_runs order by started_at").fetchall()
    con.close()
    assert stored == [("every", 0), ("every+inprocess", 1)]
