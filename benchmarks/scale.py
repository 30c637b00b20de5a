"""Benchmark: how fast crashpoint kills and resumes, and how a sweep scales.

Usage::

    python benchmarks/scale.py [--repeat K] [--workers N] [--skip NAME ...] [--sizes 100,1000]

Prints, for this machine (each timed figure is the median of ``--repeat`` runs, default 3):

- ``cycles kill``: real-kill crash/resume cycles per second on the refund workflow. A cycle
  (:meth:`crashpoint.harness.run.pack_driver.Driver.cycle`) restores the golden run's durable state at the
  start of the crash point's worker segment, forks a worker from a warm parent, which runs until the
  probe SIGKILLs it at the crash point, then forks new workers that resume from the files until the
  workflow is quiescent. Every crash point of every refund case, ``--workers`` processes at once.
- ``cycles cold``: the same cycles with a new interpreter per worker (the naive baseline).
- ``cycles inprocess``: the same cycles with simulated crashes (no process).
- ``crash runs``: whole judged crash runs per second (``crashpoint run refunds``: the case's
  events, the final reads and every oracle), ``kill`` and ``inprocess`` modes.
- ``sweep N checkpoints``: wall time of ``crashpoint run`` on a generated workflow of N tasks, one
  checkpoint each, a kill at every crash point; and the ratio of the two sizes. The larger one, past
  ``--max-runs`` crash points (default 200), runs every k-th point and scales the crash runs' time
  up to all of them (the output says so): its full sweep would take most of an hour here.
- ``checkpoint bytes``: bytes one task's checkpoint writes when the workflow holds 10 and 5,000
  tasks' results: state bytes (the row and changed items) and WAL bytes (pages SQLite appended),
  next to the size the whole state would have as one JSON document.
- ``workers``: refund sweep throughput with 1 and 2 local worker processes.
- ``ads_audit``: the full ads-audit pack swept at every crash point.

Targets (issue 6): cycles kill >= 200/s and >= 20x cold; sweep(1,000) <= 12x sweep(100);
checkpoint bytes at 5,000 <= 2x at 10; 2 workers >= 1.8x 1 worker; ads_audit < 300 s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import yaml

from crashpoint.engine.engine import Engine
from crashpoint.engine.definition import WorkflowDefinition
from crashpoint.fakes.world import build as build_world
from crashpoint.harness.adapters import ReferenceAdapter
from crashpoint.harness.run.pack_driver import Driver
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack


def _median(samples: list[float]) -> float:
    return statistics.median(samples)


def _timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """Median wall seconds of ``repeat`` calls, and the last call's value."""
    samples, value = [], None
    for _ in range(repeat):
        began = time.perf_counter()
        value = fn()
        samples.append(time.perf_counter() - began)
    return _median(samples), value


# ---------------------------------------------------------------------------- cycles
def _cycle_batch(mode: str, pack_dir: str, jobs: list[tuple[str, str]], goldens: dict[str, Any], root: str) -> int:
    """In a pool process: one cycle per (case, crash point), from the golden runs made beforehand."""
    pack, cases = load_target(Path(pack_dir))
    by_id = {c.case_id: c for c in cases}
    driver = Driver(ReferenceAdapter(), pack, crash_mode=mode)
    done = 0
    for n, (case_id, point) in enumerate(jobs):
        out = driver.cycle(by_id[case_id], goldens[case_id], point, Path(root) / f"c{n}")
        done += out.crash_fired
    return done


def _warm(_: int) -> int:
    from crashpoint.harness.process import forkserver

    forkserver.for_this_thread()
    return os.getpid()


def cycles_per_second(mode: str, workers: int, repeat: int) -> tuple[float, int]:
    """(cycles per second, cycles per sample) for every crash point of every refund case (golden runs,
    made first, are not timed)."""
    pack_dir = builtin_pack("refunds")
    pack, cases = load_target(pack_dir)
    with tempfile.TemporaryDirectory() as tmp:
        maker = Driver(ReferenceAdapter(), pack)
        goldens = {c.case_id: maker.run(c, Path(tmp) / f"golden-{c.case_id}") for c in cases if not c.faults}
    jobs = [(cid, p) for cid, g in goldens.items() for p in g.crash_points]
    if mode == "kill-cold":
        jobs = jobs[::8]  # the baseline is ~10x slower: every 8th crash point
    rates = []
    with ProcessPoolExecutor(workers) as pool:
        list(pool.map(_warm, range(workers)))  # zygotes started before the clock starts
        for _ in range(repeat):
            with tempfile.TemporaryDirectory() as tmp:
                shares = [jobs[i::workers] for i in range(workers)]
                began = time.perf_counter()
                fired = sum(pool.map(_cycle_batch, [mode] * workers, [str(pack_dir)] * workers, shares,
                                     [goldens] * workers, [f"{tmp}/w{i}" for i in range(workers)]))
                wall = time.perf_counter() - began
                if fired != len(jobs):
                    raise SystemExit(f"{mode}: {len(jobs) - fired} crash points never fired")
                rates.append(len(jobs) / wall)
    return _median(rates), len(jobs)


# ---------------------------------------------------------------------------- sweeps
def _sweep_wall(pack_dir: Path, mode: str, workers: int, repeat: int) -> tuple[float, int, int]:
    """(median wall seconds, runs, runs not passed) of a full sweep of a pack."""
    pack, cases = load_target(pack_dir)

    def once() -> Any:
        return sweep(pack, cases, ReferenceAdapter(), crash_mode=mode, jobs=workers)

    wall, result = _timed(once, repeat)
    bad = sum(r.verdict != "passed" for r in result.results)
    return wall, len(result.results), bad


def generated_sweep(pack_dir: Path, workers: int, max_runs: int, repeat: int) -> tuple[float, int, int, int]:
    """Sweep a generated pack at every crash point, or, past ``max_runs`` crash points, at every k-th
    one (evenly spread) and scale the crash runs' time up to all of them.

    Returns ``(seconds for the full sweep, crash points, crash points run, runs not passed)``.
    """
    pack, cases = load_target(pack_dir)
    with tempfile.TemporaryDirectory() as tmp:
        golden_began = time.perf_counter()
        points = Driver(ReferenceAdapter(), pack).run(cases[0], Path(tmp) / "golden").crash_points
        golden_s = time.perf_counter() - golden_began
    step = max(1, -(-len(points) // max_runs))
    chosen = points[::step]

    def once() -> Any:
        return sweep(pack, cases, ReferenceAdapter(), jobs=workers, only=chosen if step > 1 else ())

    wall, result = _timed(once, repeat)
    bad = sum(r.verdict != "passed" for r in result.results)
    if step > 1:  # the golden runs (the run and its repeat check) once, the crash runs scaled up
        wall = 2 * golden_s + (wall - 2 * golden_s) * len(points) / len(chosen)
    return wall, len(points), len(chosen), bad


def generated_pack(root: Path, tasks: int) -> Path:
    """A pack with one workflow of ``tasks`` side-effecting tasks (10 a phase), one checkpoint each,
    and one case that expects it to succeed."""
    phases = [{"id": f"p{p}", "on_error": "abort",
               "tasks": [{"id": f"t{i}", "tool": "notify.sendCustomerEmail", "side_effect": True, "retries": 2,
                          "args": {"to": "$input.customer_email", "template": f"step_{i}"}, "checkpoint": f"c{i}"}
                         for i in range(p * 10, min(tasks, p * 10 + 10))]}
              for p in range((tasks + 9) // 10)]
    folder = root / f"generated-{tasks}"
    (folder / "workflows").mkdir(parents=True)
    (folder / "cases").mkdir()
    (folder / "workflows" / "long.yaml").write_text(yaml.safe_dump(
        {"workflow": "long", "version": 1, "description": f"{tasks} tasks", "phases": phases}))
    (folder / "pack.yaml").write_text(yaml.safe_dump(
        {"pack": f"generated-{tasks}", "version": "1.0.0", "description": "benchmark", "default_workflow": "long",
         "workflows": {"long": "workflows/long.yaml"}, "cases": "cases",
         "effects": {}}))  # many calls of one tool, each its own effect (key): no one-effect vocabulary
    (folder / "cases" / "runs_to_the_end.yaml").write_text(yaml.safe_dump(
        {"case_id": "runs_to_the_end", "description": "every task once",
         "input": {"customer_email": "bench@example.org"}, "events": [],
         "expected": {"final_status": "succeeded", "stop_reason": "completed"}}))
    return folder


# ---------------------------------------------------------------------------- checkpoint bytes
def checkpoint_bytes(tasks: int) -> dict[str, int]:
    """Bytes one task's plan and checkpoint transactions write when the workflow of ``tasks`` tasks already
    holds ``tasks - 2`` results: the task before the last (the last one's checkpoint also ends the run,
    whose ``workflow_finished`` event lists every side effect)."""
    with tempfile.TemporaryDirectory() as tmp:
        definition = WorkflowDefinition.from_dict(yaml.safe_load(
            (generated_pack(Path(tmp), tasks) / "workflows" / "long.yaml").read_text()))
        marks: dict[str, tuple[int, int]] = {}
        wal = Path(tmp) / "engine.db-wal"
        last = f"t{tasks - 2}"

        def probe(point: str) -> None:  # counters after workflow_started and after the last task's checkpoint
            if point in ("after_checkpoint:workflow_started", f"after_checkpoint:c{tasks - 2}"):
                marks[point] = (engine.store.state_bytes_written, wal.stat().st_size)

        tools, clock = build_world(tmp)
        engine = Engine(Path(tmp) / "engine.db", tools, clock, probe=probe)
        engine.store.db.execute("PRAGMA wal_autocheckpoint=0")  # the WAL only grows: its growth is what was written
        engine.deploy(definition)
        engine.start("wf", "long", {"customer_email": "bench@example.org"}, initial_step=last)
        st = engine.store.load_state("wf")
        st["results"] = {f"t{i}": {"message_id": f"msg_{i:08x}", "to": "bench@example.org",
                                   "template": f"step_{i}"} for i in range(tasks - 2)}
        st["keys"] = {f"t{i}": f"wf/t{i}" for i in range(tasks - 2)}
        st["side_effects"] = [{"task": f"t{i}", "tool": "notify.sendCustomerEmail", "idempotency_key": f"wf/t{i}",
                               "compensation": None, "status": "executed"} for i in range(tasks - 2)]
        with engine.store.transaction() as conn:
            engine.store.save_state(conn, "wf", "accepted", st, clock.now())
        engine.advance("wf")  # workflow_started, then the task measured, then the last task
        (s0, w0), (s1, w1) = marks["after_checkpoint:workflow_started"], marks[f"after_checkpoint:c{tasks - 2}"]
        whole = len(json.dumps(engine.store.load_state("wf"), sort_keys=True))
        out = {"state": s1 - s0, "wal": w1 - w0, "whole_state_json": whole, "status": engine.status("wf").status}
        engine.close()
        return out


# ---------------------------------------------------------------------------- main
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="samples per timed figure (median)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sizes", default="100,1000", help="tasks of the two generated workflows")
    parser.add_argument("--max-runs", type=int, default=200,
                        help="crash runs of the larger generated sweep past which every k-th point is run and "
                             "its time scaled up")
    parser.add_argument("--skip", nargs="*", default=[],
                        choices=["cycles", "runs", "generated", "bytes", "workers", "ads_audit"])
    args = parser.parse_args()
    skip = set(args.skip)
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.2f}, "
          f"median of {args.repeat}", flush=True)
    if "cycles" not in skip:
        kill, n = cycles_per_second("kill", args.workers, args.repeat)
        cold, m = cycles_per_second("kill-cold", args.workers, args.repeat)
        inproc, _ = cycles_per_second("inprocess", args.workers, args.repeat)
        print(f"cycles kill            {kill:8.1f} /s  ({n} crash points, {args.workers} workers)  target >= 200")
        print(f"cycles cold            {cold:8.1f} /s  ({m} crash points)  kill/cold = {kill / cold:.1f}x  "
              "target >= 20x")
        print(f"cycles inprocess       {inproc:8.1f} /s", flush=True)
    if "runs" not in skip:
        for mode in ("kill", "inprocess"):
            wall, runs, bad = _sweep_wall(builtin_pack("refunds"), mode, args.workers, args.repeat)
            print(f"crash runs {mode:<11} {runs / wall:8.1f} /s  (refunds: {runs} judged runs in {wall:.1f} s, "
                  f"{bad} not passed)", flush=True)
    if "generated" not in skip:
        small, large = (int(x) for x in args.sizes.split(","))
        walls = {}
        with tempfile.TemporaryDirectory() as tmp:
            for size in (small, large):
                full = size == small  # the smaller sweep is always run whole
                wall, runs, sampled, bad = generated_sweep(generated_pack(Path(tmp), size), args.workers,
                                                           10 ** 9 if full else args.max_runs,
                                                           args.repeat if full else 1)
                walls[size] = wall
                how = "measured" if sampled == runs else f"estimated from {sampled} runs at every {runs // sampled}th point"
                print(f"sweep {size:>5} checkpoints {wall:8.1f} s   ({runs} crash runs, {how}, {bad} not passed)",
                      flush=True)
        print(f"sweep ratio            {walls[large] / walls[small]:8.1f} x  (target <= 12x)")
    if "bytes" not in skip:
        few, many = checkpoint_bytes(10), checkpoint_bytes(5000)
        print(f"checkpoint bytes    10 tasks: state {few['state']:>6} B, WAL {few['wal']:>7} B "
              f"(whole state as JSON: {few['whole_state_json']} B)")
        print(f"checkpoint bytes  5000 tasks: state {many['state']:>6} B, WAL {many['wal']:>7} B "
              f"(whole state as JSON: {many['whole_state_json']} B)")
        print(f"checkpoint ratio       state {many['state'] / few['state']:.2f}x, WAL {many['wal'] / few['wal']:.2f}x"
              "  (target <= 2x)", flush=True)
    if "workers" not in skip:
        one, runs, _ = _sweep_wall(builtin_pack("refunds"), "kill", 1, args.repeat)
        two, _, _ = _sweep_wall(builtin_pack("refunds"), "kill", 2, args.repeat)
        print(f"workers 1              {runs / one:8.1f} runs/s ({one:.1f} s)")
        print(f"workers 2              {runs / two:8.1f} runs/s ({two:.1f} s)  speed-up {one / two:.2f}x  "
              "(target >= 1.8x)", flush=True)
    if "ads_audit" not in skip:
        wall, runs, bad = _sweep_wall(builtin_pack("ads_audit"), "kill", args.workers, 1)
        print(f"ads_audit full sweep   {wall:8.1f} s   ({runs} runs, {bad} not passed)  target < 300 s")


if __name__ == "__main__":
    main()
