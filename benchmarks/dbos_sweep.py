"""Benchmark: the crash sweep of examples/dbos_refund, crashpoint's way vs the naive way, side by side.

Usage::

    python benchmarks/dbos_sweep.py [--case NAME ...] [--points N] [--workers 2]

Runs the same sweep (a golden run, then a real SIGKILL at each crash point it passed, recovered by new worker
processes) twice: crashpoint's way (workers forked from a warm zygote that imported dbos and the app, DBOS's
notification listener and internal queue polling every 10 ms) and the naive way (a new interpreter per worker
process, DBOS's default 1 s polls: ``dbos.poll_s: 1.0``). ``--points N`` sweeps the first N crash points of
each case only (the same ones both ways; default: all). Prints runs, crash points, worker processes, wall
seconds and verdicts of each, and the ratio. Target (issue 13): crashpoint's way <= 1/4 of the naive way.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from crashpoint.harness.targets.sweep import sweep
from crashpoint.harness.targets.target import Target

TARGET = Path(__file__).resolve().parents[1] / "examples/dbos_refund/target.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append", help="only these cases (default: all)")
    parser.add_argument("--points", type=int, default=0, help="only the first N crash points per case (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    fast = Target.from_file(TARGET)
    naive = Target.from_data(fast.to_data() | {"dbos": {**fast.dbos, "poll_s": 1.0}}, file=fast.file)
    points = None
    if args.points:
        probe = sweep(fast, cases=args.case, crash="none", workers=args.workers)
        points = sorted({p for pts in probe.crash_points.values() for p in pts[:args.points]})
    times = {}
    for label, target, warm in (("crashpoint", fast, True), ("naive", naive, False)):
        began = time.perf_counter()
        result = sweep(target, cases=args.case, crash_points=points, workers=args.workers, warm=warm)
        times[label] = time.perf_counter() - began
        swept = len(points) if points else sum(len(p) for p in result.crash_points.values())
        workers = sum(r.workers for r in result.results)
        print(f"{label:10s} {len(result.results):4d} runs, {swept:4d} crash points, {workers:5d} worker processes, "
              f"{times[label]:7.1f} s  {result.counts()}", flush=True)
    print(f"ratio crashpoint / naive: {times['crashpoint'] / times['naive']:.3f} (target <= 0.25)")


if __name__ == "__main__":
    main()
