"""Benchmark: where a real-kill cycle's milliseconds go, and what a sweep of one long segment is made of.

Usage::

    python benchmarks/reference_path.py [--cycles N] [--size N] [--skip cycles,stages,segment]

Prints, side by side in one run (load average first and last):

- ``cycles``: real-kill cycles per second on the refund workflow with 2 pool processes (``kill``), the same
  with a new interpreter per worker (``kill-cold``, every 8th crash point) and ``inprocess``, and the ratio
  kill / cold (:func:`scale.cycles_per_second`, the figure ``benchmarks/scale.py`` prints).
- ``stages``: one thread, ``--cycles`` real-kill cycles (:meth:`Driver.cycle`): milliseconds per cycle in the
  harness's stages (the snapshot's restore, the harness's ledger, each worker from the zygote's fork to its
  reaped exit, the kill's verification) and the same cycles with the worker run in-process, whose difference
  is what the process costs (fork, copy-on-write faults, exit, the zygote's round trip).
- ``segment``: crash runs of one segment of ``--size`` tasks (one checkpoint each), at five positions: the
  killed worker's time (the prefix, from the segment's start to the crash point) beside the resumed workers'
  (the suffix, to the workflow's end). The prefix's share of all of them bounds what any reduction of the
  prefix (a crash run starting nearer its point) can save: the suffix must run for real.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scale import cycles_per_second, generated_pack  # noqa: E402

from crashpoint.harness.adapters import ReferenceAdapter  # noqa: E402
from crashpoint.harness.load.loader import load_target  # noqa: E402
from crashpoint.harness.process import forkserver, kills, launch  # noqa: E402
from crashpoint.harness.run import pack_driver  # noqa: E402
from crashpoint.harness.run.pack_driver import Driver, Snapshot  # noqa: E402
from crashpoint.scenarios import builtin_pack  # noqa: E402


def _load() -> str:
    return open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"


def _wrap(owner: Any, name: str, sink: Callable[[float], None]) -> Callable[[], None]:
    """Time every call of ``owner.name`` into ``sink`` (seconds); returns the function that undoes it."""
    original = getattr(owner, name)

    @functools.wraps(original)
    def timed(*args: Any, **kwargs: Any) -> Any:
        began = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            sink(time.perf_counter() - began)

    setattr(owner, name, timed)
    return lambda: setattr(owner, name, original)


def stages(mode: str, count: int) -> tuple[float, dict[str, float]]:
    """``(cycles per second, {stage: ms per cycle})`` of ``count`` refund cycles on this thread in ``mode``."""
    pack, cases = load_target(builtin_pack("refunds"))
    by_id = {c.case_id: c for c in cases}
    spent: dict[str, float] = defaultdict(float)
    with tempfile.TemporaryDirectory() as tmp:
        driver = Driver(ReferenceAdapter(), pack, crash_mode=mode)
        goldens = {c.case_id: driver.run(c, Path(tmp) / f"g-{c.case_id}") for c in cases if not c.faults}
        jobs = [(cid, p) for cid, g in goldens.items() for p in g.crash_points][:count]
        forkserver.for_this_thread()
        worker = "worker pass (fork to reaped exit)" if mode == "kill" else "worker pass (in-process)"
        undo = [_wrap(Snapshot, "restore", lambda s: spent.__setitem__("restore snapshot", spent["restore snapshot"] + s)),
                _wrap(type(driver.launcher), "launch", lambda s: spent.__setitem__(worker, spent[worker] + s)),
                _wrap(kills, "check_worker", lambda s: spent.__setitem__("verify kill", spent["verify kill"] + s)),
                _wrap(pack_driver, "Ledger", lambda s: spent.__setitem__("open harness ledger", spent["open harness ledger"] + s))]
        try:
            began = time.perf_counter()
            for n, (case_id, point) in enumerate(jobs):
                driver.cycle(by_id[case_id], goldens[case_id], point, Path(tmp) / f"c{n}")
            wall = time.perf_counter() - began
        finally:
            for f in undo:
                f()
    out = {k: 1000 * v / len(jobs) for k, v in spent.items()}
    out["other (folders, argv, reads)"] = 1000 * wall / len(jobs) - sum(out.values())
    return len(jobs) / wall, out


def segment(size: int, positions: int = 5) -> list[tuple[int, int, float, float]]:
    """Crash runs of a generated one-segment workflow of ``size`` tasks at ``positions`` spread points:
    ``(point index, points, prefix ms, suffix ms)`` each (the killed worker's and the resumed workers' time)."""
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        pack, cases = load_target(generated_pack(Path(tmp), size))
        driver = Driver(ReferenceAdapter(), pack)
        golden = driver.run(cases[0], Path(tmp) / "golden")
        points = golden.crash_points
        passes: list[float] = []
        undo = _wrap(launch.ForkLauncher, "launch", passes.append)
        try:
            for n in range(positions):
                at = min(len(points) - 1, int(len(points) * (n + 0.5) / positions))
                passes.clear()
                driver.run(cases[0], Path(tmp) / f"c{n}", points[at], golden=golden)
                rows.append((at, len(points), 1000 * passes[0], 1000 * sum(passes[1:])))
        finally:
            undo()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=300, help="cycles of the one-thread stage breakdown")
    parser.add_argument("--size", type=int, default=200, help="tasks of the generated segment")
    parser.add_argument("--repeat", type=int, default=3, help="samples of the pool figures (median)")
    parser.add_argument("--skip", default="", help="comma-separated: cycles, stages, segment")
    args = parser.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {_load()}", flush=True)
    if "cycles" not in skip:
        kill, n = cycles_per_second("kill", 2, args.repeat)
        cold, m = cycles_per_second("kill-cold", 2, args.repeat)
        inproc, _ = cycles_per_second("inprocess", 2, args.repeat)
        print(f"cycles/s  kill {kill:6.1f} ({n} points)  cold {cold:5.1f} ({m} points)  inprocess {inproc:6.1f}  "
              f"kill/cold {kill / cold:5.1f}x  kill/inprocess {kill / inproc:4.2f}x", flush=True)
    if "stages" not in skip:
        rate_kill, kill_ms = stages("kill", args.cycles)
        rate_in, in_ms = stages("inprocess", args.cycles)
        print(f"one thread: kill {rate_kill:.1f} cycles/s, inprocess {rate_in:.1f} cycles/s; ms per cycle (2 worker passes):")
        for name in sorted(set(kill_ms) | set(in_ms), key=lambda k: -max(kill_ms.get(k, 0), in_ms.get(k, 0))):
            print(f"  {name:36s} kill {kill_ms.get(name, 0.0):6.2f}   inprocess {in_ms.get(name, 0.0):6.2f}")
        print(f"  {'total':36s} kill {1000 / rate_kill:6.2f}   inprocess {1000 / rate_in:6.2f}", flush=True)
    if "segment" not in skip:
        rows = segment(args.size)
        print(f"one segment of {args.size} tasks, crash runs from the segment's snapshot (ms):")
        for at, points, prefix, suffix in rows:
            print(f"  point {at:5d}/{points}  prefix (killed worker) {prefix:8.1f}  suffix (resumed) {suffix:8.1f}")
        prefix, suffix = sum(r[2] for r in rows), sum(r[3] for r in rows)
        print(f"  prefix share {prefix / (prefix + suffix):.2f}: a crash run that started at its point would save at "
              f"most that; the rest (the suffix, which must run) stays quadratic over a sweep")
    print(f"load {_load()}")


if __name__ == "__main__":
    main()
