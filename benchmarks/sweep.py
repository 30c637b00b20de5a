"""Benchmark: wall time of the refund sweep and of one worker process start.

Usage: python benchmarks/sweep.py [--jobs N] [--repeat K]

Prints: cases, crash points, runs, sweep wall time (s), runs per second, and the median wall
time (ms) of starting one worker process on an existing database (``--repeat`` samples).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from crashpoint.harness.process import crashpoints
from crashpoint.harness.adapters import ReferenceAdapter
from crashpoint.harness.run.pack_driver import Driver
from crashpoint.harness.load.loader import load_target
from crashpoint.scenarios import builtin_pack
from crashpoint.harness.run.sweep import sweep


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    pack, cases = load_target(builtin_pack("refunds"))
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        adapter = ReferenceAdapter()
        Driver(adapter, pack).run(cases[0], run_dir)
        from crashpoint.harness.adapters.protocol import RunContext
        argv = adapter.worker_command(RunContext(run_dir), "crashpoint.harness.process.crashpoints:probe",
                                      crashpoints.probe_arg(run_dir, None))
        samples = []
        for _ in range(args.repeat):
            began = time.perf_counter()
            subprocess.run(argv, check=True, stdout=subprocess.DEVNULL)
            samples.append(time.perf_counter() - began)
    began = time.perf_counter()
    result = sweep(pack, cases, ReferenceAdapter(), jobs=args.jobs)
    wall = time.perf_counter() - began
    points = sum(len(p) for p in result.crash_points.values())
    print(f"python                 {sys.version.split()[0]}")
    print(f"cases                  {len(cases)}")
    print(f"crash points           {points}")
    print(f"runs                   {len(result.results)}")
    print(f"sweep wall time        {wall:.1f} s")
    print(f"runs per second        {len(result.results) / wall:.1f}")
    print(f"worker start (median)  {1000 * statistics.median(samples):.0f} ms over {len(samples)} starts")


if __name__ == "__main__":
    main()
