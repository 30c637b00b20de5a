"""The in-run side of :func:`crashpoint.effect`: each call of a target's effect goes to the run's ledger.

The ledger is the one the fake tools use (:class:`crashpoint.fakes.ledger.Ledger`, ``RUN_DIR/ledger.db``):
a call is a row of its ``calls`` table (tool = the effect's name, its arguments, idempotency key,
outcome ``applied`` | ``duplicate`` | ``failed`` | ``conflict``, ``lost``), a scripted fault is a row of its ``script``
table with its :class:`~crashpoint.fakes.ledger.Behaviour` (the built-in ``retryable``, ``fatal``,
``timeout``, ``lost_response``, ``slow``, ``rate_limited`` (raises :class:`~crashpoint.api.EffectRateLimited`),
``empty_answer`` / ``malformed_answer`` (applied, the call returns ``{}`` / a text that is not the function's value:
:data:`crashpoint.fakes.ledger.ANSWERS`), or a fault kind's own, such as ``late_answer``), human answers
are its ``decisions``. A ``slow`` call sleeps its script's ``seconds`` of real time (a team's code runs
on the wall clock). What a
target call adds is kept in one more table of the same file::

    effect_calls(seq -> calls.seq, pid, thread, node, task, step, digest, durable, live_others, value)
    thread_parents(thread, parent, after_gseq, pid)

(``value``: the pickled result, returned again for a repeated key; ``live_others``: JSON list of the
run's other worker processes alive when the call began, from ``RUN_DIR/pids.log``). ``thread_parents`` holds each
child workflow's parent (:meth:`EffectSession.record_parent`, first record kept): a DBOS child workflow started from a
workflow, a Temporal child workflow; ``after_gseq``: the ledger's last position (calls and decisions) when the engine
was asked to start it, so an approval answered later is known to have come after the child started. The probe passes ``before_effect:NAME`` before the
call and ``after_effect:NAME`` once the call is recorded and before its answer returns.

Calls with one key are serialised across processes (a ``flock`` per effect and key), as the idempotent
service they stand for would answer them; a key used again with other arguments is refused (outcome ``conflict``,
the call raises :class:`~crashpoint.api.EffectFault`) unless the effect says its provider replays the first answer
(``key_reuse="replay"``). A call's *step* (what "the same call" means across kills) is ``(thread, node, effect, key)``, with the
argument digest standing in for a missing key.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import sys
import threading
import time
from typing import Any, Callable, Mapping, Sequence

import crashpoint.api as effect_api
from crashpoint.api import (OUTSIDE_FILE, EffectCall, EffectFault, EffectRateLimited, EffectSpec, EffectTimeout, _Outside,
                            bound_arguments)
from crashpoint.fakes.ledger import Ledger, garbled, next_gseq
from crashpoint.harness.engines.workerlib import alive, held_lock, json_lines, rendezvous
from crashpoint.protocols import no_probe

_SCHEMA = """
CREATE TABLE IF NOT EXISTS effect_calls (
    seq INTEGER PRIMARY KEY, pid INTEGER NOT NULL, thread TEXT, node TEXT, task TEXT, step INTEGER,
    digest TEXT NOT NULL,
    durable INTEGER, live_others TEXT NOT NULL DEFAULT '[]', value BLOB);
CREATE TABLE IF NOT EXISTS thread_parents (
    thread TEXT PRIMARY KEY, parent TEXT NOT NULL, after_gseq INTEGER NOT NULL, pid INTEGER NOT NULL);
"""
#: Real seconds a scripted ``slow`` call sleeps when its script gives none.
SLOW_DEFAULT_S = 0.2
#: Real seconds of a scripted ``rate_limited`` call's ``retry_after`` when its script gives none.
RATE_LIMIT_DEFAULT_S = 0.2


#: The engine position (``{"thread", "node", "task", "step"}``) the calling thread inherited from the code that started
#: it or submitted its task (:func:`follow_threads`), in ``where``; absent: none. ``origin``: for a position inherited
#: by a thread at its start, ``(ident, frame)``: the starting thread and the outermost frame of the team's code that
#: started it (:func:`_team_frame`); the position holds while that frame runs (:func:`_live`). ``None``: a task's.
_inherited = threading.local()
_following = False
_pools_followed = False
_library: dict[str, Any] = {}  # file -> whether it is library code; "": the library roots


def position(context: Callable[[], Mapping[str, Any]]) -> dict[str, Any]:
    """Where the calling code runs, as the engine says (``context()``), or, when the engine names no thread here (a
    thread the team's node, step or activity started: a ``ThreadPoolExecutor`` inside it), the position its thread
    inherited from the code that started it or submitted its task (:func:`follow_threads`); ``{}`` when neither
    knows. A thread's inherited position is dropped once the node code that started the thread has returned (a
    long-lived thread made on first use and reused later for another thread's node): never a wrong thread."""
    try:
        where = dict(context() or {})
    except Exception:  # noqa: BLE001 - an engine asked outside its own threads may raise: no position there
        where = {}
    if where.get("thread") is None:
        inherited = getattr(_inherited, "where", None)
        origin = getattr(_inherited, "origin", None)
        if inherited and (origin is None or _live(*origin)):
            return dict(inherited)
    return where


def _is_library(filename: str) -> bool:
    """Whether code of ``filename`` is no team's: Python's own, an installed package's, a frozen or generated module's."""
    known = _library.get(filename)
    if known is None:
        roots = _library.get("")
        if roots is None:
            import sysconfig

            paths = sysconfig.get_paths()
            roots = _library[""] = tuple({os.path.join(paths[k], "") for k in ("stdlib", "platstdlib", "purelib",
                                                                               "platlib")})
        known = _library[filename] = (filename.startswith(("<", *roots)) or "site-packages" in filename
                                      or "dist-packages" in filename)
    return known


def _team_frame(frame: Any) -> Any:
    """The outermost frame, from ``frame`` outward, of the team's code (not Python's, an installed package's or
    crashpoint's, a worker run as ``__main__`` included): the node, step or activity function, or the workflow code
    around a step; ``None`` when none."""
    found = None
    while frame is not None:
        spec = frame.f_globals.get("__spec__")
        module = str(getattr(spec, "name", None) or frame.f_globals.get("__name__", ""))
        if not _is_library(frame.f_code.co_filename) and module.partition(".")[0] != "crashpoint":
            found = frame
        frame = frame.f_back
    return found


def _live(ident: int, frame: Any) -> bool:
    """Whether ``frame`` still runs in thread ``ident`` (is on its stack now)."""
    current = sys._current_frames().get(ident)
    while current is not None:
        if current is frame:
            return True
        current = current.f_back
    return False


def _here() -> dict[str, Any] | None:
    """The position of the calling code in this worker process (``None``: no effect session of this process is
    installed, or the engine and the thread know none)."""
    session = effect_api._session
    if not isinstance(session, EffectSession) or session.pid != os.getpid():
        return None
    where = position(session.context)
    return where if where.get("thread") is not None else None


def _carried(fn: Callable[..., Any], where: dict[str, Any] | None) -> Callable[..., Any]:
    """``fn`` run at position ``where`` (a task submitted at that position: ``None``, none), whatever thread runs it;
    the thread's own inherited position is back after."""
    def at_position(*a: Any, **k: Any) -> Any:
        before = getattr(_inherited, "where", None), getattr(_inherited, "origin", None)
        _inherited.where, _inherited.origin = where, None
        try:
            return fn(*a, **k)
        finally:
            _inherited.where, _inherited.origin = before

    return at_position


def follow_threads() -> None:
    """Make the engine position follow the team's threads, once per process: a thread started
    (``threading.Thread.start``, so ``threading.Timer`` too) and a task submitted to a thread pool
    (``concurrent.futures.ThreadPoolExecutor.submit``, so ``loop.run_in_executor`` and ``asyncio.to_thread`` too;
    ``multiprocessing.pool.ThreadPool``'s ``apply``, ``apply_async``, ``map``, ``map_async``, ``starmap``,
    ``starmap_async``, ``imap``, ``imap_unordered``) while the calling code runs in a node, DBOS step or Temporal
    activity carry that position into the new thread or task, where an effect call whose engine names no thread (its
    context does not follow threads: LangGraph's config, DBOS's step, Temporal's activity info) is placed with it
    (:func:`position`). Only crashpoint's own record of the position follows: the engine's context in the new thread
    is what it would be without crashpoint. A pool thread reused for another task takes that task's position (or
    none); a thread keeps the position it started with only while the team's code that started it runs. The
    ``ThreadPool`` methods are wrapped once ``multiprocessing.pool`` is imported (:func:`_follow_pools`), not before:
    importing it costs a worker tens of milliseconds."""
    global _following
    if _following:
        return
    _following = True
    from concurrent.futures import ThreadPoolExecutor

    start, submit = threading.Thread.start, ThreadPoolExecutor.submit

    def start_following(self: threading.Thread) -> None:
        if not _pools_followed:
            _follow_pools()  # a ThreadPool starts its threads as it is made: before its first task
        where = _here()
        if where is not None:
            run = self.run
            starter = _team_frame(sys._getframe(1))
            origin = None if starter is None else (threading.get_ident(), starter)

            def run_at_position() -> None:
                _inherited.where, _inherited.origin = where, origin
                run()

            self.run = run_at_position  # type: ignore[method-assign]
        start(self)

    def submit_following(self: Any, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        return submit(self, _carried(fn, _here()), *args, **kwargs)

    start_following.__wrapped__ = start  # type: ignore[attr-defined]
    submit_following.__wrapped__ = submit  # type: ignore[attr-defined]
    threading.Thread.start = start_following  # type: ignore[method-assign]
    ThreadPoolExecutor.submit = submit_following  # type: ignore[method-assign]
    _follow_pools()


def _follow_pools() -> None:
    """Make each task given to a ``multiprocessing.pool.ThreadPool`` take the position of the code that submitted it
    (:func:`_carried`), once ``multiprocessing.pool`` is imported: a pool's long-lived threads, started in the node
    that first made it, would otherwise place every later task in that node's thread. A process ``Pool`` is left
    alone (its tasks are pickled; a process it starts is watched: :func:`watch_processes`)."""
    global _pools_followed
    pools = sys.modules.get("multiprocessing.pool")
    if _pools_followed or pools is None:
        return
    _pools_followed = True
    # apply, map, starmap and their _async forms submit through apply_async and _map_async
    for name in ("apply_async", "_map_async", "imap", "imap_unordered"):
        method = getattr(pools.ThreadPool, name, None)
        if method is None:  # another Python's pool: its tasks keep the thread's position
            continue

        def task_following(self: Any, func: Callable[..., Any], /, *args: Any, _method: Any = method,
                           **kwargs: Any) -> Any:
            return _method(self, _carried(func, _here()), *args, **kwargs)

        task_following.__wrapped__ = method  # type: ignore[attr-defined]
        setattr(pools.ThreadPool, name, task_following)


#: File of a run folder: one JSON line ``{"pid", "command", "thread", "node", "worker"}`` per process a worker started
#: outside the ledger's view (:func:`watch_processes`).
UNSEEN_FILE = "unseen-processes.log"
#: The start of each note :func:`unseen_processes` writes (what a summary looks for).
UNSEEN_NOTE = "a process started outside the ledger's view"
_watching = False


#: A command that clears its own environment before it runs the rest (``env -i python pay.py``, ``env - ...``,
#: ``env --ignore-environment ...``, ``env -u CRASHPOINT_RUN_DIR ...``), started with this process's environment.
CLEARS_ENV = re.compile(r"(?:^|[\s;&|(`/])env\s+(?:-[a-zA-Z]*i[a-zA-Z]*|-|--ignore-environment|-u\s*"
                        + re.escape(effect_api.RUN_MARKER) + r"|--unset[= ]" + re.escape(effect_api.RUN_MARKER)
                        + r")(?=\s|$)")


def _unseen(pid: int | None, command: Any, env: Any) -> None:
    """Note process ``pid`` (started with ``command``) when its environment ``env`` (``None``: this process's own,
    which carries the run's marker) lacks this run's marker: effects it makes are not observed."""
    session = effect_api._session
    if pid is None or not isinstance(session, EffectSession) or session.pid != os.getpid():
        return
    if isinstance(command, (str, bytes, os.PathLike)):
        shown = os.fsdecode(command)
    else:
        import shlex

        shown = shlex.join(os.fsdecode(a) for a in command)
    if env is None and not CLEARS_ENV.search(shown):  # this process's environment, the marker with it
        return
    run_dir = os.path.dirname(os.fspath(session.path))
    try:
        marker = None if env is None else env.get(effect_api.RUN_MARKER, env.get(effect_api.RUN_MARKER.encode()))
    except Exception:  # noqa: BLE001 - an env that is no mapping: Popen itself refuses it first
        return
    if isinstance(marker, bytes):
        marker = marker.decode(errors="replace")
    if marker is not None and os.path.realpath(marker) == os.path.realpath(run_dir):
        return
    where = _here() or {}
    line = json.dumps({"pid": pid, "command": shown[:300], "thread": where.get("thread"), "node": where.get("node"),
                       "worker": os.getpid()}) + "\n"
    fd = os.open(os.path.join(run_dir, UNSEEN_FILE), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def watch_processes() -> None:
    """Note every process the team's code starts outside the ledger's view, once per process: ``subprocess.Popen``
    (so ``subprocess.run`` and the rest) and ``os.posix_spawn`` / ``os.posix_spawnp`` given an environment without
    this run's marker (``env={}``, a cleared or rebuilt environment) start a process in which ``crashpoint.effect``
    cannot know it belongs to the run: an effect made there reaches neither the ledger nor the outside-effects log
    (a process that inherits the marker is seen: :func:`outside_calls`). Each is appended to
    ``RUN_DIR/``:data:`UNSEEN_FILE` with its pid, command and the thread and node that started it, for the run's notes
    (:func:`unseen_processes`)."""
    global _watching
    if _watching:
        return
    _watching = True
    import inspect
    import subprocess

    init = subprocess.Popen.__init__
    params = inspect.signature(init)

    def init_watched(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        try:
            bound = params.bind(self, *args, **kwargs).arguments
        except TypeError:
            return
        _unseen(getattr(self, "pid", None), bound.get("args"), bound.get("env"))

    init_watched.__wrapped__ = init  # type: ignore[attr-defined]
    subprocess.Popen.__init__ = init_watched  # type: ignore[method-assign]
    for name in ("posix_spawn", "posix_spawnp"):
        spawn = getattr(os, name, None)
        if spawn is None:
            continue

        def spawn_watched(path: Any, argv: Any, env: Any, *rest: Any, _spawn: Any = spawn, **kwargs: Any) -> int:
            pid = _spawn(path, argv, env, *rest, **kwargs)
            _unseen(pid, argv, env)
            return pid

        spawn_watched.__wrapped__ = spawn  # type: ignore[attr-defined]
        setattr(os, name, spawn_watched)


def unseen_processes(run_dir: str | os.PathLike[str]) -> list[str]:
    """The run's notes on processes its workers started outside the ledger's view (:func:`watch_processes`), one per
    process: ":data:`UNSEEN_NOTE` (pid P, started by worker W in THREAD@NODE: COMMAND): ... effects it makes are not
    observed"; ``[]`` when none was (a torn last line, its writer killed, is left out)."""
    notes = []
    for row in unseen_commands(run_dir):
        where = _started_in(row)
        notes.append(f"{UNSEEN_NOTE} (pid {row['pid']}, started by worker {row['worker']} in {where}: "
                     f"{row['command'][:200]}): its environment lacks the run's marker {effect_api.RUN_MARKER}, so effects it makes "
                     "are not observed (no ledger, no crash point, no outside-effects log)")
    return notes


def _started_in(row: Mapping[str, Any]) -> str:
    """Where a process of :func:`unseen_commands` was started: ``THREAD@NODE``, or that crashpoint could not place it."""
    return f"{row['thread']}@{row['node']}" if row.get("thread") is not None else "no node crashpoint could place"


def unseen_commands(run_dir: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The processes the run's workers started outside the ledger's view (:func:`watch_processes`), as recorded:
    ``[{"pid", "command", "thread", "node", "worker"}]`` (a torn last line, its writer killed, is left out)."""
    return json_lines(os.path.join(os.fspath(run_dir), UNSEEN_FILE))


def unobserved(run_dir: str | os.PathLike[str], allowed: Sequence[str]) -> list[str]:
    """Why a run could not see its effects, one text per process started outside the ledger's view whose command
    matches none of ``allowed`` (the target's ``outside_ledger:``, shell-style patterns over the command as shown):
    such a process may have made a side effect the run cannot count, so the run is an ``error``, never a pass."""
    import fnmatch

    out = []
    for row in unseen_commands(run_dir):
        if any(fnmatch.fnmatchcase(row["command"], pattern) for pattern in allowed):
            continue
        where = _started_in(row)
        out.append(f"process {row['pid']} ({row['command'][:200]}), started in {where}, ran without the run's marker "
                   f"{effect_api.RUN_MARKER}: a side effect it made is not observed, so the run cannot say whether "
                   "the workflow survived; start it with the marker in its environment (env={**os.environ, ...}), or, "
                   "if it makes no side effect, list its command under outside_ledger: in the target file")
    return out


def unseen_summary(results: Sequence[Any]) -> list[str]:
    """The summary lines of a sweep's processes started outside the ledger's view (each result's ``notes``, as
    :func:`unseen_processes` wrote them): ``[]`` when none; else one line with the number of runs, then the distinct
    notes (at most 3; the pid varies from run to run, so one per command and node)."""
    notes = [(r, n) for r in results for n in getattr(r, "notes", None) or () if n.startswith(UNSEEN_NOTE)]
    if not notes:
        return []
    import re

    distinct: dict[str, str] = {}
    for _, note in notes:
        distinct.setdefault(re.sub(r"pid \d+, started by worker \d+ ", "", note), note)
    runs = len({id(r) for r, _ in notes})
    return [f"not observed: {runs} run(s) started a process outside the ledger's view (effects it makes are not "
            "observed)"] + [f"  {n}" for n in list(distinct.values())[:3]]


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _comparable(args_json: str) -> str:
    """A call's arguments (JSON) as compared for a reused key: the canonical JSON without the memory addresses of
    ``repr`` forms (``<Client object at 0x7f...>`` differs in every process and means nothing)."""
    return _ADDRESS.sub("", json.dumps(json.loads(args_json), sort_keys=True))


def digest(args: Mapping[str, Any]) -> str:
    """SHA-256 prefix (16 hex digits) of the arguments' canonical JSON (``repr`` for what JSON cannot hold)."""
    return hashlib.sha256(json.dumps(args, sort_keys=True, default=repr).encode()).hexdigest()[:16]


def ensure_schema(ledger: Ledger) -> None:
    """Create the ``effect_calls`` table in ``ledger``'s file (idempotent)."""
    ledger.db.executescript(_SCHEMA)


class EffectSession:
    """Receives every effect call of one worker process (installed with ``crashpoint.effect._install``).

    Args:
        ledger: the run's ledger file (each thread of the worker opens its own connection: LangGraph runs
            parallel branches in a thread pool).
        probe: the crash probe (``before_effect:NAME`` / ``after_effect:NAME``).
        context: returns ``{"thread", "node", "task", "step"}`` for the engine's current position (values may be
            ``None``); called once per effect call, and when the team's code starts a thread or submits a task to a
            thread pool (:func:`follow_threads`: the position follows into it).
        durable: ``durable(thread) -> bool``: whether the engine holds a durable record of the thread now.
        rendezvous: ``N >= 2``: this process is one of N delivering the same request at once; its first effect
            call waits until the N - 1 others are inside a step too (:func:`~crashpoint.harness.engines.
            workerlib.rendezvous`), before anything of the call is recorded. ``0``: no rendezvous.
    """

    def __init__(self, ledger: str | os.PathLike[str], probe: Callable[[str], None] = no_probe,
                 context: Callable[[], Mapping[str, Any]] = dict,
                 durable: Callable[[str | None], bool | None] = lambda thread: None, rendezvous: int = 0) -> None:
        self.path, self.probe, self.context, self.durable = ledger, probe, context, durable
        self.pid = os.getpid()
        self._local = threading.local()
        self._rendezvous, self._met = rendezvous, threading.Lock()
        ensure_schema(self.ledger)
        follow_threads()  # an effect called from a thread the team's node starts is placed in that node
        watch_processes()  # a process started without the run's marker is named in the run's notes

    def _meet(self) -> None:
        """The rendezvous of a duplicated request, once per process (a node's parallel branches wait for it too)."""
        if not self._rendezvous:
            return
        from pathlib import Path

        with self._met:
            if self._rendezvous:
                rendezvous(Path(os.path.dirname(os.fspath(self.path))), self._rendezvous)
                self._rendezvous = 0

    def live_workers(self) -> list[int]:
        """Other worker processes of this run alive now (``RUN_DIR/pids.log``: one ``PID PHASE`` line per worker)."""
        path = os.path.join(os.path.dirname(os.fspath(self.path)), "pids.log")
        try:
            with open(path) as f:
                pids = {int(line.split()[0]) for line in f if line.strip()}
        except OSError:
            return []
        return sorted(pid for pid in pids if pid != self.pid and alive(pid))

    @property
    def ledger(self) -> Ledger:
        """This thread's connection to the run's ledger."""
        mine = getattr(self._local, "ledger", None)
        if mine is None:
            mine = self._local.ledger = Ledger(self.path)
        return mine

    def record_parent(self, thread: str | None, parent: str | None) -> None:
        """Record that the engine is asked to start workflow ``thread`` as a child of workflow ``parent`` (a worker calls
        it before the engine makes the child durable: before the parent's command to start it reaches the server, or
        before the child's status row is written), with the ledger's last position now (``after_gseq``). The first
        record of a thread is kept: a replay or a recovery that starts the child again records nothing new. No record
        for a workflow that has no parent, or is its own."""
        if not thread or not parent or thread == parent:
            return
        with self.ledger.transaction() as conn:
            conn.execute("INSERT OR IGNORE INTO thread_parents VALUES (?, ?, ?, ?)",
                         (thread, parent, next_gseq(conn) - 1, os.getpid()))

    def call(self, spec: EffectSpec, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Record, crash-probe, fault and run one call (see the module docstring).

        Raises:
            EffectFault / EffectTimeout: a scripted fault, or a repeated key whose first call failed fatally.
            whatever ``fn`` raises (recorded ``failed``).
        """
        if os.getpid() != self.pid:  # a process the worker forked (the session came with the fork): not a worker
            return _Outside(os.path.dirname(os.fspath(self.path))).call(spec, fn, args, kwargs)
        self._meet()
        key = spec.key_of(fn, args, kwargs)
        if key is None:
            return self._call(spec, key, fn, args, kwargs)
        with self._key_lock(spec.name, key):  # an idempotent API answers one key's calls one at a time
            return self._call(spec, key, fn, args, kwargs)

    def _key_lock(self, name: str, key: str) -> Any:
        """An exclusive ``flock`` on ``RUN_DIR/effect-locks/DIGEST`` for one (effect, key), held while the call
        is checked, made and recorded: two processes calling with one key are answered one after the other,
        as the downstream service would. The kernel drops it when a holder is killed."""
        folder = os.path.join(os.path.dirname(os.fspath(self.path)), "effect-locks")
        os.makedirs(folder, exist_ok=True)
        return held_lock(os.path.join(folder, hashlib.sha256(f"{name}\0{key}".encode()).hexdigest()[:32]))

    def _call(self, spec: EffectSpec, key: str | None, fn: Callable[..., Any], args: Sequence[Any],
              kwargs: Mapping[str, Any]) -> Any:
        name = spec.name
        shown = {k: v for k, v in bound_arguments(fn, args, kwargs).items()}
        args_json = json.dumps(shown, sort_keys=True, default=repr)
        dig = digest(shown)
        where = position(self.context)
        thread, node, task, step = where.get("thread"), where.get("node"), where.get("task"), where.get("step")
        durable = self.durable(thread)
        ledger = self.ledger
        db = ledger.db
        others = self.live_workers()
        at = time.time()
        if key is not None:
            prior = db.execute(
                "SELECT c.*, e.value FROM calls c LEFT JOIN effect_calls e ON e.seq=c.seq WHERE c.tool=? AND "
                "c.idempotency_key=? AND (c.outcome='applied' OR (c.outcome='failed' AND c.retryable=0)) "
                "ORDER BY c.seq LIMIT 1", (name, key)).fetchone()
            if prior is not None and spec.key_reuse == "conflict" and _comparable(prior["args"]) != _comparable(args_json):
                text = (f"{name}: idempotency key {key!r} was already used with other arguments (ledger#{prior['seq']}): "
                        "refused, as a payments API refuses it (conflict); nothing applied")
                with ledger.transaction() as conn:
                    self._insert(conn, name, args_json, key, "conflict", 0, None, text, at, 0,
                                 (thread, node, task, step, dig, durable, others, None))
                raise EffectFault(text, effect=name, retryable=False)
            if prior is not None:
                with ledger.transaction() as conn:
                    self._insert(conn, name, args_json, key, "duplicate", prior["retryable"], prior["result"],
                                 prior["error"], at, 0, (thread, node, task, step, dig, durable, others, prior["value"]))
                if prior["outcome"] == "failed":
                    raise EffectFault(prior["error"], effect=name, retryable=False)
                return pickle.loads(prior["value"]) if prior["value"] is not None else json.loads(prior["result"])
        self.probe(f"before_effect:{name}")
        with ledger.transaction() as conn:
            outcome, how, seconds = ledger.next_script(conn, name)
        context = (thread, node, task, step, dig, durable, others)
        fault: EffectFault | None = None
        if how.error is not None and how.waits:  # a rate limit: nothing applied, wait retry_after (real seconds)
            wait_s = float(seconds or RATE_LIMIT_DEFAULT_S)
            text = (how.message or "{tool}: scripted rate limit").replace("{tool}", name).replace("{retry_after}",
                                                                                                   f"{wait_s:g}")
            fault = EffectRateLimited(text, effect=name, retry_after=wait_s, status=how.status or 429)
        elif how.error is not None:
            kind = EffectTimeout if outcome in ("timeout", "late_answer") else EffectFault
            text = (how.message or f"{{tool}}: scripted {outcome}").replace("{tool}", name)
            fault = kind(text, effect=name, retryable=how.error == "retryable", maybe_applied=how.applies)
        if fault is not None and not how.applies:
            with ledger.transaction() as conn:
                self._insert(conn, name, args_json, key, "failed", int(fault.retryable), None, str(fault), at, 0,
                             context + (None,))
            self.probe(f"after_effect:{name}")
            raise fault
        if how.takes_time:
            time.sleep(seconds or SLOW_DEFAULT_S)
        try:
            result = fn(*args, **kwargs)
        except BaseException as exc:
            if isinstance(exc, Exception):
                with ledger.transaction() as conn:
                    self._insert(conn, name, args_json, key, "failed", None, None, f"{type(exc).__name__}: {exc}",
                                 at, 0, context + (None,))
            raise
        try:
            value = pickle.dumps(result)
        except Exception:  # noqa: BLE001 - an unpicklable answer is kept as JSON only
            value = None
        with ledger.transaction() as conn:
            self._insert(conn, name, args_json, key, "applied", None, json.dumps(result, default=repr), None, at,
                         int(how.lost), context + (value,))
        self.probe(f"after_effect:{name}")
        if fault is not None:  # the effect landed, the caller gets an error (a lost answer, a late answer)
            raise fault
        if how.answer is not None:  # the effect landed, the caller gets an empty or garbled answer instead of it
            return garbled(how.answer)
        return result

    def _insert(self, conn: Any, name: str, args_json: str, key: str | None, outcome: str, retryable: Any,
                result: Any, error: Any, at: float, lost: int, extra: tuple[Any, ...]) -> None:
        thread, node, task, step, dig, durable, others, value = extra
        seq = self.ledger.record_call(conn, name, json.loads(args_json), key, outcome, at, error=error,
                                      retryable=None if retryable is None else bool(retryable), lost=bool(lost),
                                      result_json=result if error is None else None)
        conn.execute("INSERT INTO effect_calls VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     (seq, os.getpid(), thread, node, task, step, dig,
                      None if durable is None else int(bool(durable)), json.dumps(list(others)), value))


def outside_calls(run_dir: str | os.PathLike[str]) -> list[str]:
    """Why the run did not see some of its effects: one text per process and effect called outside a worker
    (``RUN_DIR/``:data:`~crashpoint.api.OUTSIDE_FILE`, written by :class:`crashpoint.api._Outside`), ``[]`` when none
    was. A torn last line (its process killed mid-write) is left out."""
    path = os.path.join(os.fspath(run_dir), OUTSIDE_FILE)
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    seen: dict[tuple[int, str], tuple[int, list[Any]]] = {}  # (pid, effect) -> (its parent pid, its keys)
    for text in lines:
        try:
            row = json.loads(text)
        except ValueError:
            continue
        _, keys = seen.setdefault((row["pid"], row["effect"]), (row["ppid"], []))
        if row["key"] not in keys:
            keys.append(row["key"])
    return [f"crashpoint.effect called in pid {pid}, not a worker process: {effect} (key "
            f"{', '.join(str(k) for k in keys)}; parent pid {ppid}) was made without the run's ledger or a crash "
            "point around it, so this run did not judge it (call the effect in the worker process, e.g. in the node "
            "itself, not in a subprocess it starts)" for (pid, effect), (ppid, keys) in seen.items()]


def read_parents(ledger: Ledger) -> dict[str, dict[str, Any]]:
    """Each child workflow's parent as the run's workers recorded it (:meth:`EffectSession.record_parent`):
    ``{thread: {"parent": PARENT_THREAD, "after_gseq": N, "pid": PID}}`` (``{}``: no child workflow was started)."""
    ensure_schema(ledger)
    return {r["thread"]: {"parent": r["parent"], "after_gseq": r["after_gseq"], "pid": r["pid"]}
            for r in ledger.db.execute("SELECT * FROM thread_parents ORDER BY thread").fetchall()}


def read_calls(ledger: Ledger) -> list[EffectCall]:
    """Every effect call of a run's ledger, in order (calls without a target row are left out)."""
    ensure_schema(ledger)
    rows = ledger.db.execute("SELECT c.*, e.pid, e.thread, e.node, e.task, e.step, e.digest, e.durable, e.live_others "
                             "FROM calls c JOIN effect_calls e ON e.seq=c.seq ORDER BY c.seq").fetchall()
    return [EffectCall(r["seq"], r["tool"], r["idempotency_key"], r["digest"], json.loads(r["args"]), r["outcome"],
                       bool(r["lost"]), r["pid"], r["thread"], r["node"], r["task"],
                       None if r["durable"] is None else bool(r["durable"]), tuple(json.loads(r["live_others"])),
                       r["error"], None if r["result"] is None else json.loads(r["result"]), r["step"], r["gseq"])
            for r in rows]

