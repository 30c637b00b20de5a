"""Adapters that misbehave, for the certification tests (test code only)."""

from __future__ import annotations

import sys
from pathlib import Path

from crashpoint.harness.adapters.protocol import RunContext
from crashpoint.harness.adapters.reference import ReferenceAdapter


def no_compensation_on_cancel() -> ReferenceAdapter:
    """The reference adapter on an engine that forgets to compensate when cancelled."""
    return ReferenceAdapter(engine="variants.engines:NoCompensationOnCancel", name="no-compensation-on-cancel")


class CancelRaises(ReferenceAdapter):
    """An adapter whose ``cancel`` raises: the runs that cancel end in an ``error`` naming it. Its pinned
    known finding is shown in the certificate and changes no verdict."""

    known_findings = {"cancellation": "cancel-raises 0.1: cancel raises"}

    def __init__(self) -> None:
        super().__init__(name="cancel-raises")

    def cancel(self, run: RunContext, workflow_id: str, *, reason: str, idempotency_key: str) -> bool:
        raise RuntimeError("cancel is broken in this adapter")


class CancelUnsupported(ReferenceAdapter):
    """An adapter that cannot cancel: the claim is ``unsupported``, never ``passed``."""

    def __init__(self) -> None:
        super().__init__(name="cancel-unsupported")

    def cancel(self, run: RunContext, workflow_id: str, *, reason: str, idempotency_key: str) -> bool:
        raise NotImplementedError("this engine has no cancellation")


class HangsAndLeavesChild(ReferenceAdapter):
    """A worker that starts a daemon in its own session and never exits."""

    def __init__(self) -> None:
        super().__init__(name="hangs")

    def worker_command(self, run: RunContext, probe_spec: str, probe_arg: str) -> list[str]:
        code = ("import subprocess, time; subprocess.Popen(['sleep', '300'], start_new_session=True); "
                "time.sleep(300)")
        return [sys.executable, "-c", code]


class HangsInStatus(ReferenceAdapter):
    """An adapter whose harness-side ``status`` never returns (a client call that hangs): the run must be
    ``unknown`` after the adapter-call timeout, and Ctrl-C must stop the command."""

    def __init__(self) -> None:
        super().__init__(name="hangs-in-status")

    #: A file written in the run folder when ``status`` is entered, so a test knows the harness is
    #: inside the hanging call (not still starting, not in another phase) before it presses Ctrl-C.
    MARKER = "status.entered"

    def status(self, run: RunContext, workflow_id: str) -> dict:
        import threading

        (Path(run.run_dir) / self.MARKER).write_text(workflow_id)
        threading.Event().wait()  # forever
        return {}
def new_key_on_retry() -> ReferenceAdapter:
    """The reference adapter on an engine whose retry of a call uses a new idempotency key
    (:class:`variants.engines.NewKeyOnRetry`), for certifying it like any other adapter."""
    return ReferenceAdapter(engine="variants.engines:NewKeyOnRetry", name="new-key-on-retry")
