"""Benchmark: the crash sweep of examples/temporal_refund, one server per run vs a server per worker vs naive.

Usage::

    python benchmarks/temporal_sweep.py [--case approved] [--points N] [--workers 2]

Runs the example target's sweep (a golden run, then a real SIGKILL at each crash point and new worker processes
recovering) three ways:

* ``server per run``: one dev server per run that lives across the kills, workers forked from a warm zygote
  (``crashpoint run``'s default for a Temporal target);
* ``server per worker``: the same workers, a new dev server on the run's database before every worker (what
  crashpoint's Temporal adapter does: every worker starts its own server, every kill kills it too);
* ``naive``: a server per worker and a new interpreter per worker (``--crash-mode kill-cold``).

``--points N`` sweeps N crash points spread evenly over the golden run's (default: all). Prints runs, crash
points, worker processes, verdicts and wall seconds of each, and the ratios. Target (issue 14): server per run
<= 1/3 of server per worker.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from crashpoint.harness.targets.driver import run_target
from crashpoint.harness.targets.sweep import sweep
from crashpoint.harness.targets.target import Target

TARGET = Path(__file__).resolve().parents[1] / "examples/temporal_refund/target.yaml"
WAYS = (("server per run", True, False), ("server per worker", True, True), ("naive", False, True))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", default="approved")
    parser.add_argument("--points", type=int, default=0, help="crash points spread over the golden run's (0: all)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    target = Target.from_file(TARGET)
    chosen = None
    if args.points:
        import tempfile

        golden = run_target(target, target.case(args.case), "sync", Path(tempfile.mkdtemp(prefix="temporal-bench-")))
        every = golden.crash_points
        chosen = [every[round(i * (len(every) - 1) / max(1, args.points - 1))] for i in range(args.points)]
    times = {}
    for label, warm, per_worker in WAYS:
        began = time.perf_counter()
        result = sweep(target, cases=[args.case], workers=args.workers, warm=warm, crash_points=chosen,
                       server_per_worker=per_worker)
        times[label] = time.perf_counter() - began
        points = len(chosen) if chosen else sum(len(p) for p in result.crash_points.values())
        workers = sum(r.workers for r in result.results)
        print(f"{label:18s} {len(result.results):4d} runs, {points:4d} crash points, {workers:5d} worker processes, "
              f"{times[label]:7.1f} s  {result.counts()}", flush=True)
    base = times["server per run"]
    print(f"ratio server per run / server per worker: {base / times['server per worker']:.3f} (target <= 0.333); "
          f"/ naive: {base / times['naive']:.3f}")


if __name__ == "__main__":
    main()
