"""Certify an engine: sweep a pack (default: the conformance pack) through an adapter and grade its claims.

Each case of the pack carries ``claim:NAME`` tags. A claim is ``passed`` when every run (golden
and one per crash point) of every case tagged with it passed; ``failed`` otherwise, with the first
failing case, crash point, oracle message and a one-line repro command; ``unsupported`` when the
adapter declared it (``unsupported_claims``) or raised ``NotImplementedError`` for one of its
cases. Nothing is skipped: a case whose golden run errs fails its claims. Claims are graded into
levels (:data:`CLAIMS`); an engine reaches level N when every claim of levels 1..N passed.

The certificate is a dict (format ``crashpoint.certificate/1``), written as JSON and Markdown.
"""

from __future__ import annotations

import json
import os
import queue
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Sequence

from crashpoint import __version__
from crashpoint.errors import CrashpointError, UsageError, WorkerTimeout
from crashpoint.harness.adapters.protocol import EngineAdapter
from crashpoint.harness.judge.verdict import Invocation, repro_command

#: ``(level, claim, what it means)``: the claims of the conformance pack, graded.
CLAIMS: tuple[tuple[int, str, str], ...] = (
    (1, "resume", "a workflow killed at any crash point resumes from its last checkpoint and ends like the golden run"),
    (1, "effectively_once", "each effect happens once: a repeated step reuses its stable idempotency key"),
    (2, "durable_approval", "a human decision survives worker restarts and kills"),
    (2, "durable_timer", "an approval deadline that passes while no worker runs is honoured"),
    (2, "durable_retry", "retries of a failing step survive kills; the step succeeds once"),
    (2, "compensation", "a denial or a fatal failure undoes the effects already made"),
    (3, "duplicate_start", "a start request delivered three times runs one workflow"),
    (3, "duplicate_event", "an approval delivered three times is applied once"),
    (3, "cancellation", "a cancellation while waiting compensates and stops the workflow"),
    (3, "versioning", "a definition deployed mid-run does not change a running workflow"),
)
LEVEL_NAMES = {1: "durable execution", 2: "durable waits, retries and compensation", 3: "operations"}


#: The protocol's methods (see :class:`crashpoint.harness.adapters.protocol.EngineAdapter`).
METHODS = ("version", "prepare", "deploy", "start", "worker_command", "send_approval", "cancel", "status", "trace")


class AdapterError(CrashpointError, RuntimeError):
    """An adapter method raised; the message names the adapter, the method and the original error."""


#: Wall seconds one harness-side adapter call (``status``, ``trace``, ``start``...) may take by default.
CALL_TIMEOUT_S = 60.0


class AdapterTimeout(WorkerTimeout):
    """A harness-side adapter call did not return in time: the run is ``unknown`` (a hang is never a pass)."""


class _Lane:
    """A daemon thread that runs one calling thread's adapter calls, in order, so that the adapter's own
    connections always live on one thread (SQLite checks that), while the caller waits with a timeout."""

    def __init__(self) -> None:
        self.calls: queue.SimpleQueue = queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True, name="crashpoint-adapter-call").start()

    def _loop(self) -> None:
        while True:
            fn, box, done = self.calls.get()
            try:
                box.append((True, fn()))
            except BaseException as exc:  # noqa: BLE001 - handed to the caller as it is
                box.append((False, exc))
            done.set()

    def run(self, fn: Callable[[], Any], timeout_s: float) -> tuple[bool, Any]:
        """``(True, (ok, value_or_exception))``, or ``(False, None)`` when ``fn`` did not return within
        ``timeout_s`` seconds. Waits in short slices, so Ctrl-C (SIGINT) stops the caller at once."""
        box: list[tuple[bool, Any]] = []
        done = threading.Event()
        self.calls.put((fn, box, done))
        deadline = time.monotonic() + timeout_s
        while not done.wait(min(0.1, max(0.0, deadline - time.monotonic()))):
            if time.monotonic() >= deadline:
                return False, None
        return True, box[0]


_lanes = threading.local()


class GuardedAdapter:
    """Wraps an adapter so that an exception from any protocol method names the adapter and the method
    (``AdapterError``; ``NotImplementedError`` stays one, so the claim is graded ``unsupported``), and so
    that no call hangs the harness: each protocol method (and ``open_run`` / ``close_run``) runs on a helper
    thread while the caller waits at most ``call_timeout_s`` wall seconds (then :class:`AdapterTimeout`, an
    ``unknown`` verdict; later calls for the same run fail at once, the hung call is abandoned). Ctrl-C
    interrupts the wait. It pickles (for process pools and Dask) when the wrapped adapter does.

    Args:
        inner: the adapter (also ``wrapped``, so that :func:`~crashpoint.harness.adapters.protocol.adapter_class`
            names it). Every other attribute is read from it.
        call_timeout_s: wall seconds one call may take (> 0).

    Attributes:
        adapter_spec: the ``MODULE:ATTR`` it was loaded from (:func:`load_adapter`), or ``None``.
    """

    def __init__(self, inner: Any, call_timeout_s: float = CALL_TIMEOUT_S) -> None:
        self._inner = inner
        self.wrapped = inner
        self.name = inner.name
        self.call_timeout_s = float(call_timeout_s)
        self.adapter_spec: str | None = None
        self._hung: set[str] = set()

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__") or attr in ("_inner", "_hung"):  # pickle and copy probe dunders on a bare instance
            raise AttributeError(attr)
        value = getattr(self._inner, attr)
        if attr not in METHODS and attr not in ("open_run", "close_run"):
            return value

        def call(*args: Any, **kwargs: Any) -> Any:
            run = str(getattr(args[0], "run_dir", "")) if args else ""
            if run and run in self._hung:
                if attr == "close_run":  # nothing to close that a hung call does not hold: leave it abandoned
                    return None
                raise AdapterTimeout(f"adapter {self.name}: {attr}() not called: an earlier call for this run hung")
            lanes = getattr(_lanes, "by_adapter", None)
            if lanes is None:
                lanes = _lanes.by_adapter = {}
            lane = lanes.get(id(self)) or lanes.setdefault(id(self), _Lane())
            finished, outcome = lane.run(lambda: value(*args, **kwargs), self.call_timeout_s)
            if not finished:
                lanes.pop(id(self), None)  # that thread is stuck in the hung call: later calls get a new one
                if run:
                    self._hung.add(run)
                raise AdapterTimeout(f"adapter {self.name}: {attr}() did not return within {self.call_timeout_s:g} s "
                                     "(abandoned; a hang is unknown, never a pass)")
            ok, result = outcome
            if ok:
                return result
            exc = result
            if isinstance(exc, NotImplementedError):
                raise NotImplementedError(f"adapter {self.name}: {attr}() is not implemented: {exc}") from exc
            if isinstance(exc, CrashpointError) or not isinstance(exc, Exception):
                raise exc
            raise AdapterError(f"adapter {self.name}: {attr}() raised {type(exc).__name__}: {exc}") from exc

        return call


def load_adapter(spec: str, call_timeout_s: float = CALL_TIMEOUT_S) -> EngineAdapter:
    """Build the adapter named ``MODULE:ATTR`` (a class or factory called with no arguments, or an instance),
    wrapped in :class:`GuardedAdapter` (each harness-side call at most ``call_timeout_s`` wall seconds).

    Raises:
        UsageError: it cannot be imported or built, or lacks a method of the protocol.
    """
    from crashpoint.harness.adapters.runtime import load_object

    try:
        obj = load_object(spec)
        if isinstance(obj, type) or (callable(obj) and not hasattr(obj, "worker_command")):
            adapter = obj()  # a class or a factory
        else:
            adapter = obj  # an instance
    except Exception as exc:
        raise UsageError(f"--adapter {spec}: cannot build it: {type(exc).__name__}: {exc}") from None
    missing = [m for m in METHODS if not callable(getattr(adapter, m, None))]
    if missing or not isinstance(getattr(adapter, "name", None), str):
        raise UsageError(f"--adapter {spec}: not an EngineAdapter (missing: {', '.join(missing) or 'name'}); "
                         "see crashpoint.harness.adapters.protocol.EngineAdapter")
    guarded = GuardedAdapter(adapter, call_timeout_s)
    guarded.adapter_spec = spec  # what a trace file records, so that its incident reruns this adapter
    return guarded


def repro(case_path: Path, crash_point: str | None, adapter_spec: str) -> str:
    """``crashpoint run CASE --crash-point P --adapter SPEC`` (``--crash none`` for a golden run),
    quoted for a POSIX shell: :func:`crashpoint.harness.judge.verdict.repro_command`."""
    return repro_command(case_path, crash_point, Invocation(adapter=adapter_spec))


def grade(sweep_result: Any, adapter: EngineAdapter, adapter_spec: str, only: Sequence[str] = ()) -> dict[str, Any]:
    """The certificate of one sweep (see the module docstring).

    Args:
        sweep_result: a :class:`crashpoint.harness.run.sweep.SweepResult`.
        adapter: the adapter swept (for ``unsupported_claims``).
        adapter_spec: how the adapter was named (for repro commands).
        only: the ``--crash-point`` ids the sweep was narrowed to (recorded as ``narrowed_to``; ``[]``: every
            crash point, a full certification).
    """
    declared = set(getattr(adapter, "unsupported_claims", ()) or ())
    known = dict(getattr(adapter, "known_findings", {}) or {})
    cases = {c.case_id: c for c in sweep_result.cases}
    by_claim: dict[str, list[str]] = defaultdict(list)
    for case in sweep_result.cases:
        for tag in case.tags:
            if tag.startswith("claim:"):
                by_claim[tag[len("claim:"):]].append(case.case_id)
    extra = sorted(set(by_claim) - {name for _, name, _ in CLAIMS})
    claims = []
    for level, name, meaning in CLAIMS + tuple((4, n, "a claim of this pack") for n in extra):
        ids = by_claim.get(name, [])
        runs = [r for r in sweep_result.results if r.case_id in ids]
        bad = [r for r in runs if r.verdict != "passed"]
        verified = sum(1 for r in runs if _kill_verified(r))
        entry: dict[str, Any] = {"level": level, "claim": name, "meaning": meaning, "cases": ids, "runs": len(runs),
                                 "passed": len(runs) - len(bad), "failed": len(bad), "failing": [],
                                 "kills_verified": verified, "known_finding": known.get(name)}
        if name in declared or any("NotImplementedError" in (r.error or "") or r.verdict == "unsupported"
                                   for r in bad):
            entry["verdict"] = "unsupported"
        elif not ids:
            entry["verdict"] = "not covered"
        elif not bad and not verified:
            entry["verdict"] = "error"  # nothing was killed and resumed: a claim with zero verified crash points
            entry["failing"].append({"case": ids[0], "crash_point": "none", "verdict": "error",
                                     "why": "no run of this claim's cases was a verified kill (a worker killed by "
                                            "the harness and resumed by a new process): nothing was tested",
                                     "reproduce": repro(cases[ids[0]].path, None, adapter_spec)})
        else:
            entry["verdict"] = "failed" if bad else "passed"
        for r in bad[:5]:
            why = r.error or "; ".join(f"[{f.rule}] {f.message}" for f in r.failures[:2])
            entry["failing"].append({"case": r.case_id, "crash_point": r.crash_point or "none", "verdict": r.verdict,
                                     "why": why[:400], "reproduce": r.reproduce or repro_command(
                                         cases[r.case_id].path, r.crash_point, Invocation(adapter=adapter_spec))})
        claims.append(entry)
    level = 0
    for n in sorted(LEVEL_NAMES):
        if all(c["verdict"] == "passed" for c in claims if c["level"] == n):
            level = n
        else:
            break
    results = sweep_result.results
    return {"format": "crashpoint.certificate/1", "crashpoint_version": __version__,
            "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "engine": {"name": adapter.name, "version": adapter.version(), "adapter": adapter_spec},
            "pack": {"name": sweep_result.pack.name, "version": sweep_result.pack.version},
            "level": level, "level_name": LEVEL_NAMES.get(level, "none"),
            "narrowed_to": sorted(set(only)),
            "summary": {"cases": len(sweep_result.cases), "crash_points": sum(map(len, sweep_result.crash_points.values())),
                        "runs": len(results), "passed": sum(r.verdict == "passed" for r in results),
                        "failed": sum(r.verdict == "failed" for r in results),
                        "errors": sum(r.verdict == "error" for r in results),
                        "unknown": sum(r.verdict == "unknown" for r in results),
                        "unsupported": sum(r.verdict == "unsupported" for r in results),
                        "kills_verified": sum(1 for r in results if _kill_verified(r)),
                        "wall_s": round(sweep_result.wall_s, 1)},
            "claims": claims}


def _kill_verified(r: Any) -> bool:
    """A crash run whose kill landed and was resumed by a new process (see :mod:`crashpoint.harness.process.kills`)."""
    return bool(r.crash_point and r.outcome is not None and r.outcome.crash_fired)


def markdown(cert: dict[str, Any]) -> str:
    """The certificate as Markdown (the template ``certificate.md.j2`` of :mod:`crashpoint.reports`): a
    heading, the summary, a table of claims, the failures with repro commands. Every string from the
    engine, its adapter or a pack is escaped for Markdown by the template environment
    (:func:`crashpoint.reports.markdown.environment`), or shown as a code span."""
    from crashpoint.reports.markdown import page

    return page("certificate.md.j2", cert=cert, e=cert["engine"], s=cert["summary"])


def write(cert: dict[str, Any], out_dir: Path) -> tuple[Path, Path]:
    """Write ``certificate-<engine>.json`` and ``.md`` into ``out_dir`` (created); returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = "certificate-" + "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in cert["engine"]["name"])
    paths = (out_dir / f"{stem}.json", out_dir / f"{stem}.md")
    from crashpoint.reports.json_report import write_atomic

    for path, text in zip(paths, (json.dumps(cert, indent=2) + "\n", markdown(cert))):
        write_atomic(path, text)
    return paths


def certify(adapter_spec: str, pack_path: Path, *, jobs: int | None = None, worker_timeout_s: float = 60.0,
            only: Sequence[str] = (), workdir: Path | None = None, progress: Any = None,
            executor: Any = None, on_plan: Any = None) -> dict[str, Any]:
    """Sweep ``pack_path`` with every crash point (or ``only`` these) on the adapter and grade it.

    Args:
        jobs, executor: where the runs execute (see :func:`crashpoint.harness.run.sweep.sweep`; default a
            local process pool of ``jobs`` processes).
        progress, on_plan: :func:`~crashpoint.harness.run.sweep.sweep`'s ``on_result`` and ``on_plan``.

    Raises:
        UsageError: a bad adapter spec or executor; CaseError: a bad pack.
    """
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.run.sweep import sweep

    adapter = load_adapter(adapter_spec, call_timeout_s=worker_timeout_s)
    pack, cases = load_target(pack_path)
    result = sweep(pack, cases, adapter, crash="every", jobs=jobs, executor=executor, workdir=workdir,
                   keep=bool(workdir), worker_timeout_s=worker_timeout_s, only=only, on_result=progress,
                   on_plan=on_plan, how=Invocation(adapter=adapter_spec))
    return grade(result, adapter, adapter_spec, only)
