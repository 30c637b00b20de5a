"""``crashpoint run TARGET.yaml``: sweep a team's own workflow code (a target) instead of a pack.

A file is a target when its top level has ``target``, ``engine`` and ``entry``. The options that make
sense for a target are those of ``crashpoint run`` (``--crash``, ``--crash-point``, ``--json``,
``--workers``, ``--executor``, ``--workdir``, ``--crash-mode kill|kill-cold``, ``-q``) plus
``--case``, ``--durability``, ``--repeat`` and ``--write-latency-ms``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from crashpoint.errors import UsageError


#: A top-level key of a YAML target file, at the start of a line (what :func:`is_target_file` looks for in a file it
#: cannot parse); in JSON, a quoted key.
_TOP_KEY = re.compile(r'^(target|engine|entry)\s*:|"(target|engine|entry)"\s*:', re.MULTILINE)


def is_target_file(path: Path) -> bool:
    """``True`` when ``path`` is a YAML (or JSON) file whose top level names a ``target``, an ``engine`` and an
    ``entry``; also when it cannot be parsed (a YAML error, over 1 MB, nesting too deep for the parser) but its text
    has those three keys, so that :meth:`~crashpoint.harness.load.target.Target.from_file` refuses it with its line
    (not the pack loader, with "no pack.yaml in this folder")."""
    if not path.is_file() or path.suffix not in (".yaml", ".yml", ".json"):
        return False
    import yaml

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TARGET_BYTES + 1)
    except OSError:
        return False
    if len(raw) <= MAX_TARGET_BYTES:
        try:
            data = yaml.safe_load(raw.decode("utf-8", errors="replace"))
        except Exception:  # noqa: BLE001 - YAMLError, RecursionError (deep nesting), ValueError (!!float nope) & co.
            data = None
        else:
            return isinstance(data, dict) and {"target", "engine", "entry"} <= set(data)
    found: set[str] = set()
    try:
        with open(path, "rb") as fh:  # the whole file, line by line: a large one may name its keys anywhere
            for line in fh:
                found |= {m.group(1) or m.group(2) for m in _TOP_KEY.finditer(line.decode("utf-8", errors="replace"))}
                if {"target", "engine", "entry"} <= found:
                    return True
    except OSError:
        return False
    return False


#: Bytes of a file :func:`is_target_file` reads (the loader's own limit, ``MAX_FILE_BYTES``, refuses larger ones).
MAX_TARGET_BYTES = 1 << 20


def check_names(target: Any, path: Path, timeout_s: float = 120.0) -> None:
    """Check the target file at ``path`` against the team's code, in a child interpreter (the team's import-time
    code stays out of this process): every object it names imports with its ``pythonpath``, and nothing it says
    cannot be meant (:func:`crashpoint.harness.load.target_check.check_target`: gates on effects no effect has,
    human nodes the graph lacks, two invariants of one name, a version that is the entry itself).

    Raises:
        CaseError: the first problem, with the file, its line and field.
    """
    from crashpoint.harness.load.target_check import check_target

    check_target(target, path, timeout_s)


def add_target_options(run: argparse.ArgumentParser) -> None:
    """The options of ``crashpoint run`` that only targets read."""
    group = run.add_argument_group("targets (a TARGET.yaml of the team's own code)")
    group.add_argument("--case", action="append", metavar="NAME", help="only this case of the target (repeatable)")
    group.add_argument("--durability", action="append", choices=("sync", "async", "exit"),
                       help="only this durability mode (repeatable; default: the target's)")
    group.add_argument("--repeat", type=int, default=1, metavar="N",
                       help="runs per crash point (a racy point's outcome can depend on thread timing)")
    group.add_argument("--write-latency-ms", type=float, default=0.0, metavar="MS",
                       help="delay added to each checkpoint write of the engine (widens in-flight windows)")


def target_subject(args: argparse.Namespace, path: Path) -> Any:
    """The :class:`~crashpoint.harness.run.target_sweep.TargetSubject` that ``crashpoint run TARGET.yaml`` sweeps,
    from the command's options (``--case``, ``--durability``, ``--repeat``, ``--write-latency-ms``, ``--crash-mode``),
    after the target file is validated and the objects it names are imported in a child interpreter.

    Raises:
        CaseError: the file is not a valid target (file, line, field). UsageError: an option a target does not
            take (``--engine``, ``--adapter``: a target names its engine; ``--crash-mode inprocess``), a bad value, an
            unknown case or durability mode.
    """
    from crashpoint.harness.load.target import Target
    from crashpoint.harness.run.target_sweep import subject_of

    for option in ("engine", "adapter"):
        if getattr(args, option, None):
            raise UsageError(f"--{option} is for packs: a target file names its engine (engine: ...)")
    if args.repeat < 1 or args.write_latency_ms < 0:
        raise UsageError("--repeat must be >= 1 and --write-latency-ms >= 0")
    if args.crash_mode not in ("kill", "kill-cold"):
        raise UsageError("a target runs with real kills only: --crash-mode kill or kill-cold")
    target = Target.from_file(path)
    check_names(target, path)  # before a sweep: what validate refuses is never swept
    return subject_of(target, cases=args.case, durability=args.durability, warm=args.crash_mode == "kill",
                      write_latency_ms=args.write_latency_ms)
