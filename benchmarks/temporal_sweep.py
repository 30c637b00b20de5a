"""Benchmark: the full crash sweep of examples/temporal_refund/target.yaml, four ways, interleaved case by case.

Usage::

    python benchmarks/temporal_sweep.py [--case NAME ...] [--points N] [--workers N] [--way WAY ...]
                                        [--subset WAY=CASE,CASE ...]

Runs the example target's sweep (per case a golden run, then a real SIGKILL at every crash point and new worker
processes recovering; the default is every case of target.yaml and every crash point) four ways:

* ``shared``: each run in a namespace of its own on a long-lived shared dev server, workers forked from a warm
  zygote (``crashpoint run``'s default for a Temporal target; the ``server-crash`` case still gets a server of
  its own);
* ``server per run``: a dev server of the run's own that lives across the kills (the default before);
* ``server per worker``: a new dev server on the run's database before every worker (what crashpoint's Temporal
  adapter does: every worker starts its own server, every kill kills it too);
* ``naive``: a server per worker and a new interpreter per worker (``--crash-mode kill-cold``).

The ways take turns case by case (the order rotates), so a change of the machine's load hits them alike; every
way gets the same ``--workers`` (runs at once) and keeps one thread pool (its zygotes, its shared servers) for
the whole benchmark, as one sweep of every case would. A way's first case pays its cold starts. ``--subset WAY=CASES`` runs a slow way on those cases only (its
ratio is then given on them). ``--points N`` sweeps N crash points spread over each golden run's (default: all).
Prints each way's runs, worker processes, verdicts and wall seconds per case, the totals and the ratios side by
side. Target (issue 14): shared <= 1/3 of server per worker on the full sweep.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from crashpoint.harness.run.target_driver import run_target
from crashpoint.harness.run.target_sweep import default_workers, sweep
from crashpoint.harness.load.target import Target

TARGET = Path(__file__).resolve().parents[1] / "examples/temporal_refund/target.yaml"
#: Way -> (warm, server mode).
WAYS = {"shared": (True, "shared"), "server per run": (True, "run"), "server per worker": (True, "worker"),
        "naive": (False, "worker")}
BASE = "shared"


def _points(target: Target, case: str, n: int) -> list[str] | None:
    if not n:
        return None
    golden = run_target(target, target.case(case), "sync", Path(tempfile.mkdtemp(prefix="temporal-bench-")))
    every = golden.crash_points
    return [every[round(i * (len(every) - 1) / max(1, n - 1))] for i in range(min(n, len(every)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--case", action="append", help="a case of target.yaml (repeatable; default: all)")
    parser.add_argument("--points", type=int, default=0, help="crash points spread over the golden run's (0: all)")
    parser.add_argument("--workers", type=int, default=None, help="runs at once, every way alike (default: "
                        "crashpoint's for a Temporal target)")
    parser.add_argument("--way", action="append", choices=list(WAYS), help="repeatable (default: all four)")
    parser.add_argument("--subset", action="append", default=[], metavar="WAY=CASE,CASE",
                        help="run WAY on these cases only")
    args = parser.parse_args()
    target = Target.from_file(TARGET)
    cases = args.case or [c.name for c in target.cases]
    ways = args.way or list(WAYS)
    if BASE not in ways:
        ways.insert(0, BASE)
    subset = {}
    for item in args.subset:
        way, _, names = item.partition("=")
        subset[way] = names.split(",")
    workers = args.workers or default_workers(target)
    print(f"target.yaml cases {', '.join(cases)}; workers {workers}; load average {os.getloadavg()[0]:.1f} at start",
          flush=True)
    times: dict[str, dict[str, float]] = {w: {} for w in ways}
    # one pool per way for the whole benchmark, as one sweep has: its threads' zygotes (and the shared servers) are
    # started once, not once per case
    pools = {w: ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"bench-{w}") for w in ways}
    for n, case in enumerate(cases):
        chosen = _points(target, case, args.points)
        order = ways[n % len(ways):] + ways[:n % len(ways)]
        for way in order:
            if case not in subset.get(way, cases):
                continue
            warm, server = WAYS[way]
            began = time.perf_counter()
            result = sweep(target, cases=[case], executor=pools[way], warm=warm, crash_points=chosen, server=server)
            times[way][case] = time.perf_counter() - began
            print(f"{case:18s} {way:18s} {len(result.results):4d} runs, {sum(r.workers for r in result.results):5d} "
                  f"worker processes, {times[way][case]:7.1f} s  {result.counts()}  load {os.getloadavg()[0]:.1f}",
                  flush=True)
            for r in result.results:
                if r.verdict != "passed":
                    print(f"    {r.verdict} at {r.crash_point or 'golden run'}: "
                          f"{r.error or [f.message for f in r.failures]}", flush=True)
    for pool in pools.values():
        pool.shutdown()
    print("way                 cases  wall s   shared / way (on the cases both ran)")
    for way in ways:
        common = list(times[way])
        total = sum(times[way].values())
        base = sum(times[BASE][c] for c in common)
        print(f"{way:18s} {len(common):6d} {total:7.1f}   {base / total if total else float('nan'):.3f}", flush=True)
    if "server per worker" in times:
        common = list(times["server per worker"])
        ratio = sum(times[BASE][c] for c in common) / sum(times["server per worker"].values())
        print(f"ratio shared / server per worker: {ratio:.3f} (target <= 0.333) on {len(common)} of {len(cases)} cases")


if __name__ == "__main__":
    main()
