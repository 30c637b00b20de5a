"""Crash points: named places where the harness may SIGKILL an engine worker process.

A crash point is identified by its name and, when the same name is passed more than
once in a run, its occurrence: ``after_checkpoint:refund_draft``,
``before_effect:refunds.issueRefund#2``. Names come from the engine's store
(``before_checkpoint:NAME`` / ``after_checkpoint:NAME``), the engine
(``approval_request:ID``) and the fake tools (``before_effect:TOOL`` / ``after_effect:TOOL``).

The probe runs inside the worker. It appends every crash point it passes to
``RUN_DIR/crashpoints.log`` with an unbuffered ``write`` (the kernel keeps it across a
SIGKILL), so occurrences are counted across the worker processes of one run, and the
golden run's log is the list of crash points to sweep. When a target is reached the
probe appends it to ``RUN_DIR/crash.fired`` and sends SIGKILL to its own process: no
``finally`` block, no atexit handler, no flush runs (the real thing, as in the project's
offline probe of real engines). A schedule ``"A >> B"`` kills at ``A`` and then at ``B``,
a point of the recovery from the first kill (crash during recovery). Once a probe decides to kill, the
process's other threads stop at their next crash point, unlogged, until the SIGKILL lands: recording the kill
takes syscalls that let them run, and a parallel branch (LangGraph's checkpoint write of the next step) must not
pass and act on a point the recovery is meant to meet.

The run folder is the engine's: an engine may rewrite any file in it. So a probe built with
``witness`` also keeps the harness's own record beside the run folder, in ``RUN_DIR.probe/``
(:func:`witness_dir`): the same crash point log, and ``events.log``, one line per fact the harness
verifies a kill with (:func:`witness_events`): ``start PID`` when a worker process builds its probe,
``kill PID POINT`` just before the probe SIGKILLs its own process ``PID`` at ``POINT`` (``simulate PID
POINT`` in simulated-crash mode). The driver compares these with the pid of the process it started and
that process's exit status (:mod:`crashpoint.harness.process.kills`).
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

LOG_FILE = "crashpoints.log"
FIRED_FILE = "crash.fired"
#: Crash point ids where a worker was held so that the harness could deliver an event, in order.
PAUSED_FILE = "crash.paused"
#: The harness creates ``release.N`` once it has delivered the events of the N-th hold (0-based).
RELEASE_PREFIX = "release."
#: Wall seconds a held worker waits for the harness before it goes on by itself.
HOLD_LIMIT_S = 30.0
#: The probe's facts in the witness folder (see the module docstring).
EVENTS_FILE = "events.log"


def witness_dir(run_dir: str | Path) -> Path:
    """The harness's record of a run's probe, beside (never inside) the engine's run folder."""
    return Path(f"{run_dir}.probe")


@dataclass(frozen=True)
class ProbeEvent:
    """One line of the witness's ``events.log``: ``kind`` (``start``, ``kill``, ``simulate``), the
    process id that wrote it, and the crash point id (``kill``/``simulate``; ``None`` for ``start``)."""

    kind: str
    pid: int
    point: str | None = None


def witness_events(run_dir: str | Path) -> list[ProbeEvent]:
    """The probe facts of a run, in order (empty when the run kept no witness)."""
    path = witness_dir(run_dir) / EVENTS_FILE
    events = []
    for line in path.read_text().splitlines() if path.exists() else ():
        kind, _, rest = line.partition(" ")
        pid, _, point = rest.partition(" ")
        events.append(ProbeEvent(kind, int(pid), point or None))
    return events


def witness_passed(run_dir: str | Path) -> list[str] | None:
    """The crash point ids the witness recorded, in order; ``None`` when the run kept no witness."""
    path = witness_dir(run_dir) / LOG_FILE
    return path.read_text().splitlines() if path.exists() else None


def point_id(name: str, occurrence: int) -> str:
    """``name`` for the first occurrence, ``name#N`` for the N-th (N >= 2)."""
    return name if occurrence == 1 else f"{name}#{occurrence}"


#: Separator of a crash schedule's points in its string form: ``"A >> B"`` kills at ``A``, then
#: again at ``B`` while the new worker recovers from the first kill.
from crashpoint.harness.model.points import FAULT_PREFIX, THEN, WITH  # noqa: E402  (here since the probe's first version)


#: A crash spec's part that holds the worker at a point while a second worker runs: ``"P || worker"``.
ALONGSIDE = " || worker"
_HELD = re.compile(r"^(?P<held>\S.*?) held(?: until (?P<until>\S.*))?$")
#: Wall seconds a thread held at a race's point (``"A with P held until Q"``) waits for ``Q`` while no other thread of
#: its process runs before it goes on by itself: an engine that waits for the held thread, as a fixed build does,
#: stands still and never reaches ``Q`` meanwhile (:func:`_others_busy`).
RACE_HOLD_S = 2.0
#: Wall seconds a race's hold lasts at most, however busy the other threads are (a loaded machine gives a released
#: build's racing thread the CPU late; a fixed build whose other threads keep running is released here).
RACE_HOLD_LIMIT_S = 20.0
#: Lines ``P until Q: held pid N`` / ``P until Q: met|timeout after S s pid N`` of the races a run's probes held
#: (:func:`races`).
RACES_FILE = "crash.races"
#: A crash spec's last part that makes the recovery several workers at once: ``"A >> 3 workers"``.
_TOGETHER = re.compile(r"^(\d+) workers$")
#: A crash spec's part that makes one call of an effect fail instead of a kill (or beside one):
#: ``"fault:issue_refund#1=lost_response"`` (:func:`fault_part`).
_FAULT = re.compile(r"^fault:(?P<effect>[^\s#=]+)#(?P<call>[1-9]\d*)=(?P<outcome>[a-z_]+)$")
#: The outcomes a spec's fault part may give a call (a transient one: what durable code retries).
FAULT_OUTCOMES = ("timeout", "lost_response", "retryable", "rate_limited", "empty_answer", "malformed_answer")


def fault_part(effect: str, call: int, outcome: str) -> str:
    """The crash spec part that makes call ``call`` (1-based, in the run's order of that effect's calls) of ``effect``
    end with ``outcome`` (one of :data:`FAULT_OUTCOMES`): ``"fault:issue_refund#1=timeout"``."""
    return f"{FAULT_PREFIX}{effect}#{call}={outcome}"


@dataclass(frozen=True)
class Spec:
    """A crash spec (the ``crash_point`` of a sweep run) taken apart.

    Forms: ``"A"`` (kill at A), ``"A >> B"`` (and again at B during the recovery), ``"A >> 3 workers"``
    (kill at A, then 3 workers recover at once), ``"P || worker"`` (no kill: hold the worker at P while a
    second worker process runs on the same files: a zombie, or a slow old worker, next to a new one). Any of them may
    end with a **race**, ``" with P held until Q"``: the first thread (of any worker process of the run) that reaches
    ``P`` waits there until some thread or process of the run has passed ``Q`` (until the other threads of its process
    have stood still :data:`RACE_HOLD_S`, at most :data:`RACE_HOLD_LIMIT_S`), so that
    an interleaving the engine leaves to thread timing is forced: ``"before_put:t@2 with before_writes:t@pay held"``
    (``until`` omitted: the spec's first kill) kills at the step's checkpoint write while the node's pending writes
    are still in their thread.

    A part ``"fault:EFFECT#N=OUTCOME"`` (:func:`fault_part`) makes the ``N``-th call of effect ``EFFECT`` end with
    ``OUTCOME`` (``timeout``: nothing applied; ``lost_response``: applied, the answer lost; ``retryable``;
    ``rate_limited``: nothing applied, a 429 with ``retry_after``; ``empty_answer`` / ``malformed_answer``: applied, the
    call returns ``{}`` / a text that is not its answer), raised (or returned) in the worker as the tool's: a spec of
    such parts alone kills nothing (the engine's own retry runs).

    Attributes:
        kills: crash point ids to kill at, in order. ``alongside``: points where a second worker runs
            while the first is held. ``together``: workers (count) that recover at once after each kill.
        race: ``(P, Q)`` of the race clause, or ``None``. ``faults``: ``(effect, call, outcome)`` of the fault parts.
    """

    kills: tuple[str, ...] = ()
    alongside: tuple[str, ...] = ()
    together: int = 1
    race: tuple[str, str] | None = None
    faults: tuple[tuple[str, int, str], ...] = ()

    @property
    def first(self) -> str | None:
        """The first crash point the spec acts at (``None`` for an empty spec)."""
        return (self.kills or self.alongside or (None,))[0]


def parse(crash_point: str | None) -> Spec:
    """The :class:`Spec` of a crash spec string (``None`` -> an empty spec).

    Raises:
        ValueError: a race clause (``with ...``) that does not read ``P held`` or ``P held until Q``, or that names no
            ``Q`` in a spec without a kill; a part ``fault:...`` that does not read ``fault:EFFECT#N=OUTCOME`` with an
            outcome of :data:`FAULT_OUTCOMES`.
    """
    kills: list[str] = []
    alongside: list[str] = []
    faults: list[tuple[str, int, str]] = []
    together = 1
    race = None
    if crash_point and WITH in crash_point:
        crash_point, _, clause = crash_point.rpartition(WITH)
        match = _HELD.match(clause.strip())
        if match is None:
            raise ValueError(f"a race reads 'A with P held' or 'A with P held until Q', got {clause.strip()!r}")
        race = (match["held"].strip(), (match["until"] or "").strip())
    for part in (p.strip() for p in crash_point.split(THEN.strip())) if crash_point else ():
        many = _TOGETHER.match(part)
        if part.startswith(FAULT_PREFIX):
            fault = _FAULT.match(part)
            if fault is None or fault["outcome"] not in FAULT_OUTCOMES:
                raise ValueError(f"a fault part reads 'fault:EFFECT#N=OUTCOME' (OUTCOME one of "
                                 f"{', '.join(FAULT_OUTCOMES)}), got {part!r}")
            faults.append((fault["effect"], int(fault["call"]), fault["outcome"]))
        elif many and kills:
            together = int(many.group(1))
        elif part.endswith(ALONGSIDE.strip()) and "||" in part:
            alongside.append(part.split("||", 1)[0].strip())
        else:
            kills.append(part)
    if race is not None and not race[1]:
        if not kills:
            raise ValueError(f"a race without a kill needs its point: '... with {race[0]} held until Q'")
        race = (race[0], kills[0])
    return Spec(tuple(kills), tuple(alongside), together, race, tuple(faults))


def schedule(crash_point: str | None) -> list[str]:
    """The kill points of a crash spec: ``None`` -> ``[]``, ``"A >> B"`` -> ``["A", "B"]``,
    ``"A >> 3 workers"`` -> ``["A"]``, ``"P || worker"`` -> ``[]`` (see :func:`parse`)."""
    return list(parse(crash_point).kills)


class SimulatedCrash(BaseException):
    """Raised by a probe in simulated-crash mode instead of the SIGKILL (see :mod:`crashpoint.harness.process.inprocess`).

    A ``BaseException``, so that an engine's ``except Exception`` never swallows it: like a kill, it
    ends the worker wherever it is, and only what was committed remains.
    """


#: Seconds a thread stopped by another thread's kill waits for the SIGKILL to land before it goes on: a SIGKILL
#: lands in milliseconds, and a probe that records a kill without dying (tests/variants/kills.py) must still let the
#: worker run on and exit, so that the harness finds it alive (an ``error``), not hung.
KILL_LANDS_S = 10.0


class CrashProbe:
    """The worker-side probe.

    Args:
        run_dir: the run folder (log and marker live there).
        targets: crash point ids to kill at, in order: the second fires only after the first has
            killed a worker (a crash during recovery). Empty: only record.
        holds: crash point ids where the worker is held (each once per run, by the first of the run's
            workers to get there: :func:`claim_hold`) until the harness,
            which watches ``crash.paused``, has delivered an event and created ``release.N``
            (an event that arrives while a step is in flight). A hold comes before a kill at the
            same point.
        simulate: raise :class:`SimulatedCrash` at a target instead of sending SIGKILL (in-process mode).
        witness: also keep the harness's record in :func:`witness_dir` (see the module docstring); the
            occurrence counts and the kills so far are then read from it, not from the run folder.
        race: ``(P, Q)``: the first thread of the run's workers to reach ``P`` waits there until ``Q`` is in the
            run's crash point log (passed by any thread or process), until the process's other threads stood still
            :data:`RACE_HOLD_S` (at most :data:`RACE_HOLD_LIMIT_S`); recorded in
            :data:`RACES_FILE` (``met`` or ``timeout``).
    """

    def __init__(self, run_dir: str | Path, targets: list[str] | tuple[str, ...] = (),
                 holds: list[str] | tuple[str, ...] = (), simulate: bool = False, witness: bool = False,
                 race: tuple[str, str] | list[str] | None = None) -> None:
        self.simulate = simulate
        self.race = tuple(race) if race else None
        self.run_dir = Path(run_dir)
        self.targets = list(targets)
        self.holds = set(holds)
        self.held = paused_points(self.run_dir)
        log = self.run_dir / LOG_FILE
        self.fd = self.wfd = self.efd = -1
        if witness:
            folder = witness_dir(self.run_dir)
            folder.mkdir(exist_ok=True)
            self.wfd = os.open(folder / LOG_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            self.efd = os.open(folder / EVENTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            seen = witness_passed(self.run_dir) or []
            self.fired = [e.point for e in witness_events(self.run_dir) if e.kind != "start"]
            os.write(self.efd, f"start {os.getpid()}\n".encode())
        else:
            seen = log.read_text().splitlines() if log.exists() else []
            self.fired = fired_points(self.run_dir)
        self.counts: Counter[str] = Counter(line.split("#", 1)[0] for line in seen)
        self.fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self.log = (witness_dir(self.run_dir) / LOG_FILE) if witness else log  # every process of the run appends
        self._lock = threading.Lock()  # one thread at a time counts, logs and decides a kill
        self._dying = False  # a kill is decided: the SIGKILL is on its way (never set in simulated-crash mode)
        self._killer = 0  # the thread that decided it
        self._race_began = False  # a thread of this process is held at the race's point P (or was)
        self._race_awaited = False  # the kill at the race's point Q waits in this process for a thread to reach P

    def __call__(self, name: str) -> None:
        me, waited = threading.get_ident(), False
        while True:
            with self._lock:
                if self._dying and (self._killer == me or waited):
                    self._dying = False  # the SIGKILL did not land (a probe that survives its own kill): go on
                if not self._dying:
                    self.counts[name] += 1
                    ident = point_id(name, self.counts[name])
                    line = (ident + "\n").encode()
                    os.write(self.fd, line)
                    if self.wfd >= 0:
                        os.write(self.wfd, line)
                    hold = ident in self.holds and ident not in self.held
                    pending = self.targets[len(self.fired):]
                    kill = bool(pending) and ident == pending[0] and claim_kill(self.run_dir, len(self.fired))
                    early = kill and self._race_early(ident)
                    self._race_awaited = self._race_awaited or early
                    self._dying, self._killer = kill and not hold and not self.simulate and not early, me
                    break
            time.sleep(KILL_LANDS_S)  # another thread is killing the process: this one stops here
            waited = True
        if self.race is not None and ident == self.race[0] and not kill:
            self._race(ident, self.race[1])
        if kill and early:
            self._await_race(me)
        if hold:
            self._hold(ident)  # a hold comes before a kill at the same point
            if kill and not self.simulate:
                with self._lock:
                    self._dying, self._killer = True, me
        if kill:
            self._record(ident)
            if self.simulate:
                self.close()
                raise SimulatedCrash(ident)
            os.kill(os.getpid(), signal.SIGKILL)

    def close(self) -> None:
        """Close the logs (a worker process never needs to: its exit does; an in-process worker does)."""
        for name in ("fd", "wfd", "efd"):
            if getattr(self, name, -1) >= 0:
                os.close(getattr(self, name))
                setattr(self, name, -1)

    def __del__(self) -> None:
        self.close()

    def _hold(self, ident: str) -> None:
        self.held.append(ident)
        n = claim_hold(self.run_dir, ident)
        if n is None:  # another worker of the run (several recover at once) holds or held here
            return
        release = self.run_dir / f"{RELEASE_PREFIX}{n}"
        deadline = time.monotonic() + HOLD_LIMIT_S
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.001)

    def _race_early(self, ident: str) -> bool:
        """Whether the kill at ``ident`` is the race's ``Q`` come before any thread reached ``P`` (the interleaving
        the race forces, come the other way round by thread timing: ``P``'s thread is late): the kill then waits for
        ``P``'s thread to be held (:meth:`_await_race`). Called under the lock."""
        if self.race is None or self.simulate or ident != self.race[1] or self._race_began:
            return False
        try:
            return self.race[0] not in self.log.read_text().splitlines()
        except OSError:
            return False

    def _await_race(self, me: int) -> None:
        """The kill at the race's ``Q``, come first: wait until a thread of this process is held at ``P``
        (:meth:`_race`), or until no other thread has run for :data:`RACE_HOLD_S` (at most
        :data:`RACE_HOLD_LIMIT_S`: ``P`` is not coming), then decide the kill."""
        patience = _Patience()
        while not self._race_began and patience.waits():
            time.sleep(0.001)
        with self._lock:
            self._dying, self._killer = True, me

    def _race(self, ident: str, until: str) -> None:
        """Hold the calling thread at ``ident`` until ``until`` is in the run's crash point log, or until no other
        thread of this process has run for :data:`RACE_HOLD_S` (an engine waiting for the held thread; a thread
        that runs or waits for a CPU keeps the hold, so a loaded machine does not pass for a fixed build), at most
        :data:`RACE_HOLD_LIMIT_S`, once per run (the first thread of any of its processes to get here while ``until`` has not
        come yet); a line in
        :data:`RACES_FILE` says how it ended. A kill decided meanwhile (at ``until``, in another thread) ends the
        process with this thread still held."""
        with self._lock:
            awaited = self._race_awaited and not self._race_began  # the kill at ``until`` waits for this thread
        if not awaited:
            try:
                came = until in self.log.read_text().splitlines()
            except OSError:
                came = False
            if came:
                with self._lock:  # the thread that logged ``until`` decided its kill under this lock, as it logged
                    dying = self._dying
                if not dying:
                    return  # ``until`` came first and killed nothing here: nothing left to force
                # ``until`` came while this thread was between its log line at ``ident`` and here (a loaded machine
                # gives it the CPU late) and the kill there is on its way: this thread is held at ``ident`` with it,
                # not let on to make its writes durable before the SIGKILL lands

        fd = os.open(self.run_dir / RACES_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            done = b""
            while chunk := os.read(fd, 65536):
                done += chunk
            if any(line.startswith(f"{ident} until ") for line in done.decode().splitlines()):
                return  # another thread or process of the run was held here already
            os.write(fd, f"{ident} until {until}: held pid {os.getpid()}\n".encode())
        finally:
            os.close(fd)
        self._race_began = True  # recorded: a kill at ``until`` that waits for this thread may go on
        if awaited:
            time.sleep(KILL_LANDS_S)  # the kill at ``until`` is decided now, in the thread that waited for this one
        began, patience = time.monotonic(), _Patience()
        met = False
        while patience.waits():
            if self._dying:
                time.sleep(KILL_LANDS_S)  # the kill at ``until`` is on its way
            try:
                met = until in self.log.read_text().splitlines()
            except OSError:
                met = False
            if met:
                with self._lock:  # the thread that logged ``until`` has decided whether it kills there
                    dying = self._dying
                if dying:
                    time.sleep(KILL_LANDS_S)  # the kill at ``until`` is on its way: this thread never goes on
                break
            time.sleep(0.001)
        end = f"{'met' if met else 'timeout'} after {time.monotonic() - began:.3f} s"
        fd = os.open(self.run_dir / RACES_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, f"{ident} until {until}: {end} pid {os.getpid()}\n".encode())
        os.close(fd)

    def _record(self, ident: str) -> None:
        fd = os.open(self.run_dir / FIRED_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.write(fd, (ident + "\n").encode())
        os.close(fd)
        if self.efd >= 0:
            os.write(self.efd, f"{'simulate' if self.simulate else 'kill'} {os.getpid()} {ident}\n".encode())
        self.fired.append(ident)


def probe(arg: str) -> Callable[[str], None]:
    """Worker factory: ``arg`` is the JSON ``{"run_dir", "targets": [...], "holds": [...], "simulate"?,
    "witness"?}`` of :func:`probe_arg`."""
    spec = json.loads(arg)
    return CrashProbe(spec["run_dir"], spec.get("targets") or (), spec.get("holds") or (),
                      simulate=bool(spec.get("simulate")), witness=bool(spec.get("witness")), race=spec.get("race"))


def probe_arg(run_dir: str | Path, crash_point: str | None, holds: list[str] | tuple[str, ...] = (),
              simulate: bool = False, witness: bool = False) -> str:
    """The ``--probe-arg`` value for :func:`probe` (JSON, so any folder name or point id survives).

    ``crash_point`` is a crash point id or a schedule ``"A >> B"`` (see :func:`schedule`);
    ``holds`` the crash point ids where the worker waits for the harness (see :class:`CrashProbe`);
    ``simulate`` raises :class:`SimulatedCrash` instead of the SIGKILL; ``witness`` keeps the harness's
    record beside the run folder (see :class:`CrashProbe`).
    """
    parsed = parse(crash_point)
    spec: dict[str, object] = {"run_dir": str(run_dir), "targets": list(parsed.kills), "holds": list(holds)}
    if parsed.race is not None:
        spec["race"] = list(parsed.race)
    if simulate:
        spec["simulate"] = True
    if witness:
        spec["witness"] = True
    return json.dumps(spec)


#: ``RUN_DIR/kill.claimed.N``: made by the one process of a run that fires its schedule's kill number ``N`` (0-based).
KILL_CLAIM_PREFIX = "kill.claimed."


def claim_kill(run_dir: str | Path, index: int) -> bool:
    """Whether this process fires the run's kill number ``index``: the first to create ``RUN_DIR/kill.claimed.N``
    (``O_EXCL``). Occurrences are counted per process from the log as it was when the process started, so two
    workers recovering at once can both count their pass of a point as its ``#2``; the kill is then one kill, as a
    hold is one hold (:func:`claim_hold`), and the other worker goes on (before, both killed themselves and the run
    was an ``error``: "the probe fired 2 times")."""
    try:
        os.close(os.open(Path(run_dir) / f"{KILL_CLAIM_PREFIX}{index}", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
    except FileExistsError:
        return False
    return True


def claim_hold(run_dir: str | Path, ident: str) -> int | None:
    """Record in ``crash.paused`` that a worker is held at ``ident``, unless a worker of the run already
    was: the hold's number (0-based: the harness releases it with ``release.N``), or ``None``. Under an
    exclusive ``flock`` of the file, so that of several workers passing ``ident`` at once only one is held
    (the harness delivers a hold's events once, whichever worker of a recovery gets there)."""
    fd = os.open(Path(run_dir) / PAUSED_FILE, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        held = []
        while chunk := os.read(fd, 65536):
            held.append(chunk)
        lines = b"".join(held).decode().splitlines()
        if ident in lines:
            return None
        os.write(fd, (ident + "\n").encode())
        return len(lines)
    finally:
        os.close(fd)  # releases the lock


def paused_points(run_dir: str | Path) -> list[str]:
    """Crash point ids where a worker of this run was held, in order."""
    path = Path(run_dir) / PAUSED_FILE
    return path.read_text().splitlines() if path.exists() else []


def release(run_dir: str | Path, n: int) -> None:
    """Let the worker held for the ``n``-th time (0-based) go on."""
    (Path(run_dir) / f"{RELEASE_PREFIX}{n}").touch()


#: Wall seconds between two looks of a held race at the other threads of its process (:func:`_others_busy`).
RACE_POLL_S = 0.05


class _Patience:
    """How long a race waits for another thread: :meth:`waits` is ``True`` until no other thread of the process has
    run (or waited for a CPU) for :data:`RACE_HOLD_S`, or :data:`RACE_HOLD_LIMIT_S` have passed (wall seconds,
    looking at the threads every :data:`RACE_POLL_S`, :func:`_others_busy`)."""

    def __init__(self) -> None:
        self.began = self.still = self.looked = time.monotonic()
        self.seen = _others_busy()[0]

    def waits(self) -> bool:
        now = time.monotonic()
        if now - self.looked >= RACE_POLL_S:
            self.looked = now
            ticks, running = _others_busy()
            if running or ticks != self.seen:  # another thread ran meanwhile, or waits for the CPU
                self.seen, self.still = ticks, now
        return now - self.still < RACE_HOLD_S and now - self.began < RACE_HOLD_LIMIT_S


def _others_busy() -> tuple[int, bool]:
    """``(cpu_ticks, running)`` of the calling process's threads other than the caller: their user and system time
    summed (clock ticks, ``/proc/self/task/*/stat`` fields 14-15) and whether one of them is running or waiting for
    a CPU (state ``R``) or in disk I/O (``D``). A thread blocked on a lock, a future or a sleep is ``S`` and spends no
    ticks. ``(0, False)`` where ``/proc`` is not there (the hold then lasts :data:`RACE_HOLD_S`, as on a still
    engine). Source: proc(5)."""
    own, ticks, running = str(threading.get_native_id()), 0, False
    try:
        tids = os.listdir("/proc/self/task")
    except OSError:
        return 0, False
    for tid in tids:
        if tid == own:
            continue
        try:
            with open(f"/proc/self/task/{tid}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue  # the thread ended meanwhile
        running = running or fields[0] in (b"R", b"D")
        ticks += int(fields[11]) + int(fields[12])
    return ticks, running


def races(run_dir: str | Path) -> list[dict[str, object]]:
    """The races a run's probes held (:data:`RACES_FILE`): ``[{"held", "until", "pid", "end": "met" | "timeout"
    | "killed", "seconds"}]`` in the order they were held (``killed``: the process died while held, as the race
    meant: a kill at ``until``)."""
    path = Path(run_dir) / RACES_FILE
    out: dict[tuple[str, str], dict[str, object]] = {}
    for line in path.read_text().splitlines() if path.exists() else ():
        head, _, tail = line.partition(": ")
        held, _, until = head.partition(" until ")
        words = tail.split()
        entry = out.setdefault((held, until), {"held": held, "until": until, "pid": None, "end": "killed",
                                               "seconds": None})
        if words[:1] == ["held"]:
            entry["pid"] = int(words[-1])
        elif words[:1] in (["met"], ["timeout"]):
            entry["end"], entry["seconds"] = words[0], float(words[2])
    return list(out.values())


def fired_points(run_dir: str | Path) -> list[str]:
    """Crash point ids that killed a worker of this run, in order."""
    path = Path(run_dir) / FIRED_FILE
    return path.read_text().splitlines() if path.exists() else []


def recovery_points(log: list[str], first: str) -> list[str]:
    """The crash points passed after ``first`` in a run's log: those of the recovery from a kill at ``first``."""
    return log[log.index(first) + 1:] if first in log else []


def passed(run_dir: str | Path) -> list[str]:
    """Crash point ids recorded in a run folder, in order (empty when none)."""
    log = Path(run_dir) / LOG_FILE
    return log.read_text().splitlines() if log.exists() else []


def fired(run_dir: str | Path, crash_point: str | None) -> bool:
    """``True`` once every kill of ``crash_point`` (a spec) has killed a worker here and every worker held
    for a second one (``P || worker``) was held."""
    spec = parse(crash_point)
    return bool(crash_point) and fired_points(run_dir) == list(spec.kills) and \
        all(p in paused_points(run_dir) for p in spec.alongside)
