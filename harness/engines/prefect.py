"""Prefect targets: the harness side (the Prefect server the runs share, the rules over what Prefect promises);
the worker does the rest.

The worker is :mod:`crashpoint.harness.engines.prefect_worker` (it imports prefect; this module does not). A Prefect
flow run's state lives in a Prefect API server (its database, SQLite), and a task's persisted result in a result
storage folder; the flow's process keeps nothing. crashpoint starts **one Prefect server per process** (a sweep, a
pytest process): ``prefect server start`` on a free loopback port, on a copy of a migrated database (a template made
once per machine and Prefect release: a start on it skips the migrations, 6 to 7 of a start's 9 to 16 CPU seconds),
in its own session with ``PR_SET_PDEATHSIG`` (it dies with the thread that started it: no orphan even after a SIGKILL
of the harness), shared by every run and killed (SIGKILL of its group, verified) when the sweep ends. It runs without
Prefect's loop services (``--no-services``: :data:`SERVICES`). A run leases nothing on it: its flow runs carry the
run's tag (on one deployment of the flow per server, its id kept in the server's folder), and its task results go
to a storage folder in the run folder (what separates runs on one Prefect server: measured, four runs at once with
identical parameters, each task body ran once). A case with ``server_crash`` gets a server of its own
(:class:`RunServer`), SIGKILLed and restarted on the same database while its flow runs wait.

Rules over what Prefect promises (the worker records the facts, :func:`facts`), quoted from Prefect's docs:

* ``target.cached_not_rerun``: "If an unexpired record is found, this result is returned and the task does not run"
  (docs.prefect.io/v3/develop/task-caching): a task whose result was persisted under a cache key is not run again
  when its flow run is retried: a later attempt of the same flow run that runs the same task call again (a cache
  miss) is a finding, naming the key the retry computed (a key that changed between attempts: something in the
  task's inputs or ``cache_key_fn`` differs) or the key Prefect did not find.
* ``target.rollback_complete``: "rollbacks occur whenever the transaction a task is participating in fails"
  (docs.prefect.io/v3/advanced/transactions): each rollback hook of a failed transaction runs to its end: a hook
  that raised (Prefect logs it and goes on: what it undoes stays done) is a finding, and so is a rollback that began
  (in a process killed during it) and that no later attempt of the flow run finished or superseded by a commit.

The general rules (at most once per key, approvals before gated effects, the end like the golden run's) hold as for
every engine. See docs/tutorials/prefect.md, "Test your own Prefect flow".
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections import defaultdict
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine, EngineServer, rule
from crashpoint.harness.engines.workerlib import json_lines, kill_group
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.rules import Finding

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.target import Target


class Prefect(Engine):
    """Prefect 3: flow runs of a deployment, their states kept by a Prefect server that outlives killed workers."""

    name: ClassVar[str] = "prefect"
    title: ClassVar[str] = "Prefect"
    worker_module: ClassVar[str] = "crashpoint.harness.engines.prefect_worker"
    packages: ClassVar[tuple[str, ...]] = ("prefect",)
    order: ClassVar[int] = 40
    #: The team's effects, a flow run's state written, a task's result persisted.
    recovery_kinds: ClassVar[tuple[str, ...]] = (*EFFECT_KINDS, "after_flow_state:", "after_result:")
    server: ClassVar[bool] = True
    #: Runs at once per CPU: a run's processes mostly wait, on the server and on a busy machine (a default sweep at 2
    #: runs at once, load 14-17: 61 runs in 373.6 s of wall time for about 50 CPU s of the harness and its workers
    #: and 41 of the server).
    workers_per_cpu: ClassVar[int | None] = 2
    options_key: ClassVar[str | None] = "prefect"
    retry_hint: ClassVar[str] = "give the task retries (@task(retries=N))"

    def server_for(self, run_dir: Path, mode: str, crash: bool) -> EngineServer | None:
        """The process's shared server (:func:`lease`); a case with a server crash, or ``run`` / ``worker``, a
        :class:`RunServer` of the run's own."""
        if os.environ.get(EXTERNAL_ENV) and mode == "shared" and not crash:
            return External(os.environ[EXTERNAL_ENV])
        if mode == "shared" and not crash:
            return lease(run_dir)
        return RunServer(Path(run_dir))

    def server_args(self, server: EngineServer) -> list[str]:
        """``--api-url`` of the server, and ``--server-folder``, its folder (where the deployment's id is kept once
        per server), for a server crashpoint started."""
        folder = getattr(server, "folder", None)
        return ["--api-url", f"http://{server.address}/api", *(["--server-folder", str(folder)] if folder else [])]

    def facts(self, run_dir: Path) -> dict[str, Any]:
        return facts(run_dir)

    def close_after_sweep(self) -> None:
        """Kill the shared server once no run uses it (SIGKILLed, verified)."""
        close_idle()


# ---------------------------------------------------------------------- the server

SERVER_LOG = "prefect-server.log"
DB_FILE = "prefect.db"
#: Seconds a server may take to answer ``/api/health``: a start is 9 to 16 CPU seconds, 20 to 130 s of wall time on
#: this 2-core machine under load (measured at load 11 to 29).
SERVER_START_S = 300.0
#: Whether the server runs Prefect's loop services beside its API (scheduler, late runs, pause expirations, the task
#: run recorder, ...). A run needs none of them: its worker creates and executes its flow runs itself and reads flow
#: runs only, and a suspend's timeout (pause expirations) is longer than any run.
SERVICES = False
#: What a server on a copy of :func:`template_db` skips at its start: the template was migrated and its block types
#: registered by the same Prefect release (its key), so both would find nothing to do (0.4 to 1.0 of a start's 4.5 to
#: 5.1 CPU seconds, benchmarks/RESULTS.md, "2026-12-06: Prefect").
_ON_TEMPLATE_ENV = {"PREFECT_API_DATABASE_MIGRATE_ON_START": "false", "PREFECT_API_BLOCKS_REGISTER_ON_START": "false"}
#: Sets PR_SET_PDEATHSIG (kept across exec) then becomes the server: it dies with the harness thread that started it.
_DIE_WITH_PARENT = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); "
                    "os.getppid() == 1 and os._exit(1); os.execv(sys.argv[1], sys.argv[1:])")
#: The server's environment beyond the harness's: its home, no telemetry, no UI.
_SERVER_ENV = {"PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PREFECT_SERVER_UI_ENABLED": "false",
               "PREFECT_UI_ENABLED": "false", "PREFECT_LOGGING_LEVEL": "WARNING"}
#: Starts every server from a thread that lives as long as the process (``PR_SET_PDEATHSIG`` follows the thread).
_starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="crashpoint-prefect-server")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/health", timeout=2) as answer:
            return answer.status == 200
    except OSError:
        return False


_template_lock = threading.Lock()


def template_db() -> Path | None:
    """A migrated, empty server database, made once per machine and Prefect release (under the temp folder, keyed by
    the release and this Python) by a server started on an empty home and stopped (SIGTERM: its writes checkpointed)
    once healthy; a server then starts on a copy. ``None`` when it cannot be made (the server migrates its own)."""
    try:
        release = metadata.version("prefect")
    except metadata.PackageNotFoundError:
        return None
    key = hashlib.sha1(f"{release} {os.path.realpath(sys.executable)}".encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"crashpoint-prefect-template-{os.getuid()}-{key}"
    made = folder / DB_FILE
    with _template_lock:
        if made.exists():
            return made
        scratch = Path(tempfile.mkdtemp(prefix="crashpoint-prefect-template-"))
        server = RunServer(scratch, template=False)
        try:
            server.start()
            server.stop()
            ready = Path(tempfile.mkdtemp(prefix="crashpoint-prefect-template-", dir=folder.parent))
            # SQLite's backup API: one consistent file, whatever the stopped server left in its WAL
            with closing(sqlite3.connect(scratch / DB_FILE)) as src, closing(sqlite3.connect(ready / DB_FILE)) as dst:
                src.backup(dst)
            try:
                os.rename(ready, folder)  # atomic: another process that made one first keeps its own
            except OSError:
                shutil.rmtree(ready, ignore_errors=True)
            return made if made.exists() else None
        except (OSError, RuntimeError, sqlite3.Error):
            server.kill()
            return None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


class RunServer:
    """One Prefect API server on a database of its own in ``folder`` (``PREFECT_HOME``): ``start()`` (on a copy of
    :func:`template_db` when the folder has no database yet), ``kill()`` (SIGKILL of its group, verified), ``stop()``
    (SIGTERM, then a kill), ``restart()`` (a server crash: kill, then a new server on the same database and port).

    Attributes:
        folder: its home (``prefect.db``, ``prefect-server.log``). ``port``: its loopback port. ``pids``: every server
            process started, in order. ``on_template``: its database is a copy of :func:`template_db` (its starts skip
            the migrations and the block types' registration, :data:`_ON_TEMPLATE_ENV`). ``namespace``: ``""`` (Prefect has none: runs are told apart by deployment,
            tag and result storage).
    """

    namespace = ""

    def __init__(self, folder: Path, template: bool = True, services: bool = SERVICES) -> None:
        self.folder = Path(folder)
        self.template = template
        self.services = services
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []
        self.ready_s = 0.0
        self.on_template = False

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    @property
    def database(self) -> Path:
        """Its SQLite database file."""
        return self.folder / DB_FILE

    def start(self) -> "RunServer":
        """Start it and wait until ``/api/health`` answers.

        Raises:
            RuntimeError: it exited, or was not healthy within :data:`SERVER_START_S`.
        """
        began = time.monotonic()
        self.folder.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port()
        if self.template and not self.database.exists():
            made = template_db()
            if made is not None:
                try:
                    shutil.copyfile(made, self.database)
                    self.on_template = True
                except OSError:  # removed meanwhile: the server migrates its own
                    self.database.unlink(missing_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
        env |= _SERVER_ENV | (_ON_TEMPLATE_ENV if self.on_template else {}) | {"PREFECT_HOME": str(self.folder)}
        with open(self.folder / SERVER_LOG, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _DIE_WITH_PARENT, sys.executable, "-m", "prefect", "server", "start",
                 "--host", "127.0.0.1", "--port", str(self.port), "--no-ui", "--analytics-off",
                 "--log-level", "WARNING", *([] if self.services else ["--no-services"])],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, env=env)
        self.pids.append(self.proc.pid)
        deadline = began + SERVER_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {self.proc.returncode}; see {self.folder / SERVER_LOG}")
            if _healthy(self.port):
                self.ready_s = time.monotonic() - began
                return self
            time.sleep(0.1)
        self.kill()
        raise RuntimeError(f"prefect server not healthy within {SERVER_START_S:g} s")

    def kill(self) -> None:
        """SIGKILL the server's process group and reap it.

        Raises:
            RuntimeError: its pid still runs afterwards.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        kill_group(proc, "prefect server")

    def stop(self, within_s: float = 30.0) -> None:
        """SIGTERM (the server checkpoints its database and exits: 0.2 to 5 s measured), then :meth:`kill`."""
        proc = self.proc
        if proc is not None:
            try:
                proc.send_signal(signal.SIGTERM)
                proc.wait(timeout=within_s)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.kill()

    def restart(self) -> None:
        """A server crash: SIGKILL, then a new server on the same database (the flow runs must survive)."""
        self.kill()
        self.start()


class SharedServer:
    """The server the runs of this process share (started in the background by the first lease)."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="crashpoint-prefect-shared-"))
        self.server = RunServer(self.folder)
        self.leases = 0
        self.ready = _starter.submit(self.server.start)

    def alive(self) -> bool:
        """Started (or starting), and not exited."""
        proc = self.server.proc
        return not self.ready.done() or (self.ready.exception() is None and proc is not None and proc.poll() is None)

    def kill(self) -> None:
        """SIGKILL it (verified) and remove its folder."""
        try:
            self.ready.result()
        except Exception:  # noqa: BLE001 - it never started: nothing to kill but what Popen left
            pass
        try:
            self.server.kill()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


_shared_lock = threading.Lock()
_shared: list[SharedServer] = []


class Lease:
    """A run's use of the shared server, with a server's interface: ``start()`` waits until it serves, ``kill()``
    gives it back (the server lives on for the next runs), ``address``, ``namespace``, ``pids``. ``restart()`` is
    refused: a server crash would hit every run sharing it (a case with ``server_crash`` gets a :class:`RunServer`).

    Raises:
        RuntimeError: (``start``) the shared server exited or never became healthy.
    """

    namespace = ""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.shared: SharedServer | None = None
        self.pids: list[int] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the shared server."""
        assert self.shared is not None
        return self.shared.server.address

    @property
    def folder(self) -> Path:
        """The shared server's folder."""
        assert self.shared is not None
        return self.shared.folder

    def start(self) -> "Lease":
        with _shared_lock:
            for dead in [s for s in _shared if not s.alive()]:
                _shared.remove(dead)  # its runs fail on their own; new runs get a new server
                _starter.submit(dead.kill)
            if not _shared:
                _shared.append(SharedServer())
            self.shared = _shared[0]
            self.shared.leases += 1
        self.shared.ready.result()
        self.pids = [self.shared.server.pids[-1]]
        return self

    def kill(self) -> None:
        """Give the lease back."""
        shared, self.shared = self.shared, None
        if shared is not None:
            with _shared_lock:
                shared.leases -= 1

    def restart(self) -> None:
        raise RuntimeError("a shared Prefect server cannot crash for one run: a server crash needs a RunServer")


#: A running Prefect server every run uses instead of crashpoint's own (``HOST:PORT``; for developing the engine).
EXTERNAL_ENV = "CRASHPOINT_PREFECT_SERVER"


class External:
    """A server crashpoint did not start (:data:`EXTERNAL_ENV`): nothing to start or kill; ``pids`` is ``[0]``."""

    namespace = ""

    def __init__(self, address: str) -> None:
        self.address, self.pids = address, [0]

    def start(self) -> "External":
        return self

    def kill(self) -> None:
        """Nothing: the server is not crashpoint's."""

    def restart(self) -> None:
        raise RuntimeError(f"{EXTERNAL_ENV}: a server crashpoint did not start cannot crash for one run")


def lease(run_dir: Path) -> Lease:
    """A run's lease of the shared server (not started yet: ``start()``)."""
    return Lease(run_dir)


def close_idle() -> int:
    """Kill the shared server when no run uses it (a sweep's end); returns how many were killed."""
    with _shared_lock:
        idle = [s for s in _shared if s.leases == 0]
        for s in idle:
            _shared.remove(s)
    for s in idle:
        s.kill()
    return len(idle)


def _close_all() -> None:
    with _shared_lock:
        every = list(_shared)
        _shared.clear()
    for s in every:
        s.kill()


atexit.register(_close_all)


# ---------------------------------------------------------------------- what the workers record

#: JSON lines the worker appends (:mod:`~crashpoint.harness.engines.prefect_worker`): each task call's cache lookup,
#: each result persisted, each transaction's rollback and hook.
TASKS_FILE = "prefect-tasks.log"
TXNS_FILE = "prefect-transactions.log"


def facts(run_dir: Path) -> dict[str, Any]:
    """What the run's Prefect workers recorded beyond effects: ``tasks`` (``[{"pid", "thread", "flow_run",
    "attempt", "task", "call", "key", "event": "lookup" | "persisted", "hit"?}]``: each cache lookup of a task call,
    the ``call``-th call of that task in that attempt of the flow run, and each result written under a key) and
    ``transactions`` (``[{"pid", "thread", "flow_run", "attempt", "txn", "event": "rollback" | "rolled_back" |
    "committed" | "hook", "hook"?, "ok"?, "error"?}]``)."""
    return {"tasks": json_lines(Path(run_dir) / TASKS_FILE), "transactions": json_lines(Path(run_dir) / TXNS_FILE)}


def _killed(run: TargetOutcome) -> set[int]:
    return {p["pid"] for p in run.pids if p.get("rc") == -signal.SIGKILL and p.get("pid") is not None}


@rule("target.cached_not_rerun", "a task whose result was persisted under a cache key is not run again when its flow "
                                 "run is retried (Prefect: 'if an unexpired record is found ... the task does not run')")
def cached_not_rerun(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Finding]:
    rows = run.engine_facts.get("tasks") or []
    persisted = {r["key"]: r for r in rows if r["event"] == "persisted"}
    position: dict[tuple[Any, ...], dict[str, Any]] = {}  # (flow run, task, call) -> its first lookup whose key is persisted
    found, seen = [], set()
    for n, row in enumerate(rows):
        if row["event"] != "lookup":
            continue
        where = (row["flow_run"], row["task"], row["call"])
        key = row["key"]
        earlier = [r for r in rows[:n] if r["event"] == "persisted" and r["key"] == key]
        if key in persisted and earlier and not row.get("hit") and key not in seen:
            seen.add(key)
            w = earlier[0]
            found.append(Finding("target.cached_not_rerun",
                                 f"{row['thread']}: task {row['task']} ran again in attempt {row['attempt']} of flow run "
                                 f"{row['flow_run']} (pid {row['pid']}): its result was persisted under cache key {key} "
                                 f"by pid {w['pid']}, and Prefect did not find it (a miss on the same key)",
                                 [f"persisted {w}", f"lookup {row}"]))
        first = position.get(where)
        if first is None:
            if key in persisted:
                position[where] = row
            continue
        if key != first["key"] and not row.get("hit") and where not in seen:
            seen.add(where)
            found.append(Finding("target.cached_not_rerun",
                                 f"{row['thread']}: task {row['task']} (its call {row['call']} in the flow) ran again in "
                                 f"attempt {row['attempt']} of flow run {row['flow_run']} (pid {row['pid']}): an earlier "
                                 f"attempt persisted its result under cache key {first['key']}, and the retry computed "
                                 f"another key, {key}: something in the task's inputs or its cache_key_fn differs "
                                 "between attempts (the wall clock, a random value, a value made in the flow's own code)",
                                 [f"first {first}", f"retry {row}"]))
    return found


@rule("target.rollback_complete", "each rollback hook of a failed transaction runs to its end (Prefect: 'rollbacks "
                                  "occur whenever the transaction a task is participating in fails')")
def rollback_complete(target: Target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Finding]:
    rows = run.engine_facts.get("transactions") or []
    killed = _killed(run)
    found = []
    for row in rows:
        if row["event"] == "hook" and not row.get("ok") and row["pid"] not in killed:
            found.append(Finding("target.rollback_complete",
                                 f"{row['thread']}: rollback hook {row['hook']} of transaction {row['txn']} raised "
                                 f"{row.get('error')} (pid {row['pid']}, flow run {row['flow_run']}): Prefect logged it "
                                 "and went on, so what the hook undoes stays done", [f"hook {row}"]))
    ends: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        ends[(row["thread"], row["txn"])].append(row)
    for (thread, txn), events in ends.items():
        last_begun = max((i for i, e in enumerate(events) if e["event"] == "rollback"), default=None)
        if last_begun is None:
            continue
        later = events[last_begun + 1:]
        if not any(e["event"] in ("rolled_back", "committed", "rollback_failed") for e in later):  # a failed one: its hook's
            e = events[last_begun]
            found.append(Finding("target.rollback_complete",
                                 f"{thread}: the rollback of transaction {txn} began in pid {e['pid']} (flow run "
                                 f"{e['flow_run']}, attempt {e['attempt']}) and was never finished: no later attempt "
                                 "rolled it back or committed it, so its rollback hooks never all ran",
                                 [f"{x['event']} pid {x['pid']} {x.get('hook') or ''}".rstrip() for x in events][:8]))
    return found
