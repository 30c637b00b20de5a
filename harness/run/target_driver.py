"""One run of a target: the team's code in worker processes, a real SIGKILL at a crash point, recovery.

A run happens in its own folder. The driver writes the target (``target.json``) and the case's tool
faults (the ledger's script), then alternates worker processes with what the outside world does:

1. a ``start`` worker submits every input thread (``invoke(input)``);
2. after a worker the harness killed, a **new** worker process (``recover``: ``invoke(None)`` per
   unfinished thread; ``start`` while inputs remain unsubmitted). The kill is verified as a pack run's is
   (:func:`crashpoint.harness.process.kills.check_worker`, from the pid the harness started, its exit by SIGKILL
   and the probe's witness records): the process the probe killed is the one the harness started, it died by
   SIGKILL, and the next worker is a new process that started the probe; what cannot be verified goes to
   ``kill_problems`` and the run is an ``error``;
3. a thread found with no checkpoint after a kill is reported (a note naming the thread and the kill)
   and then submitted again explicitly, as its caller would on a request that never got an answer;
4. a thread waiting on an interrupt of node N gets N's next scripted answer (recorded in the ledger's
   ``decisions`` first, ``grants`` true or false), delivered by an ``answer`` worker as
   ``Command(resume=...)``. An interrupt still waiting after its answer was delivered (the answer was
   lost with a kill) gets the same answer again, noted as a redelivery; a new interrupt of N (a re-ask)
   gets the next answer; none left: the thread ends waiting for a human. A ``late`` answer arrives after
   the workflow moved on: the node's next answer is delivered in its turn, and once that answer took effect
   (the thread no longer waits on the interrupt it answered) the late one is delivered as
   ``Command(resume=...)`` to the thread as it is then (whatever it waits on, or finished), as a reviewer's
   click that comes after the deadline reaches a webhook; its decision is recorded ``by`` :data:`LATE_BY`;
5. the run ends when a worker exits with nothing left to deliver.

A case with ``duplicate: start`` (or ``answer``) delivers its first start request (or answer) twice at
once: a second worker process, started beside the first, waits with it at a barrier and then invokes
the same thread with the same input (or ``Command``), as a client retrying a slow request or a human
clicking twice would.

Workers are forked from a warm zygote that imported LangGraph and the team's module (see
:mod:`crashpoint.harness.process.forkserver`), or started as new interpreters (``warm=False``, the naive way).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashpoint.harness.model.outcomes import LATE_BY, TargetOutcome  # noqa: F401  (re-exported)
from crashpoint.errors import EngineCrashed, Unsupported, UsageError, WorkerTimeout
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.world import LEDGER_FILE
from crashpoint.harness.process import kills as kills_judge
from crashpoint.harness.process import crashpoints
from crashpoint.harness.process import forkserver
from crashpoint.harness.run.delivery import PROBE_SPEC
from crashpoint.harness.process.launch import RUN_MARKER, run_process
from crashpoint.harness.engines.effects import ensure_schema, outside_calls, read_calls
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.engines.workerlib import PIDS_FILE, RENDEZVOUS_MISSED_FILE, TARGET_FILE, THREADS_FILE, UNSUPPORTED_RC
from crashpoint.harness.engines.workerlib import invoke_errors

from crashpoint.harness.engines import dbos as dbos_engine
from crashpoint.harness.engines import langgraph as langgraph_engine
from crashpoint.harness.engines import temporal as temporal_engine
from crashpoint.harness.engines import temporal_ahead

#: Engine -> its worker module (one module per engine: ``harness/engines/ENGINE.py`` + ``ENGINE_worker.py``).
WORKER_MODULES = {"langgraph": langgraph_engine.WORKER_MODULE, "dbos": dbos_engine.WORKER_MODULE,
                  "temporal": temporal_engine.WORKER_MODULE}
#: Engine -> the server a run keeps alive across its workers' kills (``RunServer(run_dir)``: ``start()``,
#: ``kill()``, ``restart()``, ``address``, ``namespace``, ``pids``); engines absent keep their state in files the
#: workers open.
SERVERS = {"temporal": temporal_engine.RunServer}
#: Engine -> a run's share of a long-lived server (the same interface, ``restart()`` refused): the default
#: (``server="shared"``) for a case without a server crash.
SHARED_SERVERS = {"temporal": temporal_engine.lease}
#: Engine -> a run's own server with ``server="shared"`` (a case with a server crash): one started ahead, on a fresh
#: database of its own (:mod:`~crashpoint.harness.engines.temporal_ahead`); ``run`` and ``worker`` start theirs.
OWN_SERVERS = {"temporal": temporal_ahead.ahead}
#: ``server`` values of :func:`run_target`: ``shared`` (a namespace of its own on a shared server), ``run`` (a
#: server of the run's own), ``worker`` (a new server on the run's database before every worker: the benchmark's
#: baseline, what crashpoint's Temporal adapter does).
SERVER_MODES = ("shared", "run", "worker")


class TargetUnsupported(Unsupported):
    """The engine release installed lacks what the run needs (a durability mode): the verdict is ``unsupported``."""


#: Worker processes per run before the harness gives up on a loop that makes no progress.
MAX_WORKERS_PER_RUN = 40
#: Times one interrupt may get its answer again before the run is called stuck.
MAX_REDELIVERIES = 3




class _WarmServer(forkserver.ForkServer):
    """A zygote that preloads the LangGraph worker, with the target's ``pythonpath`` on its ``sys.path``; the
    team's entry module is imported as a ``warm`` module of the first request (the worker's ``--entry``
    argument), where an import error is left to the worker to report instead of killing the zygote."""

    def __init__(self, pythonpath: list[str], worker_module: str) -> None:
        import subprocess

        env = {**os.environ, **forkserver.ISOLATED_ENV,
               "PYTHONPATH": os.pathsep.join([*pythonpath, os.environ.get("PYTHONPATH", "")])}
        self.proc = subprocess.Popen([sys.executable, "-m", "crashpoint.harness.process.forkserver",
                                      *forkserver.PRELOAD, worker_module],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                     start_new_session=True, env=env)
        forkserver.ZYGOTES.add(self.proc.pid)  # killed with the others on Ctrl-C; never reaped as a stray
        self._buffer = b""


_local = threading.local()
#: Starts the second process of a duplicated request (beside the first, so both run at once).
_helper = ThreadPoolExecutor(max_workers=16, thread_name_prefix="crashpoint-duplicate")


#: Warm zygotes one thread keeps, one per target code (the least recently used is stopped first): a sweep's thread
#: uses one, or two across a deploy; a thread that runs many targets (a long pytest process calling ``run_target``
#: on each variant) kept one interpreter with its engine imported per target (about 68 MB each: 21 under CI's pytest).
MAX_WARM_PER_THREAD = 2


def warm_server(target: Target) -> forkserver.ForkServer:
    """This thread's zygote for ``target`` (started on first use, again if it died; the thread's least recently used
    one is stopped beyond :data:`MAX_WARM_PER_THREAD`: idle, since only this thread uses it)."""
    key = (tuple(target.pythonpath), target.entry, target.engine)
    servers = _local.__dict__.setdefault("servers", {})  # key -> zygote, least recently used first
    server = servers.pop(key, None)
    if server is None or not server.alive():
        server = _WarmServer(target.pythonpath, WORKER_MODULES[target.engine])
    servers[key] = server
    while len(servers) > MAX_WARM_PER_THREAD:
        servers.pop(next(iter(servers))).close()
    return server


def _warm_up(server: forkserver.ForkServer, timeout_s: float) -> None:
    """Wait until ``server`` (a zygote, cold: importing LangGraph takes seconds under load) forks: it runs
    ``/bin/true`` once (an error here is left to the worker's own run to report)."""
    try:
        server.exec(["/bin/true"], timeout_s)
    except (OSError, WorkerTimeout):
        pass


def _launch(target: Target, warm: bool, module: str, argv: list[str], timeout_s: float, env: dict[str, str],
            log: Path) -> tuple[int, list[str], int | None]:
    """Run one worker of ``target`` (``python -m module ARGV``): forked from this thread's warm zygote, or
    (``warm`` false) a new interpreter with the target's ``pythonpath`` (:func:`~crashpoint.harness.process.launch.run_process`).

    Returns ``(returncode, leftovers, pid)``: ``pid`` is the process the harness started (``None`` if it never
    ran), what a kill is verified against.

    Raises:
        WorkerTimeout: it ran longer than ``timeout_s`` seconds.
    """
    started: list[int] = []
    if warm:
        rc, leftovers = warm_server(target).run(module, argv, timeout_s, env, log, on_start=started.append)
    else:
        cold_env = {**env, "PYTHONPATH": os.pathsep.join([*target.pythonpath, os.environ.get("PYTHONPATH", "")])}
        rc, leftovers = run_process([sys.executable, "-m", module, *argv], timeout_s, cold_env, log,
                                    on_start=started.append)
    return rc, leftovers, started[0] if started else None


def _warm_then_run(target: Target, ready: threading.Event, go: threading.Event, module: str, argv: list[str],
                   timeout_s: float, env: dict[str, str], log: Path) -> tuple[int, list[str], int | None]:
    """The second process of a duplicated request: warm this thread's zygote, set ``ready``, wait for ``go``
    (the main thread's zygote is warm too), then run the worker (:func:`_launch`). Both processes are then
    forked from warm zygotes within milliseconds, so neither waits out the other's cold start at the barrier."""
    try:
        _warm_up(warm_server(target), timeout_s)
    finally:
        ready.set()
    go.wait(timeout_s)
    return _launch(target, True, module, argv, timeout_s, env, log)


def prewarm(target: Target, timeout_s: float = 120.0) -> None:
    """Start this thread's zygote for ``target`` and wait until it forks (a sweep calls it on its idle pool threads
    while the golden runs go, so their first crash runs do not wait out a cold start)."""
    _warm_up(warm_server(target), timeout_s)


def close_servers() -> None:
    """Stop this thread's zygotes."""
    for server in getattr(_local, "servers", {}).values():
        server.close()
    _local.servers = {}


def script_faults(ledger: Ledger, faults: list[dict[str, Any]]) -> None:
    """Queue each case fault ``{effect, outcome, times, seconds?}`` on the ledger's script, in order."""
    for fault in faults:
        seconds = fault.get("seconds", 0.2) if fault["outcome"] == "slow" else None
        ledger.script(fault["effect"], fault["outcome"], times=int(fault.get("times", 1)), seconds=seconds)


def missed_faults(ledger: Ledger, faults: list[dict[str, Any]]) -> list[str]:
    """The case faults (queued by :func:`script_faults`, in order) none of whose ``times`` scripted outcomes a call
    used, each as ``"EFFECT OUTCOME"``: the fault never fired (its effect was never called, or is misspelt)."""
    rows = [(r["seq"], r["consumed"]) for r in ledger.db.execute("SELECT seq, consumed FROM script ORDER BY seq")]
    missed, at = [], 0
    for fault in faults:
        times = int(fault.get("times", 1))
        if not any(consumed for _, consumed in rows[at:at + times]):
            missed.append(f"{fault['effect']} {fault['outcome']}")
        at += times
    return missed


@dataclass
class _Together:
    """The processes started beside a run's main worker when several workers recover at once."""

    futures: list[Any]
    logs: list[Path]


#: Engines whose worker holds the two processes of a duplicated request together inside a step (at the first
#: effect call of each: ``--rendezvous 2``), so that they provably overlap.
RENDEZVOUS = ("langgraph",)
#: The identity of a run's workers when one at a time (a restarted process keeps its executor id).
EXECUTOR = "crashpoint-executor"
#: Engine -> ``identity(name, seen) -> worker args``: the worker's own identity and the dead ones it recovers
#: (engines with no worker identity are absent: their K workers are plain copies).
IDENTITIES = {"dbos": dbos_engine.identity_args}
#: Engine -> ``run_database(data, run_dir) -> drop | None``: the run's own database on a server the target names
#: (DBOS on PostgreSQL), written into ``data`` before the workers read it, dropped when the run ends.
RUN_DATABASES = {"dbos": dbos_engine.run_database}
#: Engine -> ``facts(run_dir) -> dict``: what its workers recorded beyond effects (``TargetOutcome.engine_facts``).
ENGINE_FACTS = {"dbos": dbos_engine.facts}


def _pid_executors(run_dir: Path) -> list[tuple[int, str]]:
    """``(pid, identity)`` of each worker that wrote one to ``pids.log`` (``PID PHASE IDENTITY``)."""
    path = run_dir / PIDS_FILE
    rows = [line.split() for line in path.read_text().splitlines()] if path.exists() else []
    return [(int(r[0]), r[2]) for r in rows if len(r) > 2]


def _log_tail(log: Path, lines: int = 8) -> list[str]:
    """The last ``lines`` lines of a worker's log (``[]`` when it wrote none), for the message of a worker that died
    or ended without its report."""
    return log.read_text(errors="replace").strip().splitlines()[-lines:] if log.exists() else []


def _pids(run_dir: Path) -> list[int]:
    path = run_dir / PIDS_FILE
    return [int(line.split()[0]) for line in path.read_text().splitlines()] if path.exists() else []


def run_target(target: Target, case: TargetCase, durability: str, run_dir: Path, crash_point: str | None = None,
               *, warm: bool = True, write_latency_ms: float = 0.0, server: str = "shared") -> TargetOutcome:
    """Run ``case`` of ``target`` once in ``run_dir`` (new, or holding no earlier run), killing a worker at ``crash_point``.

    ``crash_point`` is a crash point id or a schedule ``"A >> B"`` (kill at A, then at B during the
    recovery). ``server`` (engines with a server: Temporal; :data:`SERVER_MODES`): ``shared`` (the default) gives
    the run a namespace of its own on a long-lived shared server (a case with a server crash gets a server of its
    own), ``run`` a server of its own for the whole run, ``worker`` a new server on the run's database before every
    worker, as crashpoint's Temporal adapter does (a benchmark's baseline). ``write_latency_ms`` delays every checkpoint write of the saver (after the probe's
    ``before_put``), widening the window in which an ``async`` write is in flight.

    A kill that cannot be verified is in the outcome's ``kill_problems`` (the verdict is ``error``).

    Raises:
        EngineCrashed: a worker died in a way the harness did not cause, or :data:`MAX_WORKERS_PER_RUN`
            workers did not bring the run to rest.
        UsageError: ``run_dir`` holds an earlier run's files (``target.json``, the ledger, ``pids.log``), or its
            crash log (``RUN_DIR.probe``, :func:`~crashpoint.harness.process.crashpoints.witness_dir`) is there.
        ValueError: ``server`` is not one of :data:`SERVER_MODES`.
    """
    if server not in SERVER_MODES:
        raise ValueError(f"server must be one of {', '.join(SERVER_MODES)}, got {server!r}")
    began = time.monotonic()
    run_dir = Path(run_dir).resolve()  # the workers' RUN_MARKER: the reaper matches resolved folders only
    earlier = [name for name in (TARGET_FILE, LEDGER_FILE, PIDS_FILE) if (run_dir / name).exists()]
    earlier += [str(w) for w in [crashpoints.witness_dir(run_dir)] if w.exists()]  # its crash log, beside the folder
    if earlier:  # its ledger, checkpoints and crash logs would stand for this run's (a finished thread runs nothing)
        raise UsageError(f"{run_dir}: holds an earlier run ({', '.join(earlier)}); a run needs a folder of its own")
    run_dir.mkdir(parents=True, exist_ok=True)
    out = TargetOutcome(case.name, durability, crash_point, run_dir)
    data = target.to_data() | {"write_latency_ms": write_latency_ms}
    drop_database = RUN_DATABASES[target.engine](data, run_dir) if target.engine in RUN_DATABASES else None
    (run_dir / TARGET_FILE).write_text(json.dumps(data, sort_keys=True))
    ledger = Ledger(run_dir / LEDGER_FILE, synchronous="OFF")
    ensure_schema(ledger)
    script_faults(ledger, case.faults)
    answers = target.answers(case)
    next_answer: dict[tuple[str, str], int] = {}  # (thread, node) -> answers given: each thread gets the node's list
    delivered: dict[str, dict[str, Any]] = {}
    redelivered: dict[str, int] = {}
    due: dict[str, list[dict[str, Any]]] = {}  # thread -> late answers, each delivered once ``after`` is answered
    phase, extra = "start", []
    duplicated = False
    executors: list[str] = [EXECUTOR]  # engine identities used so far (DBOS executor ids)
    dead = EXECUTOR  # the engine identity of the last worker killed
    others: list[list[str]] = []
    deadline = began + target.budget_s
    worker_module = WORKER_MODULES[target.engine]
    mode = server  # the name ``server`` is the run's server object below
    own_server = mode != "shared" or case.server_crash or target.engine not in SHARED_SERVERS
    servers = SHARED_SERVERS if not own_server else OWN_SERVERS if mode == "shared" else SERVERS
    server = servers[target.engine](run_dir) if target.engine in servers else None
    deployed: str | None = None  # the version of the code new workers run after a deploy (case.deploy)
    server_crashed = False
    reported: dict[str, Any] = {}  # the last worker report read (threads.json)
    try:
        if server is not None:
            server.start()
            out.deliveries.append({"kind": "server", "address": server.address, "pid": server.pids[-1],
                                   "namespace": server.namespace, "shared": not own_server,
                                   **({"database": str(server.database)} if hasattr(server, "database") else {})})
        for _ in range(MAX_WORKERS_PER_RUN):
            seen = len(crashpoints.witness_events(run_dir))
            # the code this worker runs: a deployed version's entry (LangGraph, DBOS), warmed by its own zygote
            code = target.running(deployed) if deployed and target.versions else target
            pids_before = len(_pids(run_dir))
            argv = ["--run-dir", str(run_dir), "--probe", PROBE_SPEC,
                    "--probe-arg", crashpoints.probe_arg(run_dir, crash_point, witness=True),
                    "--durability", durability, "--phase", phase, "--entry", code.entry, *extra]
            if server is not None:
                if mode == "worker" and out.workers > 0:
                    server.restart()
                argv += ["--address", server.address, "--namespace", server.namespace]
            if deployed:
                argv += ["--version", deployed]
            out.workers += 1
            log = run_dir / f"worker-{out.workers:03d}.log"
            left = deadline - time.monotonic()
            if left <= 0:
                raise WorkerTimeout(f"over the budget of {target.budget_s:g} s")
            env = {**forkserver.ISOLATED_ENV, RUN_MARKER: str(run_dir)}
            twin = None
            for stale in [*run_dir.glob("barrier.*"), *run_dir.glob("rendezvous*")]:  # this phase's processes only
                stale.unlink(missing_ok=True)
            # each worker writes its own report: one left by an earlier worker must not stand for this one's
            (run_dir / THREADS_FILE).unlink(missing_ok=True)
            if phase == "recover" and case.workers > 1 and target.engine in IDENTITIES:  # K workers race
                labels = [f"{EXECUTOR}-{out.kills}.{n}" for n in range(1, case.workers + 1)]
                as_ids = {"explicit": labels, "launch": [dead] * case.workers,  # the engine ids they run with
                          "mixed": [dead, *labels[1:]]}[case.recovery]
                identity = IDENTITIES[target.engine]
                base = [*argv, "--barrier", str(case.workers)]
                argv, *others = [[*base, *identity(lb, ex, executors)] for lb, ex in zip(labels, as_ids)]
                logs = [log.with_suffix(f".{n}.log") for n in range(2, case.workers + 1)]
                together = [_helper.submit(_launch, code, warm, worker_module, a, left, env, lg)
                            for a, lg in zip(others, logs)]
                executors += [n for n in dict.fromkeys(as_ids) if n not in executors]
                out.deliveries.append({"kind": "workers", "worker": out.workers, "executors": as_ids,
                                       "recovery": case.recovery})
                twin = _Together(together, logs)
            elif target.engine in IDENTITIES:
                argv += IDENTITIES[target.engine](EXECUTOR, EXECUTOR, executors)
            if twin is None and case.duplicate == phase and not duplicated:  # the same request delivered twice, at once
                duplicated = True
                argv += ["--barrier", "2", *(["--rendezvous", "2"] if target.engine in RENDEZVOUS else [])]
                twin_args = [*argv, *(["--duplicate"] if phase == "start" else [])]
                twin_log = log.with_suffix(".twin.log")
                if warm:  # each helper thread keeps its own warm zygote, so both processes start alike
                    ready, go = threading.Event(), threading.Event()
                    twin = _helper.submit(_warm_then_run, code, ready, go, worker_module, twin_args, left, env,
                                          twin_log)
                    _warm_up(warm_server(code), left)
                    ready.wait(left)
                    go.set()
                else:
                    twin = _helper.submit(_launch, code, False, worker_module, twin_args, left, env, twin_log)
                out.deliveries.append({"kind": f"duplicate_{phase}", "worker": out.workers})
            rc, leftovers, started = _launch(code, warm, worker_module, argv, left, env, log)
            procs = [(started, rc)]  # (pid the harness started, its exit status) of every process of this turn
            pid = None
            if isinstance(twin, _Together):  # K recovering workers: each process's own exit code, by executor id
                ids = _pid_executors(run_dir)[pids_before:]
                results = [(rc, argv, log)] + [(*f.result()[:1], a, lg) for f, a, lg in
                                                zip(twin.futures, others, twin.logs)]
                for f in twin.futures:
                    leftovers += f.result()[1]
                    procs.append((f.result()[2], f.result()[0]))
                out.workers += len(twin.futures)
                by_label = {ex: p for p, ex in ids}
                for n, (one_rc, one_argv, one_log) in enumerate(results):
                    name = one_argv[one_argv.index("--executor-id") + 1]
                    as_id = one_argv[one_argv.index("--as-executor") + 1] if "--as-executor" in one_argv else name
                    entry = {"pid": by_label.get(name), "phase": phase, "rc": one_rc, "executor": as_id,
                             **({"worker_id": name} if as_id != name else {})}
                    out.pids.append(entry)
                    if one_rc == -signal.SIGKILL or (rc == 0 and one_rc != 0):
                        rc, log, pid = one_rc, one_log, entry["pid"]
                if pid is None:
                    pid = out.pids[-1]["pid"]
            else:
                if twin is not None:
                    twin_rc, twin_left, twin_pid = twin.result()
                    procs.append((twin_pid, twin_rc))
                    out.workers += 1
                    leftovers += twin_left
                    if rc == 0 and twin_rc != 0:
                        rc, log = twin_rc, log.with_suffix(".twin.log")
                pids = _pids(run_dir)
                pid = pids[-1] if len(pids) > pids_before else None
                if twin is not None:  # both processes of a duplicated request, in the order they started
                    out.pids += [{"pid": p, "phase": phase, "rc": rc, "duplicate": True} for p in pids[pids_before:-1]]
                out.pids.append({"pid": pid, "phase": phase, "rc": rc})
            met = {int(p.name.split(".", 1)[1]): sorted(int(x) for x in p.read_text().split())
                   for p in sorted(run_dir.glob("rendezvous-ok.*"))}
            if met:  # who verified whom inside the step (a duplicated request's processes)
                out.deliveries.append({"kind": "rendezvous", "worker": out.workers, "met": met})
            # each process's own invoke errors (threads.json keeps the report of the last process of a duplicate)
            pair = twin is not None and not isinstance(twin, _Together)
            raised = invoke_errors(run_dir, {p for p, _ in procs}) if pair else []
            missed = run_dir / RENDEZVOUS_MISSED_FILE
            if missed.exists():
                out.not_tested.append(f"the duplicate {phase} never overlapped: pid(s) {' '.join(missed.read_text().split())}"
                                      " met no other live process inside the step (two processes at once were not "
                                      "tested)" + "".join(f"; pid {e['pid']}'s invoke of {e['thread']} raised "
                                                          f"{e['error']}" for e in raised))
                missed.unlink()
            if leftovers:
                out.notes.append(f"worker {out.workers} left {len(leftovers)} process(es) running, killed: "
                                 + "; ".join(leftovers))
            extra = []
            events = crashpoints.witness_events(run_dir)[seen:]
            shot = {e.pid for e in events if e.kind == "kill"}  # the process the probe killed, if the harness started it
            victim, victim_rc = next(((p, r) for p, r in procs if p in shot), procs[0])
            if kills_judge.check_worker(out.kill_log, out.kill_problems, out.workers, victim, victim_rc, events):
                if out.kill_log and out.kill_log[-1]["worker"] == out.workers:
                    out.kills += 1
                    dead = next((p["executor"] for p in out.pids if p.get("pid") == victim and p.get("executor")),
                                EXECUTOR)  # the engine identity that died (a K-worker recovery's is its own)
                    out.deliveries.append({"kind": "kill", "worker": out.workers, "pid": victim,
                                           "crash_point": out.kill_log[-1]["crash_point"]})
                phase = "start" if _unsubmitted(target, run_dir) else "recover"
                continue
            if rc == UNSUPPORTED_RC:
                text = log.read_text(errors="replace") if log.exists() else ""
                raise TargetUnsupported(next((x for x in text.splitlines() if x.startswith("unsupported:")),
                                             "unsupported by this engine release"))
            if rc != 0:
                tail = _log_tail(log)
                raise EngineCrashed(f"worker {out.workers} exited with {rc} (not a harness kill): " + " | ".join(tail))
            if not (run_dir / THREADS_FILE).exists():
                tail = _log_tail(log)
                raise EngineCrashed(f"worker {out.workers} exited with 0 without writing its report ({THREADS_FILE}): "
                                    "its pass did not finish (the team's code ending the process, os._exit or "
                                    "sys.exit, does this)" + "".join(f" | {x}" for x in tail))
            threads = json.loads((run_dir / THREADS_FILE).read_text())
            reported = threads
            for thread, status in threads.items():
                for error in () if pair else status.get("invoke_errors", ()):
                    out.notes.append(f"thread {thread} (worker {out.workers}): invoke raised {error}")
                if status.get("trap"):
                    out.notes.append(f"thread {thread} (worker {out.workers}): {status['trap']}")
            for e in raised:  # both processes of a duplicate: threads.json holds only the last one's report
                out.notes.append(f"thread {e['thread']} (worker {out.workers}, pid {e['pid']} of the duplicated "
                                 f"{phase}): invoke raised {e['error']}")
            lost = [t for t, s in threads.items() if s["status"] == "no_checkpoint"]
            if lost:
                last = (crashpoints.fired_points(run_dir) or ["?"])[-1]
                for thread in lost:
                    out.notes.append(f"thread {thread} had no checkpoint after the kill at {last}: its "
                                     "start request was lost; crashpoint submitted it again, as its caller would")
                    out.deliveries.append({"kind": "resubmit", "thread": thread})
                    extra += ["--resubmit", thread]
                phase = "start"
                continue
            just_deployed = False
            running = any(s["status"] in ("waiting", "running") for s in threads.values())
            if case.server_crash and server is not None and not server_crashed and running:
                server_crashed = True  # a server crash while workflows wait: SIGKILL, a new one on the same database
                old = server.pids[-1]
                server.restart()
                out.deliveries.append({"kind": "server_crash", "worker": out.workers, "killed": old,
                                       "pid": server.pids[-1]})
                out.notes.append(f"the Temporal server (pid {old}) was SIGKILLed after worker {out.workers} and a new "
                                 f"one (pid {server.pids[-1]}) started on the same database")
            if case.deploy and not deployed and running:
                deployed, just_deployed = case.deploy, True  # a code deploy while workflows wait
                out.deliveries.append({"kind": "deploy", "version": deployed, "worker": out.workers})
                out.notes.append(f"deployed version {deployed} after worker {out.workers}: every later worker runs it")
            pending = []
            for thread, status in threads.items():
                waiting = status.get("waiting", ())
                late = due.get(thread) or []
                if late and not any(w["interrupt"] == late[0]["after"] for w in waiting):
                    # the answer before it took effect: now the late one arrives, to whatever the thread waits on
                    held = late.pop(0)
                    iid = waiting[0]["interrupt"] if waiting else None
                    item = {"thread": thread, "interrupt": iid, "resume": held["answer"]["resume"],
                            "node": held["node"], "late": True}
                    ledger.record_decision(f"{thread}@{held['node']}", bool(held["answer"]["grants"]), LATE_BY,
                                           time.time())
                    if iid is not None:
                        delivered[iid] = item
                    out.deliveries.append({"kind": "late_answer", "thread": thread, "node": held["node"],
                                           "to": waiting[0]["node"] if waiting else None,
                                           "thread_status": status["status"], "resume": item["resume"]})
                    pending.append(item)
                    continue
                for wait in waiting:
                    iid, node = wait["interrupt"], wait["node"]
                    if iid in delivered:
                        redelivered[iid] = redelivered.get(iid, 0) + 1
                        if redelivered[iid] > MAX_REDELIVERIES:
                            out.notes.append(f"thread {thread}: interrupt {iid} of {node} still waits after its "
                                             f"answer was delivered {redelivered[iid]} times")
                            continue
                        out.notes.append(f"thread {thread}: the answer to {node}'s interrupt was lost with a kill "
                                         "(it waits on the same interrupt again); delivered again")
                        out.deliveries.append({"kind": "redeliver", "thread": thread, "node": node})
                        pending.append(delivered[iid])
                        continue
                    queue = answers.get(node, [])
                    given = next_answer.get((thread, node), 0)
                    if given >= len(queue):
                        continue  # the human never answers (more): the thread ends waiting
                    answer, lates = queue[given], []
                    while answer.get("late"):  # it arrives after the next one (validated: a next one exists)
                        lates.append(answer)
                        given += 1
                        answer = queue[given]
                    next_answer[(thread, node)] = given + 1
                    due.setdefault(thread, []).extend({"answer": a, "node": node, "after": iid} for a in lates)
                    ledger.record_decision(f"{thread}@{node}", bool(answer["grants"]), "crashpoint", time.time())
                    item = {"thread": thread, "interrupt": iid, "resume": answer["resume"], "node": node}
                    delivered[iid] = item
                    out.deliveries.append({"kind": "answer", "thread": thread, "node": node,
                                           "grants": bool(answer["grants"]), "resume": answer["resume"]})
                    pending.append(item)
            if just_deployed and not pending:
                phase = "recover"  # a worker of the new code meets the waiting workflows
                continue
            if not pending:
                if case.deploy and not deployed:
                    raise EngineCrashed(f"the deploy of {case.deploy} never happened: no workflow was still running "
                                        "when the run came to rest (this run did not test it)")
                if case.server_crash and not server_crashed:
                    raise EngineCrashed("the server crash never happened: no workflow was still running when the run "
                                        "came to rest (this run did not test it)")
                out.threads = threads
                break
            (run_dir / "answers.json").write_text(json.dumps(pending, sort_keys=True))
            phase = "answer"
        else:
            raise EngineCrashed(f"{MAX_WORKERS_PER_RUN} worker processes without the run coming to rest")
    except WorkerTimeout as exc:
        out.over_budget = str(exc)
        path = run_dir / THREADS_FILE  # the worker that ran over wrote none, as a rule: the last report then
        out.threads = json.loads(path.read_text()) if path.exists() else reported
    finally:
        if server is not None:
            server.kill()  # SIGKILL of its group, the pid checked gone
        out.calls = read_calls(ledger)
        out.outside = outside_calls(run_dir)
        out.faults_missed = missed_faults(ledger, case.faults)
        out.decisions = ledger.decisions()
        ledger.close()
        out.crash_points = crashpoints.passed(run_dir)
        out.fired = crashpoints.fired_points(run_dir)
        out.steps = _steps(run_dir)
        out.engine_facts = ENGINE_FACTS[target.engine](run_dir) if target.engine in ENGINE_FACTS else {}
        if drop_database is not None:
            try:
                drop_database()
            except Exception as exc:  # the verdict stands; the leftover database is worth a note
                out.notes.append(f"the run's database was not dropped: {exc}")
        out.wall_s = time.monotonic() - began
    return out


def _unsubmitted(target: Target, run_dir: Path) -> bool:
    path = run_dir / "submitted.log"
    done = set(path.read_text().splitlines()) if path.exists() else set()
    return any(i["thread"] not in done for i in target.inputs)


def _steps(run_dir: Path) -> list[tuple[int, str, int | None, str]]:
    path = run_dir / "steps.log"
    rows = []
    for line in path.read_text().splitlines() if path.exists() else ():
        pid, thread, step, node = line.split(" ", 3)
        rows.append((int(pid), thread, None if step == "None" else int(step), node))
    return rows
