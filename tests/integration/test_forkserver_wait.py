"""A wait for a worker that ends early (``poll`` raising, Ctrl-C) kills that worker and keeps the zygote in step.

Issue 17: "the worker fork server did not start a worker: {'rc': 0, ...}" was seen once. A wait that ended
by an exception (an adapter error while a held event was delivered, from ``poll``) left the worker running;
it finished later and the zygote's ``{"rc": 0}`` for it was read as the next request's first answer.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from crashpoint.harness.process.forkserver import ForkServer
from crashpoint.harness.process.launch import run_process


class Boom(Exception):
    pass


def _boom() -> None:
    raise Boom("the adapter failed while a held event was delivered")


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ")[1].startswith("Z")


@pytest.mark.parametrize("stop", [Boom, KeyboardInterrupt])
def test_a_wait_ended_by_an_exception_kills_the_worker_and_the_zygote_stays_in_step(stop: type) -> None:
    def poll() -> None:
        raise stop("stop waiting")

    server = ForkServer()
    try:
        pids: list[int] = []
        with pytest.raises(stop):
            server.exec(["sleep", "0.5"], 30.0, poll=poll, on_start=pids.append)
        assert _gone(pids[0]), "the abandoned worker runs on"
        time.sleep(0.7)  # the old worker's answer, had it been left unread, has come by now
        assert server.exec(["true"], 30.0) == (0, [])
        assert server.exec(["false"], 30.0) == (1, [])
    finally:
        server.close()


def test_run_process_kills_its_process_when_poll_raises(tmp_path: Path) -> None:
    pids: list[int] = []
    with pytest.raises(Boom):
        run_process(["sleep", "30"], 30.0, poll=_boom, on_start=pids.append)
    assert _gone(pids[0])


def test_kill_zygotes_kills_its_zygotes_and_spares_a_pid_that_is_no_longer_one() -> None:
    """A zygote that died with the thread that started it stays in ``ZYGOTES``; its pid may since be another
    process's. ``kill_zygotes`` (Ctrl-C) SIGKILLs only this process's children among them."""
    import signal
    import subprocess

    from crashpoint.harness.process import forkserver

    server = ForkServer()
    other = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; wait"], stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    stranger = int(other.stdout.readline())  # a child of that shell, not of this process
    forkserver.ZYGOTES.add(stranger)
    try:
        forkserver.kill_zygotes()
        assert server.proc.wait(timeout=10) == -signal.SIGKILL
        time.sleep(0.2)
        assert not _gone(stranger) and stranger not in forkserver.ZYGOTES
    finally:
        forkserver.ZYGOTES.discard(stranger)
        os.killpg(other.pid, signal.SIGKILL)
        other.wait()
        server.kill()
