"""DBOS worker: run the pack's workflows as one DBOS workflow each, embedded, on a SQLite system database.

``python -m crashpoint.harness.adapters.dbos_adapter_worker --run-dir DIR --world SPEC --probe SPEC --probe-arg ARG``

The DBOS workflow function drives the interpreter: each
:class:`~crashpoint.harness.adapters.interpreter.Step` is a ``@DBOS.step`` (its output recorded
by DBOS), each :class:`~crashpoint.harness.adapters.interpreter.Commit` another step that traces
the commit (DBOS recorded the answer before the workflow code moves on, so the commit is durable),
each :class:`~crashpoint.harness.adapters.interpreter.Receive` a ``DBOS.recv`` on topic ``inbox``.
On a restart ``DBOS.launch()`` recovers PENDING workflows (``application_version`` is pinned, so
recovery does not depend on a hash of the source), and ``start_workflow`` under the same workflow id
attaches to the existing run instead of starting a second. External messages go in with
``DBOS.send(..., idempotency_key=...)``. Crash points of this adapter: ``step_started:NAME`` and
``before_checkpoint:NAME`` / ``after_checkpoint:NAME`` inside the commit step.

Exit 0 once every workflow has finished or waits for a message that has not arrived.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from dbos import DBOS, SetWorkflowID

from crashpoint.harness.adapters.interpreter import Commit, Receive, Step, interpret
from crashpoint.harness.adapters.runtime import AdapterStore, StepRunner, open_pass, quiet, unsent
from crashpoint.harness.engines.dbos_warm import without_admin_server

DBOS_FILE = "dbos.sqlite"
#: Pinned so that recovery survives edits of this file (DBOS otherwise hashes the workflow source).
APPLICATION_VERSION = "crashpoint-interpreter-1"
TOPIC = "inbox"
#: Seconds one worker may poll for its workflows to settle before it reports them stuck.
SETTLE_S = 45.0
_RUNNER: StepRunner | None = None


@DBOS.step()
def run_step(wid: str, step: dict[str, Any]) -> dict[str, Any]:
    """One interpreter step (tool call), recorded by DBOS."""
    assert _RUNNER is not None
    return _RUNNER.step(wid, step)


@DBOS.step()
def commit_step(wid: str, n: int, name: str, events: list[dict[str, Any]]) -> None:
    """Trace commit ``n`` (the previous step's output is already recorded by DBOS)."""
    assert _RUNNER is not None
    _RUNNER.commit(wid, n, name, events)


@DBOS.workflow()
def interpreted_workflow(wid: str, definition: dict[str, Any], input: dict[str, Any],
                         initial_step: str | None) -> dict[str, Any]:
    """The interpreter of :mod:`crashpoint.harness.adapters.interpreter` as a DBOS workflow."""
    program = interpret(wid, definition, input, initial_step)
    request = next(program)
    commits = 0
    while True:
        if isinstance(request, Commit):
            commits += 1
            try:
                following = program.send(None)  # ask for the next request first: it may extend this commit
            except StopIteration as stop:
                commit_step(wid, commits, request.name, request.events)
                return stop.value
            commit_step(wid, commits, request.name, request.events)
            request = following
            continue
        if isinstance(request, Step):
            answer = run_step(wid, {"name": request.name, "events": request.events, "call": request.call,
                                    "probe": request.probe})
        elif isinstance(request, Receive):
            answer = None
            while answer is None:
                answer = DBOS.recv(TOPIC, timeout_seconds=3600)
        else:
            raise RuntimeError(f"unknown interpreter request {request!r}")
        request = program.send(answer)


def settle(store: AdapterStore, clock: Any, wids: list[str]) -> None:
    """Deliver each workflow's messages and wait until each is finished or waits with nothing to consume.

    Raises:
        RuntimeError: a workflow ended in a DBOS error, or none settled within :data:`SETTLE_S`.
    """
    sent: set[str] = set()
    deadline = time.monotonic() + SETTLE_S
    pending: list[str] = []
    while time.monotonic() < deadline:
        pending = []
        for wid in wids:
            status = DBOS.get_workflow_status(wid)
            if status is not None and status.status in ("ERROR", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"):
                raise RuntimeError(f"workflow {wid} ended in DBOS status {status.status}: {status.error}")
            if status is not None and status.status in ("SUCCESS", "CANCELLED"):
                continue
            for message in unsent(store, wid, sent):
                DBOS.send(wid, message, topic=TOPIC, idempotency_key=f"{wid}:{message['key']}")
                sent.add(message["key"])
            if not quiet(store, wid, sent, clock.now()) or _RUNNER is None or _RUNNER.inflight:  # quiet first
                pending.append(wid)
        if not pending:
            return
        time.sleep(0.05)
    raise RuntimeError(f"workflows did not settle within {SETTLE_S} s: {pending}")


def main(argv: list[str] | None = None) -> int:
    """One worker pass (see the module docstring)."""
    global _RUNNER
    args, _probe, clock, store, _RUNNER = open_pass(argv)
    DBOS(config=without_admin_server({"name": "crashpoint",
                                      "system_database_url": f"sqlite:///{Path(args.run_dir) / DBOS_FILE}",
                                      "application_version": APPLICATION_VERSION, "log_level": "WARNING",
                                      "notification_listener_polling_interval_sec": 0.05}))
    DBOS.launch()
    starts = store.messages(kind="start")
    for start in starts:
        _RUNNER.resumed(start["wid"], f"dbos-{os.getpid()}")
        with SetWorkflowID(start["wid"]):
            DBOS.start_workflow(interpreted_workflow, start["wid"], start["definition"], start["input"],
                                start.get("initial_step"))
    try:
        settle(store, clock, [s["wid"] for s in starts])
    except Exception:
        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.stdout.flush()
    os._exit(0)  # workflows blocked in recv stay PENDING in the system database; nothing to tear down


if __name__ == "__main__":
    sys.exit(main())
