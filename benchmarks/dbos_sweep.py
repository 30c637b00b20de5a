"""Benchmark: the crash sweep of examples/dbos_refund, crashpoint's way vs the naive way, side by side.

Usage::

    python benchmarks/dbos_sweep.py [--case NAME ...] [--points N] [--workers 2]

Runs the same sweep (a golden run, then a real SIGKILL at each crash point it passed, recovered by new worker
processes) twice: crashpoint's way (workers forked from a warm zygote that imported dbos and the app, DBOS's
notification listener and internal queue polling every 10 ms) and the naive way (a new interpreter per worker
process, DBOS's default 1 s polls: ``dbos.poll_s: 1.0``). The two ways are interleaved case by case (each case
swept one way, then the other, the order alternating from case to case), so both see the machine's load as it
drifts. Each way keeps one pool of ``--workers`` threads for all its cases (crashpoint's way: their warm zygotes
are started before its first case and counted in its time), as one sweep of every case would. ``--points N`` sweeps the first N
crash points of each case's golden run only (the same ones both ways; default: all). Prints, per case and way,
runs, crash points, worker processes, wall seconds and verdicts, each run that did not pass (its crash point,
verdict, rules or error), the case's ratio, then the totals and the total ratio. Target (issue 13): crashpoint's way <= 1/4 of the naive way.
"""

from __future__ import annotations

import argparse
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crashpoint.harness.run.target_driver import prewarm
from crashpoint.harness.run.target_sweep import sweep
from crashpoint.harness.load.target import Target

TARGET = Path(__file__).resolve().parents[1] / "examples/dbos_refund/target.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append", help="only these cases (default: all)")
    parser.add_argument("--points", type=int, default=0, help="only the first N crash points per case (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    fast = Target.from_file(TARGET)
    naive = Target.from_data(fast.to_data() | {"dbos": {**fast.options, "poll_s": 1.0}}, file=fast.file)
    ways = {"crashpoint": (fast, True), "naive": (naive, False)}
    pools = {label: ThreadPoolExecutor(max_workers=args.workers, thread_name_prefix=label) for label in ways}
    totals = {label: {"runs": 0, "points": 0, "workers": 0, "wall": 0.0} for label in ways}
    bad = 0
    began = time.perf_counter()  # the zygotes of crashpoint's pool threads, as one sweep starts them
    for warming in [pools["crashpoint"].submit(prewarm, fast) for _ in range(args.workers)]:
        warming.result()
    totals["crashpoint"]["wall"] += time.perf_counter() - began
    for index, case in enumerate(args.case or [c.name for c in fast.cases]):
        points = None
        if args.points:
            probe = sweep(fast, cases=[case], crash="none", workers=args.workers)
            points = [p for pts in probe.crash_points.values() for p in pts[:args.points]]
        order = list(ways) if index % 2 == 0 else list(reversed(ways))
        wall = {}
        for label in order:
            target, warm = ways[label]
            began = time.perf_counter()
            result = sweep(target, cases=[case], crash_points=points, executor=pools[label], warm=warm)
            wall[label] = time.perf_counter() - began
            swept = len(points) if points is not None else sum(len(p) for p in result.crash_points.values())
            workers = sum(r.workers for r in result.results)
            counts = {k: v for k, v in result.counts().items() if v}
            bad += len(result.results) - counts.get("passed", 0)
            for key, value in (("runs", len(result.results)), ("points", swept), ("workers", workers),
                               ("wall", wall[label])):
                totals[label][key] += value
            print(f"{case:22s} {label:10s} {len(result.results):4d} runs, {swept:4d} crash points, "
                  f"{workers:5d} worker processes, {wall[label]:7.1f} s  {counts}", flush=True)
            for r in result.results:
                if r.verdict != "passed":
                    print(f"    {r.verdict}: {r.crash_point or 'golden'}: "
                          f"{sorted({f.rule for f in r.failures}) or r.error}", flush=True)
        print(f"{case:22s} ratio crashpoint / naive: {wall['crashpoint'] / wall['naive']:.3f}", flush=True)
    for pool in pools.values():
        pool.shutdown()  # each thread's zygote dies with its thread (PR_SET_PDEATHSIG)
    for label, t in totals.items():
        print(f"{'total':22s} {label:10s} {t['runs']:4d} runs, {t['points']:4d} crash points, "
              f"{t['workers']:5d} worker processes, {t['wall']:7.1f} s")
    print(f"ratio crashpoint / naive: {totals['crashpoint']['wall'] / totals['naive']['wall']:.3f} (target <= 0.25)"
          + (f"; {bad} run(s) did not pass" if bad else ""))


if __name__ == "__main__":
    main()
