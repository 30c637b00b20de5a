"""The worker process: open an engine database and resume every non-terminal workflow.

Usage::

    python -m crashpoint.engine.worker --db engine.db --world MODULE:FACTORY --world-arg ARG
                                       [--probe MODULE:FACTORY --probe-arg ARG] [--worker-id NAME]
                                       [--engine MODULE:CLASS]

``--world`` names a factory ``f(arg: str, probe) -> (ToolPort, Clock)`` that builds the
outside world (real tools in production, ``crashpoint.fakes`` under test); ``--probe``
names a factory ``g(arg: str) -> Probe`` for crash points. Both are import paths, so the
engine imports neither the fakes nor the harness. The worker reads nothing but the
database and what the factories open.

Exit codes: 0 when every workflow is terminal or waiting for a human, 1 on an engine
error (the traceback goes to stderr).
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from typing import Any, Callable, Sequence

from crashpoint.protocols import no_probe


def load_object(spec: str) -> Callable[..., Any]:
    """Import ``"package.module:attribute"`` and return the attribute.

    Raises:
        ValueError: ``spec`` has no ``:``. ImportError / AttributeError: it names nothing.
    """
    module, sep, attr = spec.partition(":")
    if not sep or not attr:
        raise ValueError(f"expected MODULE:ATTRIBUTE, got {spec!r}")
    return getattr(importlib.import_module(module), attr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one worker pass; see the module docstring."""
    args = PARSER.parse_args(argv)
    probe = load_object(args.probe)(args.probe_arg) if args.probe else no_probe
    tools, clock = load_object(args.world)(args.world_arg, probe)
    engine_cls = load_object(args.engine)
    engine = engine_cls(args.db, tools, clock, probe=probe, worker_id=args.worker_id)
    try:
        statuses = engine.run_until_quiescent()
    finally:
        engine.close()
    print(json.dumps(statuses, sort_keys=True))
    return 0


def _parser() -> argparse.ArgumentParser:
    """The command line (built at import: a worker forked from a warm parent inherits it)."""
    parser = argparse.ArgumentParser(prog="crashpoint-worker", description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="engine SQLite file")
    parser.add_argument("--world", required=True, help="MODULE:FACTORY returning (tools, clock)")
    parser.add_argument("--world-arg", default="", help="argument passed to the world factory")
    parser.add_argument("--probe", default=None, help="MODULE:FACTORY returning a crash probe")
    parser.add_argument("--probe-arg", default="", help="argument passed to the probe factory")
    parser.add_argument("--worker-id", default="worker")
    parser.add_argument("--engine", default="crashpoint.engine.engine:Engine",
                        help="MODULE:CLASS of the engine (a subclass of Engine)")
    return parser


PARSER = _parser()

if __name__ == "__main__":
    sys.exit(main())
