"""Benchmark: the full crash sweep of examples/langgraph_refund, warm forked workers vs the naive way.

Usage::

    python benchmarks/target_sweep.py [--case NAME ...] [--durability sync] [--workers 2]

Runs the example target's sweep (a golden run, then a real SIGKILL at every crash point it passed and a
new process recovering) twice: with workers forked from a warm zygote that imported LangGraph and the
team's module (``crashpoint run``'s default), and with a new interpreter per worker process
(``--crash-mode kill-cold``). Prints runs, crash points, worker processes, wall seconds of each and the
ratio. Target (issue 12): warm <= 1/5 of cold.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from crashpoint.harness.run.target_sweep import sweep
from crashpoint.harness.load.target import Target

TARGET = Path(__file__).resolve().parents[1] / "examples/langgraph_refund/target.yaml"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append", help="only these cases (default: all)")
    parser.add_argument("--durability", default="sync")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    target = Target.from_file(TARGET)
    times = {}
    for label, warm in (("warm fork", True), ("new interpreter", False)):
        began = time.perf_counter()
        result = sweep(target, cases=args.case, durability=[args.durability], workers=args.workers, warm=warm)
        times[label] = time.perf_counter() - began
        points = sum(len(p) for p in result.crash_points.values())
        workers = sum(r.workers for r in result.results)
        print(f"{label:16s} {len(result.results):4d} runs, {points:4d} crash points, {workers:5d} worker processes, "
              f"{times[label]:7.1f} s  {result.counts()}")
    print(f"ratio warm / cold: {times['warm fork'] / times['new interpreter']:.3f} (target <= 0.2)")


if __name__ == "__main__":
    main()
