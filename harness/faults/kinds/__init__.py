"""Fault kinds as registered objects: one module per kind, each bundling everything about it.

A fault is a JSON-able mapping with a ``kind`` (``{"kind": "kill", "at": POINT}``), written the
same way in case files (``faults:``) and in generated fault schedules. Each kind is one module of
this package defining a subclass of :class:`FaultKind` decorated with :func:`register`; the
package finds its modules itself (no list to edit), in the order of their ``order`` attribute.
A kind says (the parts of a Jepsen nemesis package, for a workflow run):

* ``check``: cross-references the JSON Schema cannot see (a tool the workflow does not use), and
  ``normalize``: its defaults filled;
* ``apply``: what it does to a case when a schedule is applied (:func:`crashpoint.harness.faults.
  schedule.apply`): rewrite the external events, or stay in the case's ``faults`` to be injected;
* ``strategy``: its hypothesis generator over what a golden run passed (:class:`Space`);
* ``inject``: how the driver injects it into a run (:class:`Injection`: kills, holds, tool scripts);
* ``columns`` / ``coverage``: its column of the durability-coverage matrix;
* ``describe``: a short phrase; ``summary``: the line of README's fault-kinds table;
* ``masked`` / ``is_masked``: whether a correct engine must hide it completely (the run ends as
  without it, checked with ``like_fault_free``).

Kinds hold for one or both **subjects** (``subjects``): a pack's case (the reference engine or an adapter) and a
target's case (the team's own code on an engine, :mod:`crashpoint.harness.load.target`), spelt the same in both
files' ``faults:`` wherever the fault means the same thing (a kill at a crash point, a tool or effect call that
fails, times out or loses its answer, a request delivered twice, several workers recovering at once, a code deploy).
On a target every kind of the subject is injected by the target driver (``inject``); a kind that needs an engine
capability there (``needs``: a server, workers with identities) is refused at validation on an engine without it.
A target's generator draws over a :class:`Space` of ``subject`` ``"target"`` (its golden run's crash points and
effect calls, the engine's capabilities, the requests and versions it has).

The case schema (``scenarios/schemas/case.schema.json``) holds one definition per kind,
``$defs.fault_<kind>``; a test checks that registry and schema agree. Case files written before
kinds had one spelling are still read: ``{kill: P}``, ``{at: P, event: E}`` and ``{tool, call,
outcome}`` (see :func:`normalize`).

This module imports neither hypothesis nor the loader: the driver imports it, and stays light.
"""

from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Iterable, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from hypothesis.strategies import SearchStrategy

    from crashpoint.harness.load.loader import Case, Pack

Fault = dict[str, Any]


class FaultError(ValueError):
    """A fault that is not valid for its case: ``message`` and the ``path`` of the offending field
    inside the fault (``("tool",)``), which the loader turns into file, line and field."""

    def __init__(self, message: str, path: tuple[str | int, ...] = ()) -> None:
        super().__init__(message)
        self.path = path


@dataclass
class Plan:
    """A case being rewritten by a fault schedule (what :meth:`FaultKind.apply` changes).

    Attributes:
        tools: the case's tool events (the scripted world), in order.
        external: the external events; ``external[0]`` is the start request.
        faults: the faults the new case carries (the ones the driver injects), in order.
        workflow: the workflow definition data; ``gate`` its first ``human_gate`` (or ``None``).
    """

    tools: list[dict[str, Any]]
    external: list[dict[str, Any]]
    faults: list[Fault]
    workflow: dict[str, Any]
    gate: dict[str, Any] | None


@dataclass
class Space:
    """What a golden run passed, over which the generator draws faults.

    Attributes:
        points: crash point ids, in the order passed.
        calls: ``{tool: calls the golden run made}`` (a fault on a call that never happens tests nothing).
        tools: every tool the workflow uses (used when the golden run made no call).
        n_external: external events of the case, the start request included (count, at least 1).
        subject: ``"pack"`` (the fields above) or ``"target"``: a target's case, for which ``tools`` are the
            target's effects and ``calls`` the golden run's effect calls, and:
        capabilities: the target engine's capabilities a kind may need (:attr:`FaultKind.needs`: ``server``,
            ``worker_identities``), those the engine has.
        requests: the requests the target's golden run delivered that a ``duplicate`` can repeat (``start``,
            ``answer``). ``versions``: the code versions a ``deploy`` can name. ``waits``: the golden run came to rest
            with a workflow still waiting (so a deploy or a server crash, which happen then, take place).
    """

    points: list[str]
    calls: dict[str, int]
    tools: list[str]
    n_external: int
    subject: str = "pack"
    capabilities: frozenset[str] = frozenset()
    requests: tuple[str, ...] = ()
    versions: tuple[str, ...] = ()
    waits: bool = False


@dataclass
class Injection:
    """What the driver injects into one run, collected from a case's ``faults`` by :func:`injection`.

    Attributes:
        kills: crash point ids at which a worker is SIGKILLed, in order (each during the recovery
            from the one before).
        holds: ``{crash point: [external event, ...]}``: a worker held there while the events are delivered.
        tool_faults: faults placed on a tool's ``call``-th call (see ``driver.tool_script``).
        together: worker processes (count) that recover at once after each kill (the ``workers`` kind).
        duplicates: a target's requests delivered twice at once (``start``, ``answer``; the ``duplicate`` kind).
        deploy: the code version a target's workers run once workflows wait (the ``deploy`` kind), or ``None``.
        deploy_at: the crash point the deploy happens at instead (its worker SIGKILLed there, the point also in
            ``kills``), or ``None``: once workflows wait.
        server_crash: a target engine's server is SIGKILLed once workflows wait (the ``server_crash`` kind).
    """

    kills: list[str] = field(default_factory=list)
    holds: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    tool_faults: list[Fault] = field(default_factory=list)
    together: int = 1
    duplicates: list[str] = field(default_factory=list)
    deploy: str | None = None
    deploy_at: str | None = None
    server_crash: bool = False

    def missed(self, fired: Sequence[str], paused: Sequence[str]) -> list[str]:
        """What never fired in a run, as phrases (a vacuity signal): kills beyond the ``fired`` ones
        (crash points a kill fired at, in order) and holds at points not in ``paused``."""
        return [f"kill at {k}" for k in self.kills[len(fired):]] + \
            [f"event {ev['type']} at {point}" for point, evs in self.holds.items() if point not in paused for ev in evs] \
            + ([f"{self.together} workers at once: no kill to recover from"] if self.together > 1 and not fired else [])


class FaultKind:
    """One kind of fault; subclass it in a module of this package and decorate it with :func:`register`.

    Class attributes:
        name: the ``kind`` value. ``order``: position in the generator's choice and in tables.
        summary: one line, its fields and meaning (README's fault-kinds table).
        masked: a correct engine hides every fault of this kind (the run must end as without it).
        injected: in a pack's case, faults of this kind stay in the case's ``faults`` and the driver injects them;
            otherwise :meth:`apply` rewrites the case's events and the fault is gone (a target's driver injects
            every kind of its subject).
        columns: coverage-matrix columns this kind fills.
        subjects: the subjects whose cases may hold it: ``"pack"``, ``"target"`` or both (a target's case file
            refuses the others; a pack's case file holds the injected pack kinds).
        needs: on a target, the engine capabilities it needs (names of
            :class:`~crashpoint.harness.engines.base.Engine` flags: ``server``, ``worker_identities``); a case on an
            engine without one is refused at validation (it would run without the fault: a pass not earned).
    """

    name: ClassVar[str] = ""
    order: ClassVar[int] = 100
    summary: ClassVar[str] = ""
    masked: ClassVar[bool] = False
    injected: ClassVar[bool] = False
    columns: ClassVar[tuple[str, ...]] = ()
    #: README's "masked" column when :attr:`masked` alone does not say it ("within the retry budget").
    masking: ClassVar[str] = ""
    subjects: ClassVar[tuple[str, ...]] = ("pack",)
    needs: ClassVar[tuple[str, ...]] = ()
    #: The line of the docs' table of a target's spelling (empty: the same as :attr:`summary`).
    target_summary: ClassVar[str] = ""

    def normalize(self, fault: Fault) -> Fault:
        """The fault with its defaults filled (a new mapping)."""
        return dict(fault)

    def check(self, fault: Fault, tools: Iterable[str], workflow: str) -> None:
        """Raise :class:`FaultError` when the fault cannot apply to the workflow ``workflow``, which uses ``tools``."""

    def apply(self, fault: Fault, plan: Plan) -> None:
        """Apply the fault to ``plan``; injected kinds keep it in ``plan.faults`` (the default)."""
        plan.faults.append(self.normalize(fault))

    def strategy(self, space: Space) -> "SearchStrategy[Fault] | None":
        """A hypothesis strategy of faults of this kind over ``space``, or ``None`` (never generated)."""
        return None

    def describe(self, fault: Fault) -> str:
        """The fault as a short phrase."""
        return self.name

    def is_masked(self, fault: Fault, schedule: Sequence[Fault], case: "Case | None", pack: "Pack | None") -> bool:
        """``True`` when a correct engine must hide this fault of ``schedule`` (default: :attr:`masked`)."""
        return self.masked

    def check_target(self, fault: Fault) -> None:
        """Raise :class:`FaultError` when the (normalized) fault is not one a target's case can hold in this
        spelling (its ``path`` inside the fault); the engine's capabilities are checked by the loader
        (:attr:`needs`)."""

    def masked_on_target(self, fault: Fault) -> bool:
        """``True`` when a target's correct code (on a correct engine) must hide this fault: the run ends as the same
        case's run without its faults (default: :attr:`masked`)."""
        return self.masked

    def inject(self, fault: Fault, into: Injection) -> None:
        """Add the fault to what the driver injects (injected kinds only)."""
        raise ValueError(f"fault kind {self.name!r} rewrites the case's events; it is not injected")

    def coverage(self, fault: Fault) -> list[tuple[str, str | None]]:
        """``(column, where)`` cells a run of a case with this fault exercised (``where``: a crash point
        ``kind:name`` the matrix maps to a step, ``None`` for the whole workflow)."""
        return []

    def script_entry(self, fault: Fault) -> dict[str, Any]:
        """For faults on a tool call (with ``tool`` and ``call``): the tool-script entry each faulted
        call gets (``{"type", "tool", ...}``; see :meth:`script`)."""
        raise ValueError(f"fault kind {self.name!r} is not placed on a tool call")

    def script(self, ledger: Any, entry: dict[str, Any]) -> None:
        """Queue ``entry`` (one of :meth:`script_entry`'s) on the run's ledger."""
        raise ValueError(f"fault kind {self.name!r} scripts no tool call")


_REGISTRY: dict[str, FaultKind] = {}
_LOADED = False


def register(cls: type[FaultKind]) -> type[FaultKind]:
    """Class decorator: register one instance of ``cls`` under ``cls.name``.

    Raises:
        ValueError: no name, or a name already registered by another class.
    """
    if not cls.name:
        raise ValueError(f"{cls.__name__}: a fault kind needs a name")
    old = _REGISTRY.get(cls.name)
    if old is not None and type(old).__qualname__ != cls.__qualname__:
        raise ValueError(f"fault kind {cls.name!r} is registered twice ({type(old).__name__}, {cls.__name__})")
    _REGISTRY[cls.name] = cls()
    return cls


def _load() -> None:
    global _LOADED
    if not _LOADED:
        for info in pkgutil.iter_modules(__path__):
            if not info.name.startswith("_"):
                importlib.import_module(f"{__name__}.{info.name}")
        _LOADED = True


def all_kinds() -> list[FaultKind]:
    """Every registered fault kind, by ``order`` then name."""
    _load()
    return sorted(_REGISTRY.values(), key=lambda k: (k.order, k.name))


def listed() -> tuple[str, ...]:
    """The kind names as the package's module names, sorted, without importing a kind (a module is
    named after its kind; a test checks it): what a ``--help`` text can list at no import cost."""
    return tuple(sorted(i.name for i in pkgutil.iter_modules(__path__) if not i.name.startswith("_")))


def names() -> tuple[str, ...]:
    """The registered kind names, in :func:`all_kinds` order."""
    return tuple(k.name for k in all_kinds())


def get(name: str) -> FaultKind:
    """The fault kind ``name``.

    Raises:
        ValueError: no such kind (the message lists the known ones).
    """
    _load()
    kind = _REGISTRY.get(name) if isinstance(name, str) else None
    if kind is None:
        raise ValueError(f"unknown fault kind {name!r}; known: {', '.join(names())}")
    return kind


def of(fault: Fault) -> FaultKind:
    """The kind of ``fault`` (see :func:`get`)."""
    return get(fault.get("kind"))  # type: ignore[arg-type]


def normalize(raw: Fault) -> Fault:
    """One fault in the one spelling ``{"kind": ..., ...}``, defaults filled.

    The spellings of case files written before kinds were registered are read too:
    ``{kill: P}`` is ``{kind: kill, at: P}``, ``{at: P, event: E}`` is ``{kind: hold, at: P, event: E}``,
    ``{tool, call, outcome, ...}`` is ``{kind: tool, tool, call, outcome, ...}``.

    Raises:
        ValueError: no ``kind`` and none of the old spellings, or an unknown kind.
    """
    if "kind" not in raw:
        if "kill" in raw:
            raw = {"kind": "kill", "at": raw["kill"]}
        elif "at" in raw and "event" in raw:
            raw = {"kind": "hold", **raw}
        elif "tool" in raw and "outcome" in raw:
            raw = {"kind": "tool", **raw}
        else:
            raise ValueError(f"a fault needs a kind; known: {', '.join(names())}")
    return get(raw["kind"]).normalize(raw)


def injection(faults: Iterable[Fault]) -> Injection:
    """What the driver injects for a case's ``faults`` (each normalized first).

    Raises:
        ValueError: an unknown kind, or a kind that is not injected (it should have been applied).
    """
    into = Injection()
    for fault in faults:
        fault = normalize(fault)
        get(fault["kind"]).inject(fault, into)
    return into


def for_subject(subject: str) -> list[FaultKind]:
    """The kinds whose cases of ``subject`` (``pack`` or ``target``) may hold them, in :func:`all_kinds` order."""
    return [k for k in all_kinds() if subject in k.subjects]


def lacking(faults: Iterable[Fault], capabilities: Iterable[str]) -> list[str]:
    """What a target engine with ``capabilities`` (names of its flags that are true, such as ``server``) cannot
    inject of ``faults``: ``"KIND needs CAPABILITY"`` for each kind (:attr:`FaultKind.needs`) and capability it lacks,
    in the faults' order, once each; ``[]`` when it can inject them all. A run of such a case is ``unsupported``
    (it would run without the fault: a pass not earned)."""
    have, out = set(capabilities), []
    for fault in faults:
        kind = get(fault["kind"]) if "kind" in fault else None
        for need in kind.needs if kind is not None else ():
            line = f"{kind.name} needs {need}"
            if need not in have and line not in out:
                out.append(line)
    return out


def strategies(space: Space) -> "dict[str, SearchStrategy[Fault]]":
    """``{kind: strategy}`` of the kinds that generate faults over ``space``: those of its ``subject`` whose
    :attr:`~FaultKind.needs` its ``capabilities`` meet (a target's), with a strategy (:meth:`FaultKind.strategy`)."""
    out = {}
    for k in all_kinds():
        if space.subject in k.subjects and all(c in space.capabilities for c in k.needs):
            strategy = k.strategy(space)
            if strategy is not None:
                out[k.name] = strategy
    return out


def columns() -> tuple[str, ...]:
    """Every kind's coverage columns, in :func:`all_kinds` order."""
    return tuple(c for k in all_kinds() for c in k.columns)


def describe(fault: Fault) -> str:
    """One fault as a short phrase (see :meth:`FaultKind.describe`)."""
    fault = normalize(fault)
    return get(fault["kind"]).describe(fault)


def table() -> str:
    """README's fault-kinds table (Markdown), generated from the registry."""
    rows = ["| kind | cases of | fields and meaning | a correct engine masks it |", "| --- | --- | --- | --- |"]
    for k in all_kinds():
        masks = k.masking or ("yes" if k.masked else "no")
        meaning = k.summary + (f"; on a target: {k.target_summary}" if k.target_summary else "")
        of = ", ".join({"pack": "packs", "target": "targets"}[s] for s in k.subjects)
        rows.append(f"| `{k.name}` | {of} | {meaning} | {masks} |")
    return "\n".join(rows)


__all__ = ["Fault", "FaultError", "FaultKind", "Injection", "Plan", "Space", "all_kinds", "columns", "describe",
           "for_subject", "get", "injection", "lacking", "listed", "names", "normalize", "of", "register", "strategies", "table"]
