"""``crashpoint search``: generated fault schedules, shrunk failures, and their one-line repro.

    crashpoint search PATH [--seed N|last] [--schedules N] [--max-faults N] [--kinds K,K]
                           [--engine MODULE:CLASS | --adapter MODULE:CLASS] [--workers N] [--executor SPEC] [--out DIR] [--json FILE]
                           [--worker-timeout S] [--workdir DIR]

For each case of PATH, hypothesis generates up to ``--schedules`` fault schedules (see
:mod:`crashpoint.harness.run.schedule_search`), runs each with real worker processes, and shrinks the
first failing one. Each shrunk failure is written under ``--out`` as a pack folder holding
one case that reproduces it on its own, and the command prints the line that runs it. The
seed is printed in the summary and kept in ``.crashpoint/last-seed``, so ``--seed last``
draws the same schedules again.
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
    p.add_argument("path", help="pack folder, case file, or built-in pack name (refunds)")
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
    p.set_defaults(func=cmd_search)


def cmd_search(args: argparse.Namespace) -> int:
    """Run the search; exit 0 when nothing failed, 1 when a failure was found, 2 on bad input."""
    from crashpoint.harness.cli.main import ExitCode, check_sweep_options, engine_under_test, resolve_path
    from crashpoint.paths import output_file, output_folder
    from crashpoint.harness.run.executors import make_executor
    from crashpoint.harness.run.schedule_search import resolve_seed, search, summary_lines, write_repro
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.load.schedule import KINDS

    pack, cases = load_target(resolve_path(args.path))
    adapter = engine_under_test(args.engine, args.adapter, args.worker_timeout)
    if args.schedules < 1 or args.max_faults < 1:
        raise UsageError("--schedules and --max-faults must be at least 1")
    check_sweep_options(args)
    kinds = [k.strip() for k in args.kinds.split(",")] if args.kinds else None
    bad = [k for k in kinds or () if k not in KINDS]
    if bad:
        raise UsageError(f"--kinds: unknown kind(s) {bad}; known: {', '.join(KINDS)}")
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


def repro_line(case_path: Path, engine: str | None = None, adapter: str | None = None) -> str:
    """The one-line command that runs a repro case on its own (``--crash none``: its faults are in the
    file): :func:`crashpoint.harness.judge.verdict.repro_command` of it."""
    from crashpoint.harness.judge.verdict import Invocation, repro_command

    return repro_command(case_path, None, Invocation(engine, adapter))
