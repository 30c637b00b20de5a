"""The target description: a team's own workflow code, its inputs, how a human answers, what is gated.

A target is a YAML file (schema ``scenarios/schemas/target.schema.json``) or the same as a Python
object, :class:`Target` (``crashpoint.Target``), for pytest::

    target: refund-agent
    engine: ENGINE                              # an engine's name (harness/engines/ENGINE.py)
    entry: refund_agent.graph:builder           # the engine's entry point (a StateGraph builder, a workflow)
    pythonpath: [".."]                          # relative to this file
    inputs:
      - {thread: order-1001, input: {order_id: "1001", amount_cents: 4200}}
    human:                                      # interrupting node -> answers, in order
      approve: [{resume: {approved: true}}]     # {resume, grants?: true, late?: false}
    gates: {issue_refund: approve}              # effect -> node whose granted answer must come first
    effects: [myapp.payments:charge]            # patched by dotted path in every worker
    invariants: [refund_agent.checks:one_refund_per_order]
    durability: [sync, async]
    cases:                                      # variations swept one by one (default: one case)
      - {name: granted}
      - {name: denied-then-granted, human: {approve: [{resume: {approved: false}, grants: false},
                                                      {resume: {approved: true}}]}}
      - {name: issue-times-out, faults: [{effect: issue_refund, outcome: timeout}]}
      - {name: approval-late, human: {approve: [{resume: {approved: true, ask: 1}, late: true},
                                                {resume: {approved: false}, grants: false}]}}
    expect: {order-1001: {status: finished}}   # thread -> the end every run must reach (rule target.expected_end)

A ``late`` answer arrives after the workflow moved on (the approval's deadline passed, the human answered
anyway): the node's next answer is delivered in its place, and the late one afterwards, to the thread as it
is then (:mod:`crashpoint.harness.run.target_driver`); it grants nothing (``target.approval_gate``).
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from crashpoint.errors import CaseError
from crashpoint.harness.engines.base import Engine, default_engine, engine_for, engine_names, engines
from crashpoint.harness.faults.kinds.workers import Workers as WorkersKind

DURABILITY = ("sync", "async", "exit")


def _foreign_block(data: dict[str, Any]) -> tuple[str, str] | None:
    """``(key, message)`` of a target file's options block that belongs to another engine than its own (it would be
    ignored), else ``None``. Read on the file as written (the schema's defaults fill
    every engine's block in later)."""
    name = data.get("engine") or default_engine().name
    own = engine_for(name).options_key if name in engine_names() else None
    for other in engine_names():
        key = engine_for(other).options_key
        if other != name and key and key != own and key in data:
            return key, f"options of engine {other}, but this target's engine is {name} (they would be ignored)"
    return None


@dataclass(frozen=True)
class TargetCase:
    """One variation of a target's run: ``human`` answers and tool ``faults`` (each ``{effect, outcome,
    times, seconds?}``) replace the target's; ``duplicate``: ``start`` | ``answer`` delivers the first start
    request or answer twice at once (two live processes); ``workers``: K >= 2 workers recover after each kill,
    together at a barrier, each with its own identity (a DBOS executor id; each recovers the exited ones);
    ``deploy``: a version of the code (a name in ``versions``, or where the engine keeps them:
    :meth:`~crashpoint.harness.engines.base.Engine.versions`) that every worker runs once the
    run first comes to rest with a workflow still running (a code deploy while workflows wait); ``server_crash``:
    at that moment the engine's server is SIGKILLed and a new one started on the same database (an engine with a
    server); ``recovery`` (an engine whose workers have identities, with ``workers`` >= 2): how the K workers recover
    the dead one's work, :data:`RECOVERY`;
    ``expect``: thread -> ``{"status"?, "values"?}``, the end every run of the case must reach (``None``: the target's
    ``expect``; see :meth:`Target.expected`); ``no_effect``: ``True``, the case's path makes no side effect (a
    rejection path: its golden run calling no effect is what is expected, not an ``error``), or the names of the effects
    it does not make (each an effect of the target's: an ``effects:`` entry it never calls is then not an ``error``);
    a run of the case that applies one fails ``target.no_effect``."""

    name: str = "default"
    human: dict[str, list[dict[str, Any]]] | None = None
    faults: list[dict[str, Any]] = field(default_factory=list)
    duplicate: str | None = None
    workers: int = 1
    deploy: str | None = None
    server_crash: bool = False
    recovery: str = "explicit"
    expect: dict[str, dict[str, Any]] | None = None
    no_effect: bool | list[str] = False

    def makes_no(self, effect: str | None = None) -> bool:
        """``True`` when the case says its path makes no side effect (``effect`` ``None``: none at all, ``no_effect:
        true``), or makes no ``effect`` (``true``, or a list naming it)."""
        if self.no_effect is True:
            return True
        return effect is not None and isinstance(self.no_effect, list) and effect in self.no_effect


#: ``status`` values an ``expect`` may name: the ends of a thread that came to rest.
EXPECT_STATUS = ("finished", "waiting")
#: The registered fault kind (:mod:`crashpoint.harness.faults.kinds.workers`) a target case may name in its ``faults``
#: (``{kind: workers, count: K}``), the same as ``workers: K``: one vocabulary for packs and targets.
WORKERS_KIND = WorkersKind.name


def _workers(case: dict[str, Any], index: int, file: str | None) -> int:
    """A case's K: its ``workers`` field, or the ``count`` of a ``workers`` fault in its ``faults`` (both: equal).

    Raises:
        CaseError: the two differ, or two ``workers`` faults are given.
    """
    named = [(n, f) for n, f in enumerate(case.get("faults", [])) if f.get("kind") == WORKERS_KIND]
    if len(named) > 1:
        raise CaseError(f"case {case['name']!r}: one {WORKERS_KIND} fault at most (got {len(named)})", file=file,
                        field=f"cases[{index}].faults[{named[1][0]}]")
    if not named:
        return int(case.get("workers", 1))
    where, fault = named[0]
    count = int(fault["count"])
    if int(case.get("workers", 1)) not in (1, count):  # 1: the schema's default, filled in
        raise CaseError(f"case {case['name']!r}: workers: {case['workers']} and a {WORKERS_KIND} fault of count "
                        f"{count} disagree (give one of them)", file=file, field=f"cases[{index}].faults[{where}].count")
    return count


#: ``recovery`` of a ``workers`` case (an engine with worker identities): ``explicit``, each of the K workers has a new
#: identity and asks the engine to recover the exited ones (what an operator or a control plane does); ``launch``,
#: each restarts with the dead worker's identity (its launch recovers that identity's work: replicas of a deployment
#: that hard-codes the id); ``mixed``, the first restarts with the dead identity while the others, with new ones,
#: recover it explicitly at the same time (a restarted process racing a control plane).
RECOVERY = ("explicit", "launch", "mixed")


def _check_capabilities(c: TargetCase, index: int, engine: Engine, file: str | None) -> None:
    """The optional capabilities case ``c`` (``cases[index]``) needs, asked of ``engine`` before any run: several
    workers at once need worker identities, a server crash a server (else one worker would run, or no server would
    crash: a pass not earned).

    Raises:
        CaseError: with the case's field.
    """
    several = engine_names(worker_identities=True)
    if c.recovery not in RECOVERY or (c.recovery != "explicit" and (c.workers < 2 or not engine.worker_identities)):
        titles = " or ".join(e.title for e in engines() if e.worker_identities)
        raise CaseError(f"case {c.name!r}: recovery must be one of {', '.join(RECOVERY)}, and other than "
                        f"explicit only with workers >= 2 on a {titles} target (got {c.recovery!r}, workers "
                        f"{c.workers}, engine {engine.name})", file=file, field=f"cases[{index}].recovery")
    if c.workers > 1 and not engine.worker_identities:  # one worker would run: a pass not earned
        raise CaseError(f"case {c.name!r}: several workers at once ({c.workers}) need an engine whose workers "
                        f"have their own identity ({', '.join(several)}), not {engine.name}",
                        file=file, field=f"cases[{index}].workers")
    if c.server_crash and not engine.server:
        raise CaseError(f"case {c.name!r}: server_crash needs an engine with a server "
                        f"({', '.join(engine_names(server=True))}), not {engine.name}", file=file,
                        field=f"cases[{index}].server_crash")


@dataclass(frozen=True)
class Target:
    """A team's workflow under crashpoint (see the module docstring for the fields).

    Attributes:
        name: the target's name. ``engine``: an engine's name (:func:`~crashpoint.harness.engines.base.engine_names`;
            default the registry's default, :func:`~crashpoint.harness.engines.base.default_engine`). ``entry``:
            ``module:attr``.
        inputs: ``[{"thread": str, "input": Any}]``. ``human``: node -> ``[{"resume": Any, "grants": bool}]``.
        gates: effect -> gating node. ``effects``: ``[{"path", "name"?, "key"?}]``. ``invariants``: specs.
        durability: modes to sweep. ``saver``: ``sqlite`` or ``module:Class``. ``budget_s``: wall seconds a
            run may take. ``pythonpath``: absolute folders. ``cases``: :class:`TargetCase` list.
        options: the engine's own options, the target file's block named by the engine's
            :attr:`~crashpoint.harness.engines.base.Engine.options_key` (its schema is that block of
            ``target.schema.json``; ``{}`` for an engine without options).
        versions: ``NAME -> module:attr``, the entry point of another version of the code, which every worker runs
            after a ``deploy: NAME`` case's deploy (an engine that keeps versions elsewhere says where:
            :meth:`~crashpoint.harness.engines.base.Engine.versions`).
        expect: thread -> ``{"status"?: finished | waiting, "values"?: {...}}``, the end every case without an
            ``expect`` of its own must reach (judged by ``target.expected_end`` on every run, the golden run included).
        file: the YAML it came from (``None`` when built in Python).
    """

    name: str
    entry: str
    inputs: list[dict[str, Any]]
    engine: str = field(default_factory=lambda: default_engine().name)
    human: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    gates: dict[str, str] = field(default_factory=dict)
    effects: list[dict[str, Any]] = field(default_factory=list)
    invariants: list[str] = field(default_factory=list)
    durability: list[str] = field(default_factory=lambda: ["sync"])
    saver: str = "sqlite"
    budget_s: float = 60.0
    pythonpath: list[str] = field(default_factory=list)
    cases: list[TargetCase] = field(default_factory=lambda: [TargetCase()])
    options: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    expect: dict[str, dict[str, Any]] = field(default_factory=dict)
    file: str | None = None

    def __post_init__(self) -> None:
        if self.engine not in engine_names():
            raise CaseError(f"engine must be one of {', '.join(engine_names())}, got {self.engine!r}",
                            file=self.file, field="engine")
        engine = engine_for(self.engine)
        bad = [m for m in self.durability if m not in DURABILITY]
        if bad or not self.durability:
            raise CaseError(f"durability modes must be among {', '.join(DURABILITY)}, got {self.durability!r}",
                            file=self.file, field="durability")
        if ":" not in self.entry:
            raise CaseError(f"entry must be module:attribute, got {self.entry!r}", file=self.file, field="entry")
        engine.validate(self)  # its own checks (a deploy names a version it has)
        for c in self.cases:
            _check_capabilities(c, self.cases.index(c), engine, self.file)
        names = [c.name for c in self.cases]
        for n, name in enumerate(names):
            if name in names[:n]:  # runs, folders and golden runs are found by case name: the second would stand for both
                raise CaseError(f"two cases are named {name!r} (cases[{names.index(name)}] and cases[{n}]): a case's "
                                "runs are found by its name, so one case's crash runs would be judged against the "
                                "other's golden run", file=self.file, field=f"cases[{n}].name")
        threads = [i["thread"] for i in self.inputs]
        if not threads or len(set(threads)) != len(threads):
            raise CaseError(f"inputs need distinct threads, got {threads!r}", file=self.file, field="inputs")
        expects = [("expect", self.expect)] + [(f"cases[{n}].expect", c.expect) for n, c in enumerate(self.cases)]
        for where, expect in expects:
            for thread, end in (expect or {}).items():
                if thread not in threads:
                    raise CaseError(f"expect names thread {thread!r}, which inputs do not start (threads: "
                                    f"{', '.join(threads)})", file=self.file, field=f"{where}.{thread}")
                odd = sorted(set(end) - {"status", "values"}) if isinstance(end, dict) else []
                if not isinstance(end, dict) or not end or odd:
                    raise CaseError(f"the expected end of {thread} takes status and values, got "
                                    f"{', '.join(odd) if odd else repr(end)}", file=self.file,
                                    field=f"{where}.{thread}" + (f".{odd[0]}" if odd else ""))
                if "status" in end and end["status"] not in EXPECT_STATUS:
                    raise CaseError(f"the expected status of {thread} must be one of {', '.join(EXPECT_STATUS)}, got "
                                    f"{end['status']!r}", file=self.file, field=f"{where}.{thread}.status")
                if "values" in end and not isinstance(end["values"], dict):
                    raise CaseError(f"the expected values of {thread} must be a mapping (a subset of the final "
                                    f"state), got {end['values']!r}", file=self.file, field=f"{where}.{thread}.values")
        humans = [("human", self.human)] + [(f"cases[{n}].human", c.human) for n, c in enumerate(self.cases)]
        for where, human in humans:
            for node, answers in (human or {}).items():
                if answers and answers[-1].get("late"):
                    raise CaseError(f"a late answer of {node} needs a next answer of {node} (the one delivered before "
                                    "it: the deadline's, or the answer to the re-ask); it is the last one",
                                    file=self.file, field=f"{where}.{node}[{len(answers) - 1}].late")

    @classmethod
    def from_file(cls, path: str | Path) -> "Target":
        """Load and validate a target YAML file.

        Raises:
            CaseError: with file, line and field (schema violations, a missing file, bad YAML).
        """
        from crashpoint.harness.load.loader import _fill_defaults, _load_mapping, _schema, validate

        path = Path(path)
        data, locator = _load_mapping(path, "target")
        validate(data, "target", path, locator)
        foreign = _foreign_block(data)
        if foreign:  # before the schema's defaults fill every engine's block in
            raise CaseError(foreign[1], file=str(path), line=locator.line([foreign[0]]), field=foreign[0])
        _fill_defaults(data, _schema("target"), _schema("target"))
        try:
            return cls.from_data(data, file=str(path), _blocks_checked=True)
        except CaseError as exc:
            if exc.line is None and exc.field:  # a rule the schema cannot say: point at the field's line
                steps = [int(p) if p.isdigit() else p for p in re.findall(r"[^.\[\]]+", exc.field)]
                raise CaseError(exc.message, file=str(path), line=locator.line(steps), field=exc.field) from None
            raise

    @classmethod
    def from_data(cls, data: dict[str, Any], file: str | None = None, *, _blocks_checked: bool = False) -> "Target":
        """Build from the YAML form: checked against the file schema first (``scenarios/schemas/target.schema.json``,
        exactly what :meth:`from_file` checks: a thread id or a case name that is not a name, an unknown field, ...); an
        absent field takes the schema's default; ``pythonpath`` is resolved against ``file``'s folder.

        Raises:
            CaseError: the schema's best error (its field; no line: the data has none), or a rule of
                :meth:`__post_init__`.
        """
        from crashpoint.harness.load.loader import Locator, validate

        data = copy.deepcopy(data)
        foreign = None if _blocks_checked else _foreign_block(data)
        if foreign:
            raise CaseError(foreign[1], file=file, field=foreign[0])
        try:
            validate(data, "target", file or "<data>", Locator())
        except CaseError as exc:  # the data has no lines (from_file validated with its own, before)
            raise CaseError(exc.message, file=file, field=exc.field) from None
        base = Path(file).resolve().parent if file else Path.cwd()
        effects = [e if isinstance(e, dict) else {"path": e} for e in data.get("effects", [])]
        cases = [TargetCase(c["name"], c.get("human"), [f for f in c.get("faults", []) if f.get("kind") != WORKERS_KIND],
                            c.get("duplicate"), _workers(c, n, file), c.get("deploy"),
                            bool(c.get("server_crash", False)), recovery=c.get("recovery", "explicit"),
                            expect=c.get("expect"), no_effect=copy.deepcopy(c.get("no_effect", False)))
                 for n, c in enumerate(data.get("cases", [{"name": "default"}]))]
        name = data.get("engine") or default_engine().name
        options = engine_for(name).options(data) if name in engine_names() else {}  # else refused by the check

        return cls(name=data["target"], entry=data["entry"], inputs=data["inputs"], engine=name,
                   human=data.get("human", {}), gates=data.get("gates", {}), effects=effects,
                   invariants=data.get("invariants", []), durability=data.get("durability", ["sync"]),
                   saver=data.get("saver", "sqlite"), budget_s=float(data.get("budget_s", 60)),
                   pythonpath=[str((base / p).resolve()) for p in data.get("pythonpath", ["."])],
                   cases=cases or [TargetCase()], options=options,
                   versions=data.get("versions", {}), expect=data.get("expect", {}), file=file)

    def _options_block(self) -> dict[str, Any]:
        """``{OPTIONS_KEY: options}`` of the engine's options block (``{}``: an engine without options)."""
        key = engine_for(self.engine).options_key
        return {key: self.options} if key else {}

    def running(self, version: str) -> "Target":
        """This target as its workers run it after a deploy of ``version`` (an engine whose versions are entry
        points): ``entry`` is
        ``versions[version]``, the rest as it is. Not validated again (the file was; a deployed entry is then one of
        ``versions``, which validation refuses of a file's own entry).

        Raises:
            KeyError: no such version.
        """
        code = copy.copy(self)
        object.__setattr__(code, "entry", self.versions[version])
        return code

    @property
    def version(self) -> str:
        """The version a target's results are stored and reported under: ``sha256:`` and the first 12 hex digits of
        the digest of its contents (:meth:`to_data`, as sorted JSON), so that the weekly report tells runs of a
        changed target file from its earlier ones."""
        import hashlib

        return "sha256:" + hashlib.sha256(json.dumps(self.to_data(), sort_keys=True, default=str).encode()
                                          ).hexdigest()[:12]

    def to_data(self) -> dict[str, Any]:
        """The YAML form (``pythonpath`` absolute); ``Target.from_data(t.to_data()) == t`` up to ``file``."""
        return {"target": self.name, "engine": self.engine, "entry": self.entry, "inputs": self.inputs,
                "human": self.human, "gates": self.gates, "effects": self.effects, "invariants": self.invariants,
                "durability": self.durability, "saver": self.saver, "budget_s": self.budget_s,
                "pythonpath": self.pythonpath, **self._options_block(),
                "versions": self.versions, "expect": self.expect, "cases": [{k: v for k, v in asdict(c).items() if v is not None}
                                                         for c in self.cases]}

    def case(self, name: str) -> TargetCase:
        """The case called ``name``.

        Raises:
            KeyError: no such case.
        """
        for c in self.cases:
            if c.name == name:
                return c
        raise KeyError(f"target {self.name!r} has no case {name!r} (cases: {', '.join(c.name for c in self.cases)})")

    def expected(self, case: TargetCase) -> dict[str, dict[str, Any]]:
        """The end ``case`` must reach: thread -> ``{"status"?, "values"?}`` (its own ``expect``, else the target's;
        ``{}``: none stated)."""
        return case.expect if case.expect is not None else self.expect

    def answers(self, case: TargetCase) -> dict[str, list[dict[str, Any]]]:
        """The human answers of ``case`` (its own, else the target's), each with ``grants`` filled."""
        human = case.human if case.human is not None else self.human
        return {node: [{"grants": True, **a} for a in answers] for node, answers in human.items()}

    def dumps(self) -> str:
        """JSON of :meth:`to_data` (what a worker reads)."""
        return json.dumps(self.to_data(), sort_keys=True)
