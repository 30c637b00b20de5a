"""``crashpoint search``: generated fault schedules, shrunk failures, and their one-line repro.

    crashpoint search PATH [--seed N|last] [--schedules N] [--max-faults N] [--kinds K,K]
                           [--engine MODULE:CLASS | --adapter MODULE:CLASS] [--workers N] [--executor SPEC] [--out DIR] [--json FILE]
                           [--worker-timeout S] [--workdir DIR]
    crashpoint search TARGET.yaml [--case NAME ...] [--durability MODE ...] [--seed N|last] [--schedules N]
                           [--max-faults N] [--kinds K,K] [--workers N] [--out DIR] [--json FILE] [--workdir DIR]

For each case of PATH, hypothesis generates up to ``--schedules`` fault schedules (see
:mod:`crashpoint.harness.run.schedule_search`), runs each with real worker processes, and shrinks the
first failing one. Each shrunk failure is written under ``--out`` as a pack folder holding
one case that reproduces it on its own, and the command prints the line that runs it. The
seed is printed in the summary and kept in ``.crashpoint/last-seed``, so ``--seed last``
draws the same schedules again.

A target file (the team's own code on its engine) is searched the same way, unit by unit (each case in each
durability mode): its golden run tells what exists (crash points, effect calls, requests, the engine's
capabilities), schedules draw the kinds a target's case holds (kill, tool, duplicate, workers, deploy,
server_crash: those its engine can inject), and a shrunk failure is written as a target file of one case, run by
``crashpoint run FILE --crash none``.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import tempfile
import time
from pathlib import Path

from crashpoint.errors import UsageError

#: Folder (relative to the working directory) for the last seed and, by default, repro packs.
STATE_DIR = Path(".crashpoint")


def add_search_parser(sub: argparse._SubParsersAction) -> None:
    """Register the ``search`` subcommand on ``sub``."""
    from crashpoint.harness.faults import kinds as fault_kinds  # listed() imports no kind: --version stays fast

    p = sub.add_parser("search", help="generated fault schedules per case (hypothesis), shrunk to a repro case")
    p.add_argument("path", help="pack folder, case file, built-in pack name (refunds), or a target file (TARGET.yaml)")
    p.add_argument("--seed", default=None, metavar="N|last",
                   help="search seed (default: a new random one); 'last' reuses the previous search's")
    p.add_argument("--schedules", type=int, default=50, metavar="N", help="schedules generated per case (default 50)")
    p.add_argument("--max-faults", type=int, default=4, metavar="N", help="faults per schedule, at most (default 4)")
    p.add_argument("--kinds", default=None, metavar="K,K",
                   help=f"only these fault kinds: {', '.join(fault_kinds.listed())} (default: all)")
    p.add_argument("--engine", metavar="MODULE:CLASS", help="engine class for the reference adapter")
    p.add_argument("--adapter", metavar="MODULE:CLASS",
                   help="an EngineAdapter class or factory (any engine), e.g. "
                        "crashpoint.harness.adapters.langgraph_adapter:LangGraphSync")
    from crashpoint.harness.cli.main import add_parallel_options

    add_parallel_options(p, "cases searched in parallel", progress=False)
    p.add_argument("--out", type=Path, default=None, metavar="DIR",
                   help="where repro packs go (default .crashpoint/repro)")
    p.add_argument("--json", metavar="FILE", help="write the search results here (JSON)")
    p.add_argument("--worker-timeout", type=float, default=60.0, metavar="S",
                   help="wall seconds a worker may take (default 60)")
    p.add_argument("--workdir", type=Path, help="keep the run folders here (must be empty or absent)")
    p.add_argument("--case", action="append", default=None, metavar="NAME",
                   help="a target file: only this case (repeatable; default: every case)")
    p.add_argument("--durability", action="append", default=None, metavar="MODE",
                   help="a target file: only this durability mode (repeatable; default: the target's)")
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    """Run the search; exit 0 when nothing failed, 1 when a failure was found, 2 on bad input."""
    from crashpoint.harness.cli.main import ExitCode, check_sweep_options, engine_under_test, resolve_path
    from crashpoint.paths import output_file, output_folder
    from crashpoint.harness.run.executors import make_executor
    from crashpoint.harness.run.schedule_search import resolve_seed, search, summary_lines, write_repro
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.cli.target_run import is_target_file

    if is_target_file(Path(args.path)):  # the team's own code, not a pack
        return _cmd_search_target(args)
    if args.case or args.durability:
        raise UsageError("--case and --durability are for a target file (a pack's cases are its case files)")
    pack, cases = load_target(resolve_path(args.path))
    adapter = engine_under_test(args.engine, args.adapter, args.worker_timeout)
    if args.schedules < 1 or args.max_faults < 1:
        raise UsageError("--schedules and --max-faults must be at least 1")
    check_sweep_options(args)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    known = pack_kinds()
    bad = [k for k in kinds or () if k not in known]
    if bad:
        raise UsageError(f"--kinds: unknown kind(s) {bad}; a pack's search draws: {', '.join(known)}")
    out_dir = args.out or STATE_DIR / "repro"
    output_folder(out_dir, "--out", files_only=True)
    if args.json is not None:
        output_file(args.json, "--json")
    seed = resolve_seed(args.seed, STATE_DIR)
    executor, close_executor = make_executor(args.executor, args.workers)  # exit 2 here if Dask is unreachable
    root = args.workdir or Path(tempfile.mkdtemp(prefix="crashpoint-search-"))
    print(f"crashpoint: searching pack {pack.name} {pack.version} ({len(cases)} case(s)) on engine {adapter.name} "
          f"{adapter.version()}: seed {seed}, {args.schedules} schedule(s) per case, up to {args.max_faults} "
          f"fault(s) each", flush=True)
    began = time.perf_counter()
    try:
        results = search(pack, cases, adapter, seed=seed, budget=args.schedules, workdir=root,
                         max_faults=args.max_faults, kinds=kinds, worker_timeout_s=args.worker_timeout,
                         executor=executor, keep=bool(args.workdir),
                         on_result=lambda r: print("\n".join(summary_lines(r)), flush=True))
    finally:
        close_executor()
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    found = [r for r in results if r.found is not None]
    broken = [r for r in results if r.golden_error]
    for r in found:
        path = write_repro(r, pack, out_dir)
        print(f"{r.case_id}: repro written to {path}")
        print(f"    reproduce: {repro_line(path, args.engine, args.adapter)}")
    total = sum(r.runs for r in results)
    generated = sum(r.generated for r in results)
    print(f"seed {seed}: {generated} schedule(s) generated, {total} run(s) with shrinking, "
          f"{sum(r.vacuous for r in results)} vacuous, {len(found)} failing case(s), {len(broken)} broken golden "
          f"run(s) in {time.perf_counter() - began:.1f} s")
    rerun = ["crashpoint", "search", args.path, "--seed", str(seed), "--schedules", str(args.schedules),
             "--max-faults", str(args.max_faults), *(["--kinds", args.kinds] if args.kinds else []),
             *(["--engine", args.engine] if args.engine else []), *(["--adapter", args.adapter] if args.adapter else [])]
    print(f"rerun: {shlex.join(rerun)}")
    if args.json:
        from crashpoint.reports.json_report import write_atomic

        write_atomic(args.json, json.dumps({"format": "crashpoint.search/1", "seed": seed, "pack": pack.name,
                                            "engine": adapter.name, "schedules_per_case": args.schedules,
                                            "cases": [r.to_dict() for r in results]}, indent=2))
    return ExitCode.FAILED if found or broken else ExitCode.OK


def pack_kinds() -> list[str]:
    """The fault kinds a pack's search draws, in registry order: the kinds of pack cases whose generator draws
    something (``deploy`` is a pack kind drawn as an ``insert``, ``server_crash`` a target's only)."""
    from crashpoint.harness.faults import kinds as fault_kinds

    space = fault_kinds.Space(["point:x"], {"t": 1}, ["t"], 2)
    return [k.name for k in fault_kinds.for_subject("pack") if k.strategy(space) is not None]


def _cmd_search_target(args: argparse.Namespace) -> int:
    """``crashpoint search TARGET.yaml``: :func:`~crashpoint.harness.run.schedule_search.search_target` of the file's
    cases (``--case``) in its durability modes (``--durability``); exit 0 when nothing failed, 1 when a failure was
    found (or a golden run did not pass), 2 on bad input."""
    from crashpoint.harness.cli.main import ExitCode, check_sweep_options
    from crashpoint.harness.cli.target_run import check_names
    from crashpoint.harness.engines.base import engine_for
    from crashpoint.harness.faults import kinds as fault_kinds
    from crashpoint.harness.load.target import Target
    from crashpoint.harness.run.schedule_search import (resolve_seed, search_target, summary_lines, target_repro_line,
                                                        write_target_repro)
    from crashpoint.harness.run.target_sweep import default_workers, subject_of
    from crashpoint.paths import output_file, output_folder

    for option in ("engine", "adapter"):
        if getattr(args, option, None):
            raise UsageError(f"--{option} is for packs: a target file names its engine (engine: ...)")
    if args.executor not in (None, "threads"):
        raise UsageError("--executor: a target's search runs in threads of this process (--workers N of them)")
    if args.schedules < 1 or args.max_faults < 1:
        raise UsageError("--schedules and --max-faults must be at least 1")
    check_sweep_options(args)
    target = Target.from_file(args.path)
    subject = subject_of(target, cases=args.case, durability=args.durability)  # UsageError: an unknown case or mode
    engine = engine_for(target.engine)
    known = [k.name for k in fault_kinds.for_subject("target") if all(c in engine.capabilities() for c in k.needs)]
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    bad = [k for k in kinds or () if k not in known]
    if bad:
        raise UsageError(f"--kinds: {', '.join(bad)}: not a fault kind a {engine.title} target's case can hold; "
                         f"known: {', '.join(known)}")
    out_dir = args.out or STATE_DIR / "repro"
    output_folder(out_dir, "--out", files_only=True)
    if args.json is not None:
        output_file(args.json, "--json")
    check_names(target, Path(args.path))  # the objects it names import (in a child interpreter)
    seed = resolve_seed(args.seed, STATE_DIR)
    root = args.workdir or Path(tempfile.mkdtemp(prefix="crashpoint-search-"))
    print(f"crashpoint: searching target {target.name} ({len(subject.cases)} case(s) x {len(subject.modes)} "
          f"durability mode(s)) on engine {engine.version()}: seed {seed}, {args.schedules} schedule(s) per case, up "
          f"to {args.max_faults} fault(s) each", flush=True)
    began = time.perf_counter()
    try:
        results = search_target(target, subject.cases, subject.modes, seed=seed, budget=args.schedules,
                                workdir=root, max_faults=args.max_faults, kinds=kinds,
                                jobs=args.workers or default_workers(target), keep=bool(args.workdir),
                                on_result=lambda r: print("\n".join(summary_lines(r)), flush=True))
    except ValueError as exc:  # a kind that draws nothing on a case (no version to deploy, nothing waits)
        raise UsageError(str(exc)) from None
    finally:
        if not args.workdir:
            shutil.rmtree(root, ignore_errors=True)
    found = [r for r in results if r.found is not None]
    broken = [r for r in results if r.golden_error]
    for r in found:
        path = write_target_repro(r, target, out_dir)
        print(f"{r.case_id}: repro written to {path}")
        print(f"    reproduce: {target_repro_line(path)}")
    print(f"seed {seed}: {sum(r.generated for r in results)} schedule(s) generated, {sum(r.runs for r in results)} "
          f"run(s) with shrinking, {sum(r.vacuous for r in results)} vacuous, {len(found)} failing unit(s), "
          f"{len(broken)} golden run(s) that did not pass in {time.perf_counter() - began:.1f} s")
    rerun = ["crashpoint", "search", args.path, "--seed", str(seed), "--schedules", str(args.schedules),
             "--max-faults", str(args.max_faults), *(["--kinds", args.kinds] if args.kinds else []),
             *[w for c in args.case or () for w in ("--case", c)],
             *[w for m in args.durability or () for w in ("--durability", m)]]
    print(f"rerun: {shlex.join(rerun)}")
    if args.json:
        from crashpoint.reports.json_report import write_atomic

        write_atomic(args.json, json.dumps({"format": "crashpoint.search/1", "seed": seed, "target": target.name,
                                            "engine": target.engine, "schedules_per_case": args.schedules,
                                            "cases": [r.to_dict() for r in results]}, indent=2))
    return ExitCode.FAILED if found or broken else ExitCode.OK


def repro_line(case_path: Path, engine: str | None = None, adapter: str | None = None) -> str:
    """The one-line command that runs a repro case on its own (``--crash none``: its faults are in the
    file): :func:`crashpoint.harness.judge.verdict.repro_command` of it."""
    from crashpoint.harness.judge.verdict import Invocation, repro_command

    return repro_command(case_path, None, Invocation(engine, adapter))
