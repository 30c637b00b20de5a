"""One run of a target: the team's code in worker processes, a real SIGKILL at a crash point, recovery.

A run happens in its own folder. The driver writes the target (``target.json``) and the case's tool
faults (the ledger's script), then alternates worker processes of the target's engine (its worker module,
:attr:`~crashpoint.harness.engines.base.Engine.worker_module`) with what the outside world does; whatever depends on
the engine it asks the engine object (:class:`~crashpoint.harness.engines.base.Engine`: its server, its workers'
identities, its run database, its facts), and names none:

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
clicking twice would (an engine with :attr:`~crashpoint.harness.engines.base.Engine.rendezvous` holds the two
together inside a step). A case with ``workers: K`` recovers with K workers at once, each with an identity of its
own (an engine with :attr:`~crashpoint.harness.engines.base.Engine.worker_identities`); a case with ``deploy`` runs
the next version of the code once workflows wait; a case with ``server_crash`` SIGKILLs the engine's server then
(an engine with :attr:`~crashpoint.harness.engines.base.Engine.server`).

:func:`run_target` is a short loop of these phases, each a method of :class:`_Run`. Workers are forked from a warm
zygote that imported the engine's worker module and the team's module (see
:mod:`crashpoint.harness.process.forkserver`), or started as new interpreters (``warm=False``, the naive way).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
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
from crashpoint.harness.engines.effects import (ensure_schema, outside_calls, read_calls, read_parents, unobserved,
                                                unseen_processes)
from crashpoint.harness.load.target import Target, TargetCase
from crashpoint.harness.engines.workerlib import PIDS_FILE, RENDEZVOUS_MISSED_FILE, TARGET_FILE, THREADS_FILE, UNSUPPORTED_RC
from crashpoint.harness.engines.workerlib import invoke_errors, unwrapped_effects
from crashpoint.harness.engines.base import Engine, EngineServer, engine_for
from crashpoint.harness.engines.effects import RATE_LIMIT_DEFAULT_S, SLOW_DEFAULT_S
from crashpoint.harness.faults import kinds as fault_kinds
from crashpoint.harness.faults.kinds.tool import TIMED_OUTCOMES, placed
from crashpoint.harness.model.points import THEN, WITH

#: ``server`` values of :func:`run_target`, for an engine with a server (:meth:`~crashpoint.harness.engines.base.
#: Engine.server_for`): ``shared`` (the run's part of a long-lived shared server; a case with a server crash gets one
#: of its own), ``run`` (a server of the run's own), ``worker`` (a new server on the run's state before every worker:
#: a benchmark's baseline, what crashpoint's adapters do).
SERVER_MODES = ("shared", "run", "worker")


class TargetUnsupported(Unsupported):
    """The engine release installed lacks what the run needs (a durability mode), or the engine a capability a fault
    of the case needs: the verdict is ``unsupported``."""


#: Worker processes per run before the harness gives up on a loop that makes no progress.
MAX_WORKERS_PER_RUN = 40
#: Times one interrupt may get its answer again before the run is called stuck.
MAX_REDELIVERIES = 3




class _WarmServer(forkserver.ForkServer):
    """A zygote that preloads the engine's worker module, with the target's ``pythonpath`` on its ``sys.path``; the
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
        server = _WarmServer(target.pythonpath, engine_for(target.engine).worker_module)
    servers[key] = server
    while len(servers) > MAX_WARM_PER_THREAD:
        servers.pop(next(iter(servers))).close()
    return server


def _warm_up(server: forkserver.ForkServer, timeout_s: float) -> None:
    """Wait until ``server`` (a zygote, cold: importing an engine takes seconds under load) forks: it runs
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


def script_faults(ledger: Ledger, faults: list[dict[str, Any]]) -> list[int | None]:
    """Queue a case's tool faults (``{kind: tool, tool: EFFECT, call, outcome, times, seconds?}``, see
    :mod:`crashpoint.harness.faults.kinds.tool`) on the ledger's script, each at its ``call``
    (:func:`~crashpoint.harness.faults.kinds.tool.placed`: the calls before it succeed), one row per call. Returns the
    owner of each row, in order: the fault's index in ``faults``, or ``None`` for a call that succeeds."""
    owners = []
    for entry, index in placed(faults):
        if index is None:
            ledger.script(entry["tool"], "success")
        else:
            default_s = SLOW_DEFAULT_S if entry["outcome"] == "slow" else RATE_LIMIT_DEFAULT_S
            seconds = float(entry.get("seconds", default_s)) if entry["outcome"] in TIMED_OUTCOMES else None
            ledger.script(entry["tool"], entry["outcome"], times=1, seconds=seconds)
        owners.append(index)
    return owners


def missed_faults(ledger: Ledger, faults: list[dict[str, Any]], owners: list[int | None]) -> list[str]:
    """The tool faults (queued by :func:`script_faults`, whose ``owners`` it returned) none of whose ``times`` scripted
    calls were made, each as ``"EFFECT OUTCOME"``: the fault never fired (its effect was never called that often, or
    is misspelt)."""
    rows = [r["consumed"] for r in ledger.db.execute("SELECT consumed FROM script ORDER BY seq")]
    fired = {owner for owner, consumed in zip(owners, rows) if owner is not None and consumed}
    return [f"{f['tool']} {f['outcome']}" for n, f in enumerate(faults) if n not in fired]


def kill_schedule(case: TargetCase, crash_point: str | None) -> str | None:
    """The kills of a run of ``case`` as one schedule (``"A >> B"``): the case's own kill faults first, then those of
    ``crash_point`` (a sweep's crash point or pair), each during the recovery from the one before; ``None``: none.
    ``crash_point``'s race (``"A with P held"``) is kept, with its point named (``"... with P held until A"``), so
    that the probe forces it whatever kills come first."""
    spec = crashpoints.parse(crash_point)
    kills = THEN.join([*case.injection().kills, *spec.kills]) or None
    if kills and spec.race is not None:
        kills += f"{WITH}{spec.race[0]} held until {spec.race[1]}"
    return kills


#: The identity of a run's workers when one at a time, for an engine whose workers have identities (a restarted
#: process keeps its identity).
EXECUTOR = "crashpoint-executor"


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


@dataclass
class _Turn:
    """One turn of a run: the worker process(es) of one phase, started together, and how they ended.

    Attributes:
        phase: ``start``, ``recover`` or ``answer``. ``rc`` / ``log``: the exit status and log of the process that
            stands for the turn (a killed one, else one that failed, else the main one). ``leftovers``: processes
            they left running (killed). ``procs``: ``(pid the harness started, its exit status)`` of every process.
        pair: the two processes of a duplicated request. ``seen``: the probe's witness events before the turn.
    """

    phase: str
    rc: int
    log: Path
    leftovers: list[str]
    procs: list[tuple[int | None, int]]
    pair: bool
    seen: int


class _Run:
    """One run of a case in its folder: its state across worker turns and one method per phase (see
    :func:`run_target`); whatever depends on the engine, it asks ``self.engine``."""

    def __init__(self, target: Target, case: TargetCase, durability: str, run_dir: Path, crash_point: str | None,
                 warm: bool, write_latency_ms: float, mode: str) -> None:
        self.began = time.monotonic()
        self.target, self.case, self.durability, self.crash_point = target, case, durability, crash_point
        self.warm, self.mode = warm, mode
        self.engine: Engine = engine_for(target.engine)
        self.run_dir = run_dir = Path(run_dir).resolve()  # the workers' RUN_MARKER: the reaper matches resolved folders
        earlier = [name for name in (TARGET_FILE, LEDGER_FILE, PIDS_FILE) if (run_dir / name).exists()]
        earlier += [str(w) for w in [crashpoints.witness_dir(run_dir)] if w.exists()]  # its crash log, beside it
        if earlier:  # its ledger, checkpoints and crash logs would stand for this run's (a finished thread runs nothing)
            raise UsageError(f"{run_dir}: holds an earlier run ({', '.join(earlier)}); a run needs a folder of its own")
        run_dir.mkdir(parents=True, exist_ok=True)
        self.out = TargetOutcome(case.name, durability, crash_point, run_dir)
        data = target.to_data() | {"write_latency_ms": write_latency_ms}
        self.drop_database = self.engine.run_database(data, run_dir)
        (run_dir / TARGET_FILE).write_text(json.dumps(data, sort_keys=True))
        self.ledger = Ledger(run_dir / LEDGER_FILE, synchronous="OFF")
        ensure_schema(self.ledger)
        self.injected = case.injection()  # what the case's faults inject (its kill faults: in self.kills)
        # a crash spec's "A >> K workers" (a sweep's two-worker recovery): K workers recover at once after each kill
        self.injected.together = max(self.injected.together, crashpoints.parse(crash_point).together)
        self.kills = kill_schedule(case, crash_point)
        self.owners = script_faults(self.ledger, self.injected.tool_faults)
        self.answers = target.answers(case)
        self.next_answer: dict[tuple[str, str], int] = {}  # (thread, node) -> answers given: each gets the node's list
        self.delivered: dict[str, dict[str, Any]] = {}
        self.redelivered: dict[str, int] = {}
        self.due: dict[str, list[dict[str, Any]]] = {}  # thread -> late answers, each delivered once ``after`` is answered
        self.phase, self.extra = "start", []
        self.duplicated: set[str] = set()  # the requests (phases) delivered twice so far
        self.identities: list[str] = [EXECUTOR]  # engine identities used so far
        self.dead = EXECUTOR  # the engine identity of the last worker killed
        self.deadline = self.began + target.budget_s
        self.shared = mode == "shared" and not self.injected.server_crash
        self.server: EngineServer | None = self.engine.server_for(run_dir, mode, self.injected.server_crash)
        self.deployed: str | None = None  # the version of the code new workers run after the case's deploy fault
        self.server_crashed = False
        self.reported: dict[str, Any] = {}  # the last worker report read (threads.json)

    # -------------------------------------------------------------- start

    def start_server(self) -> None:
        """Start the engine's server for the run (an engine with one), recorded as a delivery."""
        server = self.server
        if server is not None:
            server.start()
            self.out.deliveries.append({"kind": "server", "address": server.address, "pid": server.pids[-1],
                                        "namespace": server.namespace, "shared": self.shared,
                                        **({"database": str(server.database)} if hasattr(server, "database") else {})})

    def launch(self) -> _Turn:
        """Run the worker process(es) of this phase (``start``, ``recover`` or ``answer``): one, K recovering at once
        (:meth:`_several`), or the two of a duplicated request (:meth:`_duplicate`).

        Raises:
            WorkerTimeout: the run's budget is spent, or a worker ran past it.
        """
        out, run_dir = self.out, self.run_dir
        seen = len(crashpoints.witness_events(run_dir))
        code = self.engine.running(self.target, self.deployed)  # the code this worker runs (after a deploy: the next)
        pids_before = len(_pids(run_dir))
        argv = ["--run-dir", str(run_dir), "--probe", PROBE_SPEC,
                "--probe-arg", crashpoints.probe_arg(run_dir, self.kills, witness=True),
                "--durability", self.durability, "--phase", self.phase, "--entry", code.entry, *self.extra,
                *[x for thread in self.answers_to_come() for x in ("--answers-to-come", thread)]]
        if self.server is not None:
            if self.mode == "worker" and out.workers > 0:
                self.server.restart()
            argv += self.engine.server_args(self.server)
        if self.deployed:
            argv += ["--version", self.deployed]
        out.workers += 1
        log = run_dir / f"worker-{out.workers:03d}.log"
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise WorkerTimeout(f"over the budget of {self.target.budget_s:g} s")
        env = {**forkserver.ISOLATED_ENV, RUN_MARKER: str(run_dir)}
        for stale in [*run_dir.glob("barrier.*"), *run_dir.glob("rendezvous*")]:  # this phase's processes only
            stale.unlink(missing_ok=True)
        # each worker writes its own report: one left by an earlier worker must not stand for this one's
        (run_dir / THREADS_FILE).unlink(missing_ok=True)
        if self.phase == "recover" and self.injected.together > 1:  # the workers kind (run_target checked the engine)
            return self._several(code, argv, left, env, log, seen, pids_before)
        if self.engine.worker_identities:
            argv += self.engine.identity_args(EXECUTOR, EXECUTOR, self.identities)
        twin = None
        if self.phase in self.injected.duplicates and self.phase not in self.duplicated:  # a request twice, at once
            twin = self._duplicate(code, argv, left, env, log)
        rc, leftovers, started = _launch(code, self.warm, self.engine.worker_module, argv, left, env, log)
        procs = [(started, rc)]  # (pid the harness started, its exit status) of every process of this turn
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
            out.pids += [{"pid": p, "phase": self.phase, "rc": rc, "duplicate": True} for p in pids[pids_before:-1]]
        out.pids.append({"pid": pid, "phase": self.phase, "rc": rc})
        return _Turn(self.phase, rc, log, leftovers, procs, twin is not None, seen)

    def answers_to_come(self) -> list[str]:
        """The threads whose humans still have answers to give (one not delivered yet, or a late one due): with time
        compressed, a deadline such a thread waits on runs as written, so the reviewer answers before it as the
        case says (:meth:`~crashpoint.harness.engines.base.Engine.time_note`)."""
        threads = [i["thread"] for i in self.target.inputs]
        return [t for t in threads if self.due.get(t)
                or any(self.next_answer.get((t, node), 0) < len(queue) for node, queue in self.answers.items())]

    def _duplicate(self, code: Target, argv: list[str], left: float, env: dict[str, str], log: Path) -> Future[Any]:
        """Start the second process of a duplicated request beside the main one (``argv`` gets the barrier, and the
        engine's rendezvous inside a step when it has one); both are forked from warm zygotes at once."""
        self.duplicated.add(self.phase)
        argv += ["--barrier", "2", *(["--rendezvous", "2"] if self.engine.rendezvous else [])]
        twin_args = [*argv, *(["--duplicate"] if self.phase == "start" else [])]
        twin_log = log.with_suffix(".twin.log")
        module = self.engine.worker_module
        if self.warm:  # each helper thread keeps its own warm zygote, so both processes start alike
            ready, go = threading.Event(), threading.Event()
            twin = _helper.submit(_warm_then_run, code, ready, go, module, twin_args, left, env, twin_log)
            _warm_up(warm_server(code), left)
            ready.wait(left)
            go.set()
        else:
            twin = _helper.submit(_launch, code, False, module, twin_args, left, env, twin_log)
        self.out.deliveries.append({"kind": f"duplicate_{self.phase}", "worker": self.out.workers})
        return twin

    def _several(self, code: Target, argv: list[str], left: float, env: dict[str, str], log: Path, seen: int,
                 pids_before: int) -> _Turn:
        """K workers recover at once, at a barrier, each with an identity of its own (``case.recovery``: new ones,
        the dead worker's, or both); each process's exit is recorded under its identity."""
        out, case, engine, k = self.out, self.case, self.engine, self.injected.together
        labels = [f"{EXECUTOR}-{out.kills}.{n}" for n in range(1, k + 1)]
        as_ids = {"explicit": labels, "launch": [self.dead] * k,  # the engine ids they run with
                  "mixed": [self.dead, *labels[1:]]}[case.recovery]
        base = [*argv, "--barrier", str(k)]
        argv, *others = [[*base, *engine.identity_args(lb, ex, self.identities)] for lb, ex in zip(labels, as_ids)]
        logs = [log.with_suffix(f".{n}.log") for n in range(2, k + 1)]
        together = [_helper.submit(_launch, code, self.warm, engine.worker_module, a, left, env, lg)
                    for a, lg in zip(others, logs)]
        self.identities += [n for n in dict.fromkeys(as_ids) if n not in self.identities]
        out.deliveries.append({"kind": "workers", "worker": out.workers, "executors": as_ids,
                               "recovery": case.recovery})
        rc, leftovers, started = _launch(code, self.warm, engine.worker_module, argv, left, env, log)
        procs = [(started, rc)]
        ids = _pid_executors(self.run_dir)[pids_before:]
        results = [(rc, argv, log)] + [(f.result()[0], a, lg) for f, a, lg in zip(together, others, logs)]
        for f in together:
            leftovers += f.result()[1]
            procs.append((f.result()[2], f.result()[0]))
        out.workers += len(together)
        by_label = {ex: p for p, ex in ids}
        for one_rc, one_argv, one_log in results:
            name = one_argv[one_argv.index("--executor-id") + 1]
            as_id = one_argv[one_argv.index("--as-executor") + 1] if "--as-executor" in one_argv else name
            entry = {"pid": by_label.get(name), "phase": self.phase, "rc": one_rc, "executor": as_id,
                     **({"worker_id": name} if as_id != name else {})}
            out.pids.append(entry)
            if one_rc == -signal.SIGKILL or (rc == 0 and one_rc != 0):
                rc, log = one_rc, one_log
        return _Turn(self.phase, rc, log, leftovers, procs, False, seen)

    # -------------------------------------------------------------- kill and verify

    def kill_landed(self, turn: _Turn) -> bool:
        """Record what the turn's processes did beside their reports (a rendezvous, a duplicate that never
        overlapped, processes left running), then verify the harness's kill
        (:func:`~crashpoint.harness.process.kills.check_worker`). ``True``: a worker was killed (verified or not:
        what was not goes to ``kill_problems``), the next phase set (``start`` while inputs remain unsubmitted, else
        ``recover``)."""
        out, run_dir = self.out, self.run_dir
        met = {int(p.name.split(".", 1)[1]): sorted(int(x) for x in p.read_text().split())
               for p in sorted(run_dir.glob("rendezvous-ok.*"))}
        if met:  # who verified whom inside the step (a duplicated request's processes)
            out.deliveries.append({"kind": "rendezvous", "worker": out.workers, "met": met})
        # each process's own invoke errors (threads.json keeps the report of the last process of a duplicate)
        self.raised = invoke_errors(run_dir, {p for p, _ in turn.procs}) if turn.pair else []
        missed = run_dir / RENDEZVOUS_MISSED_FILE
        if missed.exists():
            out.not_tested.append(f"the duplicate {turn.phase} never overlapped: pid(s) "
                                  f"{' '.join(missed.read_text().split())} met no other live process inside the step "
                                  "(two processes at once were not tested)"
                                  + "".join(f"; pid {e['pid']}'s invoke of {e['thread']} raised {e['error']}"
                                            for e in self.raised))
            missed.unlink()
        if turn.leftovers:
            out.notes.append(f"worker {out.workers} left {len(turn.leftovers)} process(es) running, killed: "
                             + "; ".join(turn.leftovers))
        self.extra = []
        events = crashpoints.witness_events(run_dir)[turn.seen:]
        shot = {e.pid for e in events if e.kind == "kill"}  # the process the probe killed, if the harness started it
        victim, victim_rc = next(((p, r) for p, r in turn.procs if p in shot), turn.procs[0])
        if not kills_judge.check_worker(out.kill_log, out.kill_problems, out.workers, victim, victim_rc, events):
            return False
        if out.kill_log and out.kill_log[-1]["worker"] == out.workers:
            out.kills += 1
            self.dead = next((p["executor"] for p in out.pids if p.get("pid") == victim and p.get("executor")),
                             EXECUTOR)  # the engine identity that died (a K-worker recovery's is its own)
            out.deliveries.append({"kind": "kill", "worker": out.workers, "pid": victim,
                                   "crash_point": out.kill_log[-1]["crash_point"]})
            self.deploy_at(out.kill_log[-1]["crash_point"])
        self.phase = "start" if _unsubmitted(self.target, run_dir) else "recover"
        return True

    def report(self, turn: _Turn) -> dict[str, Any]:
        """The worker's report (``threads.json``: thread -> status) of a turn no kill ended, its invoke errors and
        traps noted.

        Raises:
            TargetUnsupported: the worker said the engine release lacks what the run needs.
            EngineCrashed: it exited otherwise than 0, or without its report.
        """
        out, run_dir = self.out, self.run_dir
        if turn.rc == UNSUPPORTED_RC:
            text = turn.log.read_text(errors="replace") if turn.log.exists() else ""
            raise TargetUnsupported(next((x for x in text.splitlines() if x.startswith("unsupported:")),
                                         "unsupported by this engine release"))
        if turn.rc != 0:
            tail = _log_tail(turn.log)
            raise EngineCrashed(f"worker {out.workers} exited with {turn.rc} (not a harness kill): " + " | ".join(tail))
        if not (run_dir / THREADS_FILE).exists():
            tail = _log_tail(turn.log)
            raise EngineCrashed(f"worker {out.workers} exited with 0 without writing its report ({THREADS_FILE}): "
                                "its pass did not finish (the team's code ending the process, os._exit or "
                                "sys.exit, does this)" + "".join(f" | {x}" for x in tail))
        threads = json.loads((run_dir / THREADS_FILE).read_text())
        self.reported = threads
        for thread, status in threads.items():
            for error in () if turn.pair else status.get("invoke_errors", ()):
                out.notes.append(f"thread {thread} (worker {out.workers}): invoke raised {error}")
            if status.get("trap"):
                out.notes.append(f"thread {thread} (worker {out.workers}): {status['trap']}")
        for e in self.raised:  # both processes of a duplicate: threads.json holds only the last one's report
            out.notes.append(f"thread {e['thread']} (worker {out.workers}, pid {e['pid']} of the duplicated "
                             f"{turn.phase}): invoke raised {e['error']}")
        return threads

    # -------------------------------------------------------------- resubmit a lost start

    def resubmit_lost(self, threads: dict[str, Any]) -> bool:
        """Threads with no checkpoint after a kill (their start request was lost) are submitted again by the next
        ``start`` worker, as their caller would; ``True`` when there were some."""
        lost = [t for t, s in threads.items() if s["status"] == "no_checkpoint"]
        if not lost:
            return False
        last = (crashpoints.fired_points(self.run_dir) or ["?"])[-1]
        for thread in lost:
            self.out.notes.append(f"thread {thread} had no checkpoint after the kill at {last}: its "
                                  "start request was lost; crashpoint submitted it again, as its caller would")
            self.out.deliveries.append({"kind": "resubmit", "thread": thread, "after_gseq": self.ledger.last_gseq()})
            self.extra += ["--resubmit", thread]
        self.phase = "start"
        return True

    # -------------------------------------------------------------- server crash, deploy code

    def crash_server(self, running: bool) -> None:
        """A case's server crash, once, while workflows wait: SIGKILL of the engine's server and a new one on the
        same durable state (:meth:`~crashpoint.harness.engines.base.Engine.crash_server`, given the run's remaining
        budget)."""
        server = self.server
        if not (self.injected.server_crash and server is not None and not self.server_crashed and running):
            return
        self.server_crashed = True
        old = server.pids[-1]
        self.engine.crash_server(server, self.deadline - time.monotonic())
        self.out.deliveries.append({"kind": "server_crash", "worker": self.out.workers, "killed": old,
                                    "pid": server.pids[-1]})
        self.out.notes.append(f"the {self.engine.title} server (pid {old}) was SIGKILLed after worker "
                              f"{self.out.workers} and a new one (pid {server.pids[-1]}) started on the same database")

    def deploy(self, running: bool) -> bool:
        """A case's code deploy, once, while workflows wait: every later worker runs the version; ``True`` when it
        happened now."""
        if not (self.injected.deploy and not self.injected.deploy_at and not self.deployed and running):
            return False
        self.deployed = self.injected.deploy
        self.out.deliveries.append({"kind": "deploy", "version": self.deployed, "worker": self.out.workers})
        self.out.notes.append(f"deployed version {self.deployed} after worker {self.out.workers}: every later worker "
                              "runs it")
        return True

    def deploy_at(self, point: str) -> None:
        """A case's deploy at a crash point (``{kind: deploy, version, at}``): the kill at ``point`` stopped the worker
        of the old code there; every later worker runs the version."""
        if self.injected.deploy_at != point or self.deployed:
            return
        self.deployed = self.injected.deploy
        self.out.deliveries.append({"kind": "deploy", "version": self.deployed, "worker": self.out.workers,
                                    "at": point})
        self.out.notes.append(f"deployed version {self.deployed} at {point}: worker {self.out.workers}, running the old "
                              "code, was stopped there (SIGKILL); every later worker runs it")

    # -------------------------------------------------------------- answer a human

    def answer(self, threads: dict[str, Any]) -> list[dict[str, Any]]:
        """The answers to deliver now, each recorded (decisions in the ledger first): a late answer whose turn came,
        an answer lost with a kill again, the next scripted answer to each interrupt waiting."""
        pending = []
        for thread, status in threads.items():
            waiting = status.get("waiting", ())
            late = self.due.get(thread) or []
            if late and not any(w["interrupt"] == late[0]["after"] for w in waiting):
                pending.append(self._late(thread, status, late.pop(0)))
                continue
            for wait in waiting:
                item = self._answer_wait(thread, wait)
                if item is not None:
                    pending.append(item)
        return pending

    def _late(self, thread: str, status: dict[str, Any], held: dict[str, Any]) -> dict[str, Any]:
        """The answer before it took effect: now the late one arrives, to whatever the thread waits on."""
        waiting = status.get("waiting", ())
        iid = waiting[0]["interrupt"] if waiting else None
        item = {"thread": thread, "interrupt": iid, "resume": held["answer"]["resume"], "node": held["node"],
                "late": True}
        self.ledger.record_decision(f"{thread}@{held['node']}", bool(held["answer"]["grants"]), LATE_BY, time.time())
        if iid is not None:
            self.delivered[iid] = item
        self.out.deliveries.append({"kind": "late_answer", "thread": thread, "node": held["node"],
                                    "to": waiting[0]["node"] if waiting else None,
                                    "thread_status": status["status"], "resume": item["resume"]})
        return item

    def _answer_wait(self, thread: str, wait: dict[str, Any]) -> dict[str, Any] | None:
        """What one waiting interrupt gets: its answer again (lost with a kill), the node's next answer, or nothing
        (the human never answers more; or redelivered :data:`MAX_REDELIVERIES` times already)."""
        out = self.out
        iid, node = wait["interrupt"], wait["node"]
        if iid in self.delivered:
            self.redelivered[iid] = self.redelivered.get(iid, 0) + 1
            if self.redelivered[iid] > MAX_REDELIVERIES:
                out.notes.append(f"thread {thread}: interrupt {iid} of {node} still waits after its "
                                 f"answer was delivered {self.redelivered[iid]} times")
                return None
            out.notes.append(f"thread {thread}: the answer to {node}'s interrupt was lost with a kill "
                             "(it waits on the same interrupt again); delivered again")
            out.deliveries.append({"kind": "redeliver", "thread": thread, "node": node})
            return self.delivered[iid]
        queue = self.answers.get(node, [])
        given = self.next_answer.get((thread, node), 0)
        if given >= len(queue):
            return None  # the human never answers (more): the thread ends waiting
        answer, lates = queue[given], []
        while answer.get("late"):  # it arrives after the next one (validated: a next one exists)
            lates.append(answer)
            given += 1
            answer = queue[given]
        self.next_answer[(thread, node)] = given + 1
        self.due.setdefault(thread, []).extend({"answer": a, "node": node, "after": iid} for a in lates)
        self.ledger.record_decision(f"{thread}@{node}", bool(answer["grants"]), "crashpoint", time.time())
        item = {"thread": thread, "interrupt": iid, "resume": answer["resume"], "node": node}
        self.delivered[iid] = item
        out.deliveries.append({"kind": "answer", "thread": thread, "node": node,
                               "grants": bool(answer["grants"]), "resume": answer["resume"]})
        return item

    def deliver(self, pending: list[dict[str, Any]]) -> None:
        """Hand ``pending`` to the next worker, an ``answer`` one."""
        (self.run_dir / "answers.json").write_text(json.dumps(pending, sort_keys=True))
        self.phase = "answer"

    # -------------------------------------------------------------- the end

    def rest(self, threads: dict[str, Any]) -> None:
        """The run came to rest: ``threads`` is its end.

        A case's deploy or server crash that never happened (no workflow was still running when the run came to
        rest) is a fault that never fired (``faults_missed``: a golden run tested nothing of it), and for a crash run
        something it did not test (``not_tested``: an ``error``).
        """
        missed = []
        if self.injected.deploy_at and not self.deployed:
            self.out.faults_missed.append(f"deploy of {self.injected.deploy} at {self.injected.deploy_at} (the run "
                                          "never passed it)")
        elif self.injected.deploy and not self.deployed:
            missed.append(f"deploy of {self.injected.deploy}")
        if self.injected.server_crash and not self.server_crashed:
            missed.append("server crash")
        for what in missed:
            self.out.faults_missed.append(f"{what} (no workflow was still running when the run came to rest)")
            if self.crash_point:
                self.out.not_tested.append(f"the {what} never happened: no workflow was still running when the run "
                                           "came to rest (this run did not test it)")
        self.out.threads = threads

    def over_budget(self, exc: WorkerTimeout) -> None:
        """The run ran past its budget: the last report stands for its end."""
        self.out.over_budget = str(exc)
        path = self.run_dir / THREADS_FILE  # the worker that ran over wrote none, as a rule: the last report then
        self.out.threads = json.loads(path.read_text()) if path.exists() else self.reported

    def finish(self) -> None:
        """Kill the server (SIGKILL of its group, the pid checked gone), read what the run left (ledger, crash log,
        steps, the engine's facts), drop the run's database."""
        out, run_dir = self.out, self.run_dir
        if self.server is not None:
            self.server.kill()
            notes, untested = self.engine.server_notes(self.server)
            out.notes += notes
            out.not_tested += untested
        out.calls = read_calls(self.ledger)
        out.outside = outside_calls(run_dir) + unwrapped_effects(run_dir)  # + an effects: entry held by name
        out.notes += unseen_processes(run_dir)  # processes started without the run's marker: their effects unseen
        out.unobserved = unobserved(run_dir, self.target.outside_ledger)  # ... and not said to make none: an error
        out.fired = crashpoints.fired_points(run_dir)
        own = self.injected.kills  # the case's own kills, which fire first
        out.faults_missed[:0] = missed_faults(self.ledger, self.injected.tool_faults, self.owners) + \
            [f"kill at {k}" for k in own[len(out.fired):]]
        out.decisions = self.ledger.decisions()
        out.parents = read_parents(self.ledger)  # child workflows: an approval of an ancestor gates their effects
        self.ledger.close()
        out.crash_points = crashpoints.passed(run_dir)
        out.steps = _steps(run_dir)
        out.engine_facts = self.engine.facts(run_dir)
        out.races = crashpoints.races(run_dir)
        out.notes += race_notes(self.crash_point, out.races, out.crash_points)
        out.notes += self.engine.notes(out)
        if self.drop_database is not None:
            try:
                self.drop_database()
            except Exception as exc:  # the verdict stands; the leftover database is worth a note
                out.notes.append(f"the run's database was not dropped: {exc}")
        out.wall_s = time.monotonic() - self.began


def run_target(target: Target, case: TargetCase, durability: str, run_dir: Path, crash_point: str | None = None,
               *, warm: bool = True, write_latency_ms: float = 0.0, server: str = "shared") -> TargetOutcome:
    """Run ``case`` of ``target`` once in ``run_dir`` (new, or holding no earlier run), killing a worker at ``crash_point``.

    ``crash_point`` is a crash point id or a schedule ``"A >> B"`` (kill at A, then at B during the
    recovery). ``server`` (an engine with a server; :data:`SERVER_MODES`): ``shared`` (the default) gives the run
    its part of a long-lived shared server (a case with a server crash gets a server of its own), ``run`` a server of
    its own for the whole run, ``worker`` a new server on the run's state before every worker (a benchmark's
    baseline). ``write_latency_ms`` delays every checkpoint write of the engine (after the probe's point before it),
    widening the window in which an ``async`` write is in flight.

    The phases, each a method of :class:`_Run`: start (the server, then a ``start`` worker), kill and verify, recover
    (a new worker), resubmit a lost start, answer a human, deploy code, server crash; the run ends when a worker exits
    with nothing left to deliver. A kill that cannot be verified is in the outcome's ``kill_problems`` (the verdict
    is ``error``).

    Raises:
        EngineCrashed: a worker died in a way the harness did not cause, or :data:`MAX_WORKERS_PER_RUN`
            workers did not bring the run to rest.
        TargetUnsupported: the engine release lacks what the run needs (a durability mode), or the engine a
            capability a fault kind of the case needs (:func:`crashpoint.harness.faults.kinds.lacking`: a server
            crash on an engine without a server, several workers on one whose workers have no identities).
        UsageError: ``run_dir`` holds an earlier run's files (``target.json``, the ledger, ``pids.log``), or its
            crash log (``RUN_DIR.probe``, :func:`~crashpoint.harness.process.crashpoints.witness_dir`) is there.
        ValueError: ``server`` is not one of :data:`SERVER_MODES`.
    """
    if server not in SERVER_MODES:
        raise ValueError(f"server must be one of {', '.join(SERVER_MODES)}, got {server!r}")
    engine = engine_for(target.engine)
    together = crashpoints.parse(crash_point).together  # a crash spec's "A >> K workers": the workers kind
    missing = fault_kinds.lacking([*case.faults, *([{"kind": "workers", "count": together}] if together > 1 else [])],
                                  engine.capabilities())
    if missing:  # it would run without the fault: a pass not earned
        raise TargetUnsupported(f"engine {engine.name} cannot inject the case's faults: {'; '.join(missing)}")
    run = _Run(target, case, durability, run_dir, crash_point, warm, write_latency_ms, server)
    try:
        run.start_server()
        for _ in range(MAX_WORKERS_PER_RUN):
            turn = run.launch()
            if run.kill_landed(turn):
                continue  # recover (or start what was never submitted)
            threads = run.report(turn)
            if run.resubmit_lost(threads):
                continue
            running = any(s["status"] in ("waiting", "running") for s in threads.values())
            run.crash_server(running)
            deployed_now = run.deploy(running)
            pending = run.answer(threads)
            if pending:
                run.deliver(pending)
            elif deployed_now:
                run.phase = "recover"  # a worker of the new code meets the waiting workflows
            else:
                run.rest(threads)
                break
        else:
            raise EngineCrashed(f"{MAX_WORKERS_PER_RUN} worker processes without the run coming to rest")
    except WorkerTimeout as exc:
        run.over_budget(exc)
    finally:
        run.finish()
    return run.out


def race_notes(crash_point: str | None, races: list[dict[str, Any]], passed: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The notes of a crash spec's race (``"A with P held until Q"``): held until ``Q`` came (the interleaving was
    forced), held until the run's limit with no ``Q`` (the engine waited for the held thread: it does not race there),
    ``P`` passed before ``Q`` came but the SIGKILL at ``Q`` landed before ``P``'s thread was held (forced all the same:
    that thread went no further), or never reached ``P`` (not tried).

    Args:
        crash_point: the run's crash spec. races: :func:`crashpoints.races` of the run folder. passed: the crash point
            ids the run passed, in order (:func:`crashpoints.passed`).
    """
    spec = crashpoints.parse(crash_point)
    if spec.race is None:
        return []
    held, until = spec.race
    mine = [r for r in races if r["held"] == held]
    order = list(passed)
    if not mine and held in order and until in order and order.index(held) < order.index(until) \
            and until in spec.kills:
        return [f"race forced: {held} passed before the kill at {until}, which landed before that thread was held "
                "(it went no further)"]
    if not mine:
        return [f"race not held: no thread reached {held} before {until} came (the interleaving came by itself, or "
                "not at all)"]
    r = mine[0]
    if r["end"] == "timeout":
        return [f"race not forced: {held} was held {r['seconds']:g} s and {until} never came meanwhile (the engine "
                "waited for the held thread there)"]
    return [f"race forced: {held} held (pid {r['pid']}) until {until} came"
            + (f" ({r['seconds']:.3f} s)" if r["seconds"] is not None else ", and the process was killed there")]


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
