"""Target engines whose integration with crashpoint is broken, for the engine conformance kit's own tests (test code
only): each is LangGraph's engine with one thing wrong, and the kit must say which.

* :class:`Amnesic`: its worker (this module's :func:`main`) deletes the run's checkpoints before every recovery, so
  a recovering worker starts every thread over instead of resuming it (the kit's ``resumes`` check); it declares
  ``sync`` only while its worker runs ``async`` and ``exit`` too (``durability``); it declares a server without
  saying how to get one (``declarations``).

Worker processes import this module as ``variants.target_engines`` (``tests/`` is on ``PYTHONPATH``,
``tests/conftest.py``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import ClassVar

from crashpoint.harness.engines.langgraph import LangGraph


class Amnesic(LangGraph):
    """LangGraph with a worker that forgets its checkpoints on recovery, under-declared durability modes and a server
    flag without :meth:`~crashpoint.harness.engines.base.Engine.server_for`."""

    worker_module: ClassVar[str] = "variants.target_engines"
    durability_modes: ClassVar[tuple[str, ...]] = ("sync",)
    server: ClassVar[bool] = True  # declared; server_for is not answered (the base's: no server)


def main(argv: list[str] | None = None) -> int:
    """LangGraph's worker, after deleting ``langgraph.db`` (and its journal) when the phase is ``recover``."""
    from crashpoint.harness.engines import langgraph_worker

    args = list(sys.argv[1:] if argv is None else argv)
    if args[args.index("--phase") + 1] == "recover":
        run_dir = Path(args[args.index("--run-dir") + 1])
        for name in (langgraph_worker.LANGGRAPH_FILE, f"{langgraph_worker.LANGGRAPH_FILE}-wal",
                     f"{langgraph_worker.LANGGRAPH_FILE}-shm", f"{langgraph_worker.LANGGRAPH_FILE}-journal"):
            (run_dir / name).unlink(missing_ok=True)
    return langgraph_worker.main(args)


if __name__ == "__main__":
    sys.exit(main())
