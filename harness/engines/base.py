"""The engine protocol: what an engine a target runs on (LangGraph, DBOS, Temporal, ...) declares and answers.

A target is a team's own workflow code on a durable engine. crashpoint drives it in worker processes it kills with
a real SIGKILL (:mod:`crashpoint.harness.run.target_driver`); everything the driver, the sweep, the target file's
validation and the command line need to know about one engine comes from **one object**, an instance of a subclass
of :class:`Engine`, found through :func:`engine_for` (in the spirit of Jepsen's ``DB`` protocol with optional
``Kill`` / ``Pause`` protocols, and of Hypothesis's provider ABC with ``ClassVar`` capability flags). Nothing
outside an engine's own modules names an engine (``tests/unit/test_layout.py`` greps for it).

Adding an engine ``NAME`` is two modules in this package and one schema block:

* ``harness/engines/NAME.py``, the **engine module** (imported by the harness: it must not import the engine's
  library). It defines exactly one subclass of :class:`Engine` whose ``name`` is ``NAME``, with the declarations
  below (``name``, ``title``, ``worker_module``, ``packages``, ``recovery_kinds``; the optional capabilities it
  has) and the methods its capabilities need; rules over what its workers record beyond effects
  (``TargetOutcome.engine_facts``) are defined there too, with :func:`rule`.
* ``harness/engines/NAME_worker.py``, the **worker module**: the process crashpoint starts and kills
  (``python -m``, or forked from a warm zygote that imported it). It takes the driver's command line
  (:func:`crashpoint.harness.engines.workerlib.worker_parser`, plus what this engine's methods add:
  :meth:`Engine.identity_args`, :meth:`Engine.server_args`), reads ``target.json`` (:func:`~.workerlib.open_run`),
  builds the crash probe (:func:`~.workerlib.worker_probe`) and calls it at each point where the engine makes state
  durable (ids ``KIND:SUBJECT``), patches the target's effects (:func:`~.workerlib.patch_effects`), then per
  ``--phase``: ``start`` submits each input not yet in ``submitted.log``, ``recover`` resumes what is unfinished
  from the engine's durable state alone (a new process), ``answer`` delivers ``answers.json``'s answers; it appends
  ``PID PHASE [IDENTITY]`` to ``pids.log`` first and writes ``threads.json`` last (thread -> ``{"status":
  finished | waiting | running | stuck | no_checkpoint | not_submitted, "values", "waiting": [{"interrupt",
  "node"}], ...}``),
  and exits with :data:`~.workerlib.UNSUPPORTED_RC` after a line ``unsupported: WHY`` when the installed release
  lacks what the run asks (a durability mode it does not declare).
* the target file's block of its options (``scenarios/schemas/target.schema.json``, ``properties.OPTIONS_KEY``)
  when it has options (:attr:`Engine.options_key`); the ``engine`` enum is filled from this registry.

The package finds its engines itself (no list to edit): every module ``NAME`` of it that has a ``NAME_worker``
beside it is an engine module (:func:`engines`). What an engine's author runs first is the conformance kit
(:mod:`crashpoint.harness.run.engine_conformance`; ``tests/adapters/test_engine_conformance.py`` runs it on each
installed engine): the kill lands, a new process resumes from the durable files alone, the golden run records the
engine's crash points with no code of the team's, a broken variant is caught. ``docs/how-to/add-an-engine.md``
walks through it.

Optional capabilities are asked before use (Jepsen's ``satisfies?``): the fault kinds a case holds say what they
need (:attr:`crashpoint.harness.faults.kinds.FaultKind.needs`, among :meth:`Engine.capabilities`); a target file's
case needing one its engine lacks (several workers at once, a server crash) exits 2 at validation, a run handed such
a case anyway (a case built in Python, a generated schedule) is ``unsupported`` before any worker starts, and a
durability mode it does not have is ``unsupported`` at run time (its worker says so), never a pass.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, ClassVar, Protocol

from crashpoint.errors import CaseError
from crashpoint.harness.model import rules as registry
from crashpoint.harness.model.outcomes import TargetOutcome
from crashpoint.harness.model.rules import Finding
from crashpoint.versions import installed_versions

if TYPE_CHECKING:  # pragma: no cover
    from crashpoint.harness.load.target import Target

#: The crash point kinds of a target's own effects (:func:`crashpoint.effect`), whatever its engine: what an
#: engine records beyond them is its own (the conformance kit asks for at least one).
EFFECT_KINDS = ("before_effect:", "after_effect:")


#: The optional capability flags of an :class:`Engine` a fault kind may need (:meth:`Engine.capabilities`).
CAPABILITIES = ("server", "worker_identities", "rendezvous")


class EngineServer(Protocol):
    """A server that keeps a run's workflow state while its workers are killed (:attr:`Engine.server`).

    Attributes:
        address: where workers reach it (``HOST:PORT``). ``namespace``: the run's part of it. ``pids``: every
            server process started, in order (the last is the live one).
    """

    address: str
    namespace: str
    pids: list[int]

    def start(self) -> Any:
        """Start it (or lease the run's part of a shared one) and wait until it serves."""

    def kill(self) -> None:
        """SIGKILL it (verified gone), or give the run's lease back; the run's end."""

    def restart(self) -> None:
        """A server crash: SIGKILL, then a new server on the same durable state (refused by a shared one)."""


class Engine:
    """One engine a target can run on: its declarations (``ClassVar``) and its answers to the harness.

    Subclass it in ``harness/engines/NAME.py`` (see the module docstring); the registry makes one instance. The
    methods have defaults for an engine without the capability; override those the engine has.
    """

    #: The target file's ``engine:`` value, also the engine module's name (``NAME`` -> ``harness/engines/NAME.py``).
    name: ClassVar[str]
    #: How messages name it (``DBOS``, ``LangGraph``).
    title: ClassVar[str]
    #: The worker module the driver starts (``python -m``): ``crashpoint.harness.engines.NAME_worker``.
    worker_module: ClassVar[str]
    #: Distributions whose installed releases :meth:`version` reports (the engine and its storage).
    packages: ClassVar[tuple[str, ...]]
    #: Listing order (messages, the schema's enum): lowest first.
    order: ClassVar[int] = 100
    #: The engine of a :class:`~crashpoint.harness.load.target.Target` built in Python without one (one engine has
    #: it; a target file always names its engine).
    default: ClassVar[bool] = False
    #: Durability modes (``sync``, ``async``, ``exit``) its worker runs; others are ``unsupported`` (the worker
    #: says why; the conformance kit checks that it does).
    durability_modes: ClassVar[tuple[str, ...]] = ("sync",)
    #: Crash point kinds (``KIND:``) a recovery is killed at again with ``crash="recovery"`` (the first point of
    #: each kind of the recovery, in this order): the kinds its worker and the team's effects record.
    recovery_kinds: ClassVar[tuple[str, ...]] = EFFECT_KINDS
    #: Kinds the second kill of a sampled pair prefers (see :meth:`sampled_second`): points numbered alike in every
    #: run, such as a checkpoint write between supersteps. Empty: the point about the same workflow as the first.
    pair_kinds: ClassVar[tuple[str, ...]] = ()
    #: Several workers with identities of their own can recover at once (a case's ``workers: K``); the engine then
    #: answers :meth:`identity_args`, and ``recovery`` other than ``explicit`` is allowed.
    worker_identities: ClassVar[bool] = False
    #: Its worker can hold the two processes of a duplicated request together inside a step (``--rendezvous 2``), so
    #: that they provably overlap (a duplicate that never overlapped is noted as not tested).
    rendezvous: ClassVar[bool] = False
    #: Workflow state lives in a server that outlives killed workers: the engine answers :meth:`server_for` and
    #: :meth:`server_args`, and a case's ``server_crash`` is allowed.
    server: ClassVar[bool] = False
    #: Runs at once per CPU for a sweep given no ``workers`` (``None``: the sweep's default), for engines whose runs
    #: mostly wait (on a server's timeouts).
    workers_per_cpu: ClassVar[int | None] = None
    #: The target file's block of this engine's options (``NAME:``; ``None``: none), :attr:`Target.options`; its
    #: schema is ``properties.OPTIONS_KEY`` of ``scenarios/schemas/target.schema.json``.
    options_key: ClassVar[str | None] = None
    #: A deploy case's version names an entry point (``versions: {NAME: module:attr}``) that every later worker runs;
    #: ``False``: the engine reads the version's code itself (its worker gets ``--version NAME``).
    deploy_replaces_entry: ClassVar[bool] = True
    #: What the engine does to a node that interrupts (waits for a human) when its thread resumes, when it runs the
    #: node again from its start (``None``: it does not): the note of a repeat its key answered
    #: (:func:`crashpoint.harness.judge.target_rules.keyed_repeats`).
    interrupted_rerun: ClassVar[str | None] = None
    #: How a team makes this engine retry a failed effect call, in the engine's words: the hint of a thread that
    #: stopped at an injected effect fault (:mod:`crashpoint.harness.judge.fault_stops`).
    retry_hint: ClassVar[str] = "retry the call"
    #: What its workers run faster with time compressed (its options' ``time_scale``, default
    #: :data:`~crashpoint.harness.engines.workerlib.TIME_SCALE`; ``1`` turns it off), in the engine's words (Temporal:
    #: "durable timers (workflow.sleep, wait_condition timeouts)"); ``None``: nothing (no durable timers).
    compressed_time: ClassVar[str | None] = None

    # ------------------------------------------------------------------ what it is

    def capabilities(self) -> frozenset[str]:
        """The names of its optional capabilities it has (:data:`CAPABILITIES`: ``server``, ``worker_identities``,
        ``rendezvous``), which fault kinds ask for (:attr:`crashpoint.harness.faults.kinds.FaultKind.needs`)."""
        return frozenset(c for c in CAPABILITIES if getattr(self, c))

    def version(self) -> str:
        """``PACKAGE X, PACKAGE Y`` of :attr:`packages` (``PACKAGE (not installed)`` for a missing one)."""
        return installed_versions(*self.packages)

    # ------------------------------------------------------------------ its target file

    def options(self, data: dict[str, Any]) -> dict[str, Any]:
        """This engine's options from a target file's data (the :attr:`options_key` block; ``{}`` without one)."""
        return dict(data.get(self.options_key) or {}) if self.options_key else {}

    def versions(self, target: Target) -> tuple[str, dict[str, Any]]:
        """``(field, NAME -> code)``: where a deploy case's version names are, and what they map to (by default the
        target's ``versions``, each an entry point)."""
        return "versions", target.versions

    def validate(self, target: Target) -> None:
        """The engine's own checks of a target, after the schema's and the generic ones (by default: a deploy case
        names a version of :meth:`versions` whose code is not the target's own).

        Raises:
            CaseError: with the offending field (``cases[N].deploy``, or ``cases[N].faults[M].version`` of a deploy
                fault); the loader adds file and line (exit 2).
        """
        where, known = self.versions(target)
        for n, c in enumerate(target.cases):
            if c.deploy and c.deploy not in known:
                raise CaseError(f"case {c.name!r} deploys {c.deploy!r}, which {where} does not name",
                                file=target.file, field=f"cases[{n}].{c.where('deploy', 'version')}")
            if c.deploy and self.deploy_replaces_entry and known[c.deploy] == target.entry:  # the same code again
                raise CaseError(f"case {c.name!r} deploys {c.deploy!r}, whose entry {target.entry!r} is the target's own: "
                                "the deploy would change no code (name the next version's entry)",
                                file=target.file, field=f"{where}.{c.deploy}")

    def named_objects(self, target: Target) -> list[tuple[str, list[str | int], str]]:
        """``(field, its path in the file, "module:attr")`` of each object its options name beyond the entry,
        invariants and effects (``crashpoint run`` imports each before a sweep)."""
        return []

    def time_scale(self, target: Target) -> float:
        """How many times faster than written its workers run what :attr:`compressed_time` names (the options'
        ``time_scale``; 1: as written, and for an engine that compresses nothing)."""
        from crashpoint.harness.engines.workerlib import TIME_SCALE

        if not self.compressed_time:
            return 1.0
        return float(target.options.get("time_scale", TIME_SCALE))

    def time_note(self, target: Target) -> str | None:
        """The sweep's line saying what time its workers compress and how much (``None``: time runs as written)."""
        from crashpoint.harness.engines.workerlib import REAL_FIRST_S, compressed_s

        scale = self.time_scale(target)
        if scale <= 1:
            return None
        return (f"time compressed {scale:g}x past the first {REAL_FIRST_S:g} s of each timer: {self.compressed_time} "
                f"(3 days take {compressed_s(3 * 86400, scale):.2f} s, an hour {compressed_s(3600, scale):.2f} s; "
                f"{self.options_key}.time_scale: 1 turns it off)")

    # ------------------------------------------------------------------ a run

    def running(self, target: Target, version: str | None) -> Target:
        """The target as a worker runs it after a deploy of ``version`` (``None``: no deploy yet): with
        :attr:`deploy_replaces_entry`, the entry is the version's (``Target.running``); else as it is."""
        return target.running(version) if version and self.deploy_replaces_entry else target

    def run_database(self, data: dict[str, Any], run_dir: Path) -> Callable[[], None] | None:
        """Give the run a database of its own on a server the target names, written into ``data`` (the run's
        ``target.json``) before any worker reads it; returns the call that drops it when the run ends (``None``:
        the engine keeps its state in the run folder)."""
        return None

    def identity_args(self, label: str, identity: str, seen: list[str]) -> list[str]:
        """The worker arguments that give a process its own identity (:attr:`worker_identities`): ``label``, its
        name among the run's processes (``pids.log``); ``identity``, the engine identity it runs with (a dead
        worker's, whose work it then recovers, or its own ``label``); ``seen``, every identity of the run so far
        (the exited ones, which it recovers explicitly)."""
        raise NotImplementedError(f"{self.name}: no worker identities")

    def server_for(self, run_dir: Path, mode: str, crash: bool) -> EngineServer | None:
        """The run's server (:attr:`server`; ``None`` without one), not started: with ``mode`` ``shared`` the run's
        part of a long-lived server, or (``crash``: the case crashes the server) one of its own; ``run`` one of its
        own; ``worker`` one of its own, restarted before every worker (a benchmark's baseline)."""
        return None

    def crash_server(self, server: EngineServer, left_s: float) -> None:
        """A case's server crash, where the run's workers are at rest and its workflows wait: SIGKILL of ``server``
        and a new one on the same durable state (``server.restart()``, verified). ``left_s``: the run's remaining
        budget in seconds, what an engine whose runs share one crash (Temporal's crash groups) may wait for the
        others in part.

        Raises:
            RuntimeError: the restart failed, or (a shared crash) it happened without this run (an ``error``).
        """
        server.restart()

    def server_notes(self, server: EngineServer) -> tuple[list[str], list[str]]:
        """``(notes, not_tested)`` of the run's server, asked once the run gave it back (``server.kill()``): what to
        say of it (a crash shared with other runs), and why the run did not test what it claims (its server crashed
        at a moment it did not choose: the verdict is ``error``). ``([], [])`` by default."""
        return [], []

    def server_args(self, server: EngineServer) -> list[str]:
        """The worker arguments that point it at ``server``."""
        return ["--address", server.address, "--namespace", server.namespace]

    def facts(self, run_dir: Path) -> dict[str, Any]:
        """What its workers recorded beyond effects (``TargetOutcome.engine_facts``), read from the run folder."""
        return {}

    def notes(self, run: TargetOutcome) -> list[str]:
        """What the run showed of the engine's own behaviour worth a note, not a finding (LangGraph: a node run again
        against its ``sync`` promise whose repeats the team's keys answered ``duplicate``), read from the finished
        outcome (its ``engine_facts`` filled); one text per note, ``[]`` by default."""
        return []

    # ------------------------------------------------------------------ a sweep

    def sampled_second(self, recovery: list[str], first: str = "") -> list[str]:
        """The second kill of a sampled pair: the recovery's first point of a :attr:`pair_kinds` kind, else its first
        crash point about what the first kill (``first``) was about, else its first crash point. A point between
        supersteps (a checkpoint write, numbered by occurrence, ``#2``) has the same id in every run; a node or effect
        point of the superstep the first kill cut does not (parallel branches of the killed process may or may not
        have passed it: the pair would miss its second point). Without such kinds, the workflow the first kill cut
        resumes from where that kill left it, while another workflow's first point depends on which one the recovery
        picks up first (a race: in an example with two queued workflows, a kill at one's step result followed by the
        other's first claim from the queue was never reached in about 1 sweep in 4)."""
        preferred = [p for p in recovery if self.pair_kinds and p.startswith(self.pair_kinds)]
        if preferred:
            return preferred[:1]
        subject = point_subject(first) if first else ""
        own = [p for p in recovery if subject and point_subject(p) == subject]
        return (own or recovery)[:1]

    def sampled_extras(self, golden: TargetOutcome, durability: str, target: "Target", case: Any) -> list[str]:
        """The crash specs a sampled sweep (the default) adds for a unit (``case`` of ``target`` in mode
        ``durability``) whose golden run is ``golden``, beyond its single kills and pairs: :meth:`race_specs` by
        default; an engine adds its own (DBOS: a two-worker recovery where work is queued)."""
        return self.race_specs(golden, durability)

    def race_specs(self, golden: TargetOutcome, durability: str) -> list[str]:
        """The crash specs with a race (``"A with P held"``, :class:`~crashpoint.harness.process.crashpoints.Spec`) a
        sampled sweep (the default) adds for a unit whose golden run is ``golden``, in durability mode ``durability``:
        interleavings of the engine's own threads or processes that its timing decides, forced (by default none)."""
        return []

    def recovery_points(self, after: list[str]) -> list[str]:
        """The points a recovery (``after``: its crash points, in order) is killed at again with ``crash="recovery"``:
        the first of each of :attr:`recovery_kinds`, in that order."""
        chosen = []
        for kind in self.recovery_kinds:
            hit = next((p for p in after if p.startswith(kind)), None)
            if hit:
                chosen.append(hit)
        return chosen

    def close_after_sweep(self) -> None:
        """Release what a sweep's runs shared (a server nobody uses any more); called once the sweep's runs ended."""


def point_subject(point: str) -> str:
    """What a crash point id is about: the workflow (thread) or effect between its kind and its ``@``/``#``
    (``before_result:refund-1002@issue`` -> ``refund-1002``; ``after_effect:issue_refund#2`` -> ``issue_refund``)."""
    rest = point.partition(":")[2]
    return rest.split("@", 1)[0].split("#", 1)[0]


# ---------------------------------------------------------------------- rules an engine brings

#: Rule id -> ``fn(target, run, golden)`` of every rule defined in an engine module (:func:`rule`).
RULES: dict[str, Callable[..., list[Finding]]] = {}


def rule(rule_id: str, description: str,
         kind: str = "property") -> Callable[[Callable[..., list[Finding]]], Callable[..., list[Finding]]]:
    """Register ``fn(target, run: TargetOutcome, golden: TargetOutcome | None) -> list[Finding]`` as rule ``rule_id``
    (``target.NAME``) in the project's registry (:mod:`crashpoint.harness.model.rules`), judging target runs
    (``subjects=("target",)``), of ``kind`` ``property`` or ``expectation``, and in :data:`RULES`. For rules over an
    engine's ``engine_facts``, defined in its engine module: a run of another engine records none (no finding)."""
    def register(fn: Callable[..., list[Finding]]) -> Callable[..., list[Finding]]:
        def check(ctx: registry.RuleContext) -> list[Finding]:
            if not isinstance(ctx.outcome, TargetOutcome):
                return []
            return fn(ctx.subject, ctx.outcome, ctx.golden)  # a target run's context holds its Target as the subject

        check.__module__, check.__qualname__, check.__doc__ = fn.__module__, fn.__qualname__, fn.__doc__
        registry.rule(rule_id, description=description, subjects=("target",), kind=kind)(check)
        RULES[rule_id] = fn
        return fn
    return register


def engine_rules() -> dict[str, Callable[..., list[Finding]]]:
    """Every engine's rules (:data:`RULES`), each engine module imported first (in :func:`engines` order)."""
    engines()
    return dict(RULES)


# ---------------------------------------------------------------------- the registry

_lock = threading.Lock()
_found: dict[str, Engine] = {}


def _discover() -> dict[str, Engine]:
    """Import every engine module of this package (a module ``NAME`` with ``NAME_worker`` beside it) and make its
    one :class:`Engine` subclass's instance, by name, in :attr:`Engine.order`.

    Raises:
        TypeError: an engine module defines no Engine subclass, or several, or one whose ``name`` or
            ``worker_module`` is not its module's.
    """
    package = importlib.import_module(__package__ or "crashpoint.harness.engines")
    names = {m.name for m in pkgutil.iter_modules(package.__path__)}
    found = []
    for name in sorted(n for n in names if f"{n}_worker" in names):
        module = importlib.import_module(f"{package.__name__}.{name}")
        classes = [c for c in vars(module).values()
                   if isinstance(c, type) and issubclass(c, Engine) and c.__module__ == module.__name__]
        if len(classes) != 1:
            raise TypeError(f"{module.__name__}: an engine module defines exactly one Engine subclass "
                            f"(found {len(classes)})")
        engine = classes[0]()
        if engine.name != name or engine.worker_module != f"{package.__name__}.{name}_worker":
            raise TypeError(f"{classes[0].__qualname__}: name {engine.name!r} and worker_module "
                            f"{engine.worker_module!r} must be the module's ({name!r}, {name}_worker)")
        found.append(engine)
    return {e.name: e for e in sorted(found, key=lambda e: (e.order, e.name))}


def engines() -> tuple[Engine, ...]:
    """Every engine, in :attr:`Engine.order` (found once per process)."""
    with _lock:
        if not _found:
            _found.update(_discover())
        return tuple(_found.values())


def engine_names(**capabilities: bool) -> tuple[str, ...]:
    """The engines' names, in order; with ``capabilities`` (``server=True``), only those whose flags match."""
    return tuple(e.name for e in engines() if all(getattr(e, k) == v for k, v in capabilities.items()))


def default_engine() -> Engine:
    """The engine whose :attr:`Engine.default` is set (exactly one has it).

    Raises:
        TypeError: none or several have it.
    """
    chosen = [e for e in engines() if e.default]
    if len(chosen) != 1:
        raise TypeError(f"exactly one engine is the default, found {len(chosen)}: {[e.name for e in chosen]}")
    return chosen[0]


def engine_for(name: str) -> Engine:
    """The engine called ``name``.

    Raises:
        KeyError: no such engine (the message names the known ones).
    """
    engines()
    try:
        return _found[name]
    except KeyError:
        raise KeyError(f"no engine {name!r}; known: {', '.join(_found)}") from None


__all__ = ["Engine", "EngineServer", "EFFECT_KINDS", "RULES", "rule", "engine_rules", "engines", "engine_names",
           "default_engine", "engine_for", "point_subject"]
