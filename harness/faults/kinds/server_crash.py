"""``server_crash``: the engine's server is SIGKILLed while workflows wait, and a new one starts on its database.

On a target only, ``{kind: server_crash}`` (the target file's older ``server_crash: true``): once the run first comes
to rest with a workflow still running (waiting for a human), the engine's server (a Temporal server: the process
that keeps the workflows' history while workers come and go) is SIGKILLed and a new server started on the same
database; the workers then carry on against it. It needs an engine with a server
(:attr:`~crashpoint.harness.engines.base.Engine.server`). A correct engine masks it: the history was durable.
"""

from __future__ import annotations

from typing import Any

from crashpoint.harness.faults.kinds import Fault, FaultKind, Injection, Space, register


@register
class ServerCrash(FaultKind):
    """See the module docstring."""

    name = "server_crash"
    order = 90
    summary = ("once workflows wait, SIGKILL the engine's server and start a new one on the same database (old "
               "spelling `server_crash: true`); needs an engine with a server")
    masked = True
    injected = True
    columns = ("server_crash",)
    subjects = ("target",)
    needs = ("server",)

    def strategy(self, space: Space) -> Any:
        from hypothesis import strategies as st

        if space.subject != "target" or not space.waits:
            return None  # it happens while a workflow waits: a golden run that never waited would not crash it
        return st.just({"kind": "server_crash"})

    def describe(self, fault: Fault) -> str:
        return "crash the engine's server once workflows wait"

    def inject(self, fault: Fault, into: Injection) -> None:
        into.server_crash = True

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        return [("server_crash", None)]
