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
import sys
from pathlib import Path
from typing import Any

from crashpoint.errors import UsageError


def is_target_file(path: Path) -> bool:
    """``True`` when ``path`` is a YAML file whose top level names a ``target``, an ``engine`` and an ``entry``."""
    if not path.is_file() or path.suffix not in (".yaml", ".yml", ".json"):
        return False
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8", errors="replace")[:1_000_000])
    except Exception:  # noqa: BLE001 - YAMLError, or ValueError & co. from SafeLoader (!!float nope): not a target;
        return False      # the pack loader then refuses the file with its line and field
    return isinstance(data, dict) and {"target", "engine", "entry"} <= set(data)


_IMPORT_CHECK = """
import json, sys
from crashpoint.harness.engines.workerlib import load_object
sys.path[:0] = json.loads(sys.argv[1])
for field, spec in json.loads(sys.argv[2]):
    try:
        load_object(spec)
    except BaseException as exc:
        print(json.dumps([field, spec, f"{type(exc).__name__}: {exc}"]))
        break
"""


def named_objects(target: Any) -> list[tuple[str, list[str | int], str]]:
    """``(field, its path in the file, "module:attr")`` for each object the target file names: the entry, the
    invariants, the effects, the objects its engine's options name (:meth:`~crashpoint.harness.engines.base.Engine.
    named_objects`)."""
    from crashpoint.harness.engines.base import engine_for

    names: list[tuple[str, list[str | int], str]] = [("entry", ["entry"], target.entry)]
    names += [(f"invariants[{i}]", ["invariants", i], s) for i, s in enumerate(target.invariants)]
    names += [(f"effects[{i}]", ["effects", i], e["path"]) for i, e in enumerate(target.effects)]
    names += engine_for(target.engine).named_objects(target)
    return [n for n in names if ":" in n[2]]


def check_names(target: Any, path: Path, timeout_s: float = 120.0) -> None:
    """Import, in a child interpreter (the team's import-time code stays out of this process), every object the
    target file names, with its ``pythonpath``.

    Raises:
        CaseError: the first that names nothing, with the file, its line and field, and Python's error.
    """
    import subprocess

    from crashpoint.errors import CaseError
    from crashpoint.harness.load.loader import _load_mapping

    names = named_objects(target)
    try:
        out = subprocess.run([sys.executable, "-c", _IMPORT_CHECK, json.dumps(target.pythonpath),
                              json.dumps([[f, s] for f, _, s in names])],
                             capture_output=True, text=True, timeout=timeout_s, cwd=Path(path).resolve().parent)
    except subprocess.TimeoutExpired:
        raise CaseError(f"importing the target's code took over {timeout_s:.0f} s", file=str(path)) from None
    if not out.stdout.strip():
        return
    field, spec, error = json.loads(out.stdout.strip().splitlines()[-1])
    _, locator = _load_mapping(Path(path), "target")
    steps = next(p for f, p, _ in names if f == field)
    raise CaseError(f"{spec!r} names nothing importable (pythonpath {target.pythonpath}): {error}"[:800],
                    file=str(path), line=locator.line(steps), field=field)


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


def run_target_command(args: argparse.Namespace, path: Path) -> int:
    """Sweep the target at ``path``; print a summary and the failures; exit 0 (all passed) or 1."""
    from crashpoint.harness.run.executors import make_executor
    from crashpoint.harness.run.target_sweep import default_workers, sweep
    from crashpoint.harness.load.target import Target

    target = Target.from_file(path)
    if args.repeat < 1 or args.write_latency_ms < 0:
        raise UsageError("--repeat must be >= 1 and --write-latency-ms >= 0")
    if args.crash_mode not in ("kill", "kill-cold"):
        raise UsageError("a target runs with real kills only: --crash-mode kill or kill-cold")
    executor, close = make_executor(args.executor or "threads", args.workers or default_workers(target))
    try:
        result = sweep(target, cases=args.case, durability=args.durability, crash=args.crash,
                       crash_points=args.crash_point, repeat=args.repeat, executor=executor,
                       warm=args.crash_mode == "kill", write_latency_ms=args.write_latency_ms,
                       workdir=args.workdir)
    finally:
        close()
    counts = result.counts()
    points = sum(len(p) for p in result.crash_points.values())
    kinds = result.runs_by_kind()
    print(f"target {target.name} on {result.engine_version}: {len(result.results)} runs, {points} crash points "
          f"over {len(result.crash_points)} case/mode pair(s), {result.wall_s:.1f} s")
    print(f"  --crash {result.crash}: {kinds['golden']} golden run(s), {kinds['single']} single kill(s), "
          f"{kinds['double']} kill(s) during a recovery")
    print("  " + ", ".join(f"{v} {n}" for v, n in counts.items()))
    for rule, n in sorted(result.findings().items()):
        print(f"  {rule}: {n} run(s)")
    shown = 0
    for r in result.results:
        if r.verdict == "passed" or (args.quiet and shown >= 10):
            continue
        shown += 1
        print(f"\n{r.verdict.upper()} {r.case} [{r.durability}] at {r.crash_point or 'golden run'}"
              f"{f' (repeat {r.repeat})' if r.repeat > 1 else ''}")
        for f in r.failures:
            print(f"  {f.rule}: {f.message}")
            for e in f.evidence[:3]:
                print(f"      {e}")
        if r.error:
            print(f"  {'unknown' if r.verdict == 'unknown' else 'error'}: {r.error}")
        print(f"  repro: {r.reproduce}")
    if args.json:
        from crashpoint.harness.judge.document import sweep_data

        tmp = Path(args.json).with_name(Path(args.json).name + ".tmp")
        tmp.write_text(json.dumps(sweep_data(result), indent=1, default=str))
        os.replace(tmp, args.json)
    sys.stdout.flush()
    return 0 if result.passed else 1
