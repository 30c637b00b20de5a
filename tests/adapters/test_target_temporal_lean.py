"""crashpoint's own Temporal dev servers: lean (the maintenance scanners off, checked on the server itself) and, for
a server-crash case, started ahead (each on a fresh database, handed out once)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.engines.effects import alive  # noqa: E402

SCANNER_QUEUE = "temporal-sys-tq-scanner-taskqueue-0"
#: A system worker the lean config keeps: once it polls, the server's worker service has started its workers.
KEPT_QUEUE = "temporal-sys-processor-parent-close-policy"


def _binary_or_skip() -> None:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


async def _pollers(address: str, queue: str) -> int:
    from temporalio.api.enums.v1 import TaskQueueType
    from temporalio.api.taskqueue.v1 import TaskQueue
    from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest

    from crashpoint.harness.engines.temporal_worker import connect

    client = await connect(address, namespace="temporal-system")
    resp = await client.workflow_service.describe_task_queue(DescribeTaskQueueRequest(
        namespace="temporal-system", task_queue=TaskQueue(name=queue),
        task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY))
    return len(resp.pollers)


def _scanner_pollers(tmp_path: Path, lean: bool) -> int:
    """Pollers of the task queue scanner's queue once the kept system worker polls (within 60 s)."""
    from crashpoint.harness.engines.temporal import RunServer

    tmp_path.mkdir()
    with RunServer(tmp_path, lean=lean) as server:
        deadline = time.monotonic() + 60
        while not asyncio.run(_pollers(server.address, KEPT_QUEUE)):
            assert time.monotonic() < deadline, "the server's system workers never polled"
            time.sleep(0.2)
        time.sleep(1.0)  # the scanners' workers start with the others (within 50 ms of them at load 9)
        return asyncio.run(_pollers(server.address, SCANNER_QUEUE))


@pytest.mark.slow
def test_a_lean_server_runs_no_scanner_and_a_default_one_does(tmp_path: Path) -> None:
    """The dynamic config keys exist in this server version and do what LEAN_CONFIG says (an unknown key is ignored
    by the server: this is what would show it)."""
    _binary_or_skip()
    assert _scanner_pollers(tmp_path / "default", lean=False) > 0
    assert _scanner_pollers(tmp_path / "lean", lean=True) == 0


def _executions(db: Path) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT count(*) FROM executions WHERE namespace_id != "
                            "(SELECT id FROM namespaces WHERE name = 'temporal-system')").fetchone()[0]


def test_a_server_started_ahead_is_fresh_and_handed_out_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's server from the pool: started before the run asked (the pool's oldest), lean, on a database of its own
    in a folder of its own, never one another run used (the first run's refund is not in the second's database);
    killed with its run (pid checked gone), its database then in the run folder; the pool's leftovers are killed by
    close_ahead."""
    _binary_or_skip()
    from crashpoint.harness.engines import temporal_ahead

    temporal_ahead.close_ahead()
    monkeypatch.setattr(temporal_ahead, "AHEAD", 1)
    first = temporal_ahead.ahead(tmp_path / "a").start()
    assert first.server is not None and first.server.lean
    with temporal_ahead._lock:
        [waiting] = temporal_ahead._pool
    started_ahead = waiting.result()  # started while the first run ran
    (tmp_path / "a").mkdir()
    from crashpoint.harness.engines.temporal_worker import connect

    async def submit(address: str) -> None:
        client = await connect(address)
        await client.start_workflow("RefundWorkflow", {"order_id": "1", "amount_cents": 1}, id="refund-1",
                                    task_queue="nobody-polls")
    asyncio.run(submit(first.address))
    assert _executions(first.database) == 1
    second = temporal_ahead.ahead(tmp_path / "b").start()
    assert second.server is started_ahead and second.pids[0] != first.pids[0]
    assert second.database != first.database and _executions(second.database) == 0
    old = first.pids[-1]
    first.restart()  # a server crash: the same database file
    assert not alive(old) and first.pids[-1] != old and _executions(first.database) == 1
    first.kill()
    assert not alive(first.pids[-1]) and _executions(tmp_path / "a" / "temporal.db") == 1
    with temporal_ahead._lock:
        left = [f.result() for f in temporal_ahead._pool]
    (tmp_path / "b").mkdir()
    second.kill()
    assert temporal_ahead.close_ahead() == len(left) == 1
    assert not any(alive(p) for s in left for p in s.pids) and not left[0].run_dir.exists()


def test_a_lean_server_commits_without_fsync_and_collects_garbage_less_often(tmp_path: Path) -> None:
    """LEAN_PRAGMAS and LEAN_ENV reach the server process itself (its command line and environment, read from /proc
    once it listens); a server that is not lean gets neither. A pragma the server refuses makes it exit at start, so
    the lean server listening is the check that the server takes it."""
    _binary_or_skip()
    from crashpoint.harness.engines.temporal import LEAN_ENV, LEAN_PRAGMAS, RunServer

    for lean in (True, False):
        folder = tmp_path / str(lean)
        folder.mkdir()
        with RunServer(folder, lean=lean) as server:
            pid = server.pids[-1]
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            env = dict(x.split(b"=", 1) for x in Path(f"/proc/{pid}/environ").read_bytes().split(b"\0") if b"=" in x)
            assert argv[1:4] == [b"server", b"start-dev", b"--headless"], argv  # the temporal binary, exec'd
            for pragma in LEAN_PRAGMAS:
                assert (pragma.encode() in argv) is lean, argv
            for key, value in LEAN_ENV.items():
                assert (env.get(key.encode()) == value.encode()) is lean, env.get(key.encode())
