"""Benchmark: what ``crashpoint.effect`` costs outside a crashpoint run (the pass-through).

Usage::

    python benchmarks/effect_overhead.py [--calls N] [--repeat K]

Prints nanoseconds per call of a plain function, of a bare ``*args, **kwargs`` forwarding wrapper (what
any argument-forwarding decorator costs), and of the same function decorated with
``@crashpoint.effect("name", key="k")`` (the best of ``--repeat`` interleaved rounds of ``--calls`` calls), the
difference, and the time and modules of ``import crashpoint`` in a new interpreter (it must import no
harness, pandas or engine).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import timeit


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=60)
    args = parser.parse_args()
    import crashpoint

    def charge(amount: int, key: str | None = None) -> int:
        return amount

    def forwarding(*a: object, **kw: object) -> int:  # the least any decorator that forwards arguments does
        return charge(*a, **kw)

    wrapped = crashpoint.effect("charge", key="key")(charge)
    best = {"plain call": float("inf"), "bare *args/**kwargs wrapper": float("inf"),
            "crashpoint.effect call": float("inf")}
    calls = {"plain call": lambda: charge(1, key="k"), "bare *args/**kwargs wrapper": lambda: forwarding(1, key="k"),
             "crashpoint.effect call": lambda: wrapped(1, key="k")}
    for _ in range(args.repeat):  # interleaved rounds, best of each: a shared machine's load hits all alike
        for name, call in calls.items():
            best[name] = min(best[name], timeit.timeit(call, number=args.calls) / args.calls)
    for name, seconds in best.items():
        print(f"{name + ':':30s} {seconds * 1e9:8.1f} ns  (+{(seconds - best['plain call']) * 1e9:.1f} ns)")
    code = ("import time, sys; t = time.perf_counter(); import crashpoint; t = time.perf_counter() - t; "
            "heavy = [m for m in sys.modules if m.split('.')[0] in ('pandas', 'langgraph', 'yaml', 'jsonschema') "
            "or m.startswith(('crashpoint.harness', 'crashpoint.engine', 'crashpoint.fakes'))]; "
            "print(f'{t * 1000:.1f} ms', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    print(f"{'import crashpoint:':30s} {out}")


if __name__ == "__main__":
    main()
