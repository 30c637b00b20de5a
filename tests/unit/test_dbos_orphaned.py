"""When a DBOS worker stops waiting for a PENDING workflow (issue 25): one owned by another executor whose processes
were all killed, that no live process executes, is one nothing of the run advances until that executor is recovered
(``dbos_worker.orphaned``); before, a surviving worker of a two-worker recovery waited out ``dbos.settle_s`` (20 s) for
it. Every other case keeps waiting: the owner alive, this process's own executor, a workflow this process executed, or
one whose execution lock a live process holds."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("dbos")


@pytest.fixture()
def worker(monkeypatch: pytest.MonkeyPatch):
    from crashpoint.harness.engines import dbos_worker

    monkeypatch.setattr(dbos_worker, "_me", "exec-me")
    monkeypatch.setattr(dbos_worker, "_held", {})
    return dbos_worker


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _launches(run_dir: Path, *rows: tuple[int, str]) -> None:
    (run_dir / "launches.log").write_text("".join(f"{pid} {executor}\n" for pid, executor in rows))


def test_a_dead_executors_workflow_nobody_executes_is_orphaned(worker, tmp_path: Path) -> None:
    _launches(tmp_path, (_dead_pid(), "exec-dead"), (os.getpid(), "exec-me"))
    assert worker.orphaned(tmp_path, "wf-1", "exec-dead")


def test_a_live_owner_or_this_process_keeps_the_wait(worker, tmp_path: Path) -> None:
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        _launches(tmp_path, (_dead_pid(), "exec-restarted"), (live.pid, "exec-restarted"), (os.getpid(), "exec-me"))
        assert not worker.orphaned(tmp_path, "wf-1", "exec-restarted")  # one process of that executor still runs
    finally:
        live.kill()
        live.wait()
    assert not worker.orphaned(tmp_path, "wf-1", "exec-me")  # this worker's own executor: its launch recovers it
    assert not worker.orphaned(tmp_path, "wf-1", None)
    assert not worker.orphaned(tmp_path, "wf-1", "exec-never-launched")  # not a worker of this run: unknown


def test_a_workflow_being_executed_keeps_the_wait(worker, tmp_path: Path) -> None:
    _launches(tmp_path, (_dead_pid(), "exec-dead"))
    worker.executing(tmp_path, "wf-mine")  # this process executed it: its thread may still run
    assert not worker.orphaned(tmp_path, "wf-mine", "exec-dead")
    (tmp_path / "executing").mkdir(exist_ok=True)
    path = worker._lock_path(tmp_path, "wf-other")
    holder = subprocess.Popen([sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], "
                               "os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); print('held', flush=True); "
                               "time.sleep(30)", str(path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert not worker.orphaned(tmp_path, "wf-other", "exec-dead")  # a live process executes it
    finally:
        holder.kill()
        holder.wait()
    assert worker.orphaned(tmp_path, "wf-other", "exec-dead")  # the holder died: the kernel dropped its lock
    fd = os.open(path, os.O_RDWR)
    try:  # the check took no lock it kept
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    finally:
        os.close(fd)
