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
    compensations:                              # effect -> what undoes it (rules target.compensated, ...)
      draft_refund: {undo: void_draft, unless: [issue_refund]}
    effects: [myapp.payments:charge]            # patched by dotted path in every worker
    invariants: [refund_agent.checks:one_refund_per_order]
    durability: [sync, async]
    cases:                                      # variations swept one by one (default: one case)
      - {name: granted}
      - {name: denied-then-granted, human: {approve: [{resume: {approved: false}, grants: false},
                                                      {resume: {approved: true}}]}}
      - {name: issue-times-out, faults: [{kind: tool, tool: issue_refund, call: 1, outcome: timeout}]}
      - {name: approval-late, human: {approve: [{resume: {approved: true, ask: 1}, late: true},
                                                {resume: {approved: false}, grants: false}]}}
    expect: {order-1001: {status: finished}}   # thread -> the end every run must reach (rule target.expected_end)
    ignore: [receipt.issued_at]                 # state paths the golden comparison leaves out (judge/stable.py)

A ``late`` answer arrives after the workflow moved on (the approval's deadline passed, the human answered
anyway): the node's next answer is delivered in its place, and the late one afterwards, to the thread as it
is then (:mod:`crashpoint.harness.run.target_driver`); it grants nothing (``target.approval_gate``).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashpoint.errors import CaseError
from crashpoint.harness.engines.base import Engine, default_engine, engine_for, engine_names, engines
from crashpoint.harness.faults import kinds as fault_kinds
from crashpoint.harness.faults.kinds import Fault, FaultError
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


#: The target file's older case fields that are fault kinds now: field -> kind (each read as that kind's fault).
CASE_FIELDS = {"duplicate": "duplicate", "workers": "workers", "deploy": "deploy", "server_crash": "server_crash"}


def _path(steps: tuple[str | int, ...]) -> str:
    """``("faults", 2, "count")`` -> ``faults[2].count``."""
    out = ""
    for step in steps:
        out += f"[{step}]" if isinstance(step, int) else (f".{step}" if out else str(step))
    return out


def _one_fault(raw: Fault, index: int, turns: dict[str, int]) -> Fault:
    """One fault of a target's case in the one spelling (``{kind: ...}``, defaults filled); the older spelling of a
    tool fault, ``{effect, outcome, times?, seconds?}``, takes the effect's next call (``turns``: calls of each effect
    given by such faults so far).

    Raises:
        FaultError: not a kind a target's case can hold, or not in its target spelling (path from the case).
    """
    if not isinstance(raw, dict):
        raise FaultError(f"a fault is a mapping, got {raw!r}", ("faults", index))
    if "kind" not in raw and "effect" in raw:
        effect = raw["effect"]
        rest = {k: v for k, v in raw.items() if k != "effect"}
        raw = {"kind": "tool", "tool": effect, "call": turns.get(effect, 0) + 1, **rest}
        turns[effect] = turns.get(effect, 0) + int(raw.get("times", 1))
    try:
        fault = fault_kinds.normalize(raw)
    except ValueError as exc:
        raise FaultError(str(exc), ("faults", index, "kind")) from None
    kind = fault_kinds.get(fault["kind"])
    if "target" not in kind.subjects:
        known = ", ".join(k.name for k in fault_kinds.for_subject("target"))
        raise FaultError(f"fault kind {kind.name!r} is not one a target's case can hold; a target's kinds: {known}",
                         ("faults", index, "kind"))
    try:
        kind.check_target(fault)
    except FaultError as exc:
        raise FaultError(str(exc), ("faults", index, *exc.path)) from None
    return fault


def case_faults(faults: list[Fault], duplicate: str | None = None, workers: int = 1, deploy: str | None = None,
                server_crash: bool = False) -> tuple[list[Fault], dict[int, tuple[str | int, ...]]]:
    """A target case's faults in the one spelling (:mod:`crashpoint.harness.faults.kinds`), the older case fields
    (:data:`CASE_FIELDS`) read as their kinds' faults, and where each came from (fault index -> its path in the case:
    ``("faults", 2)`` or ``("workers",)``).

    ``faults`` come first, in order; then a fault for each older field that no fault of its kind already says (the
    two spellings of one fault must agree).

    Raises:
        FaultError: a fault not of a target's kinds or spelling, two ``workers`` or ``deploy`` faults, or an older
            field that disagrees with its kind's fault (its path inside the case).
    """
    turns: dict[str, int] = {}
    out = [_one_fault(raw, i, turns) for i, raw in enumerate(faults or [])]
    where: dict[int, tuple[str | int, ...]] = {i: ("faults", i) for i in range(len(out))}
    for kind, key in (("workers", "count"), ("deploy", "version")):
        given = [i for i, f in enumerate(out) if f["kind"] == kind]
        if len(given) > 1:
            raise FaultError(f"one {kind} fault at most (got {len(given)})", ("faults", given[1]))
    said = {"duplicate": duplicate, "workers": workers if int(workers or 1) > 1 else None, "deploy": deploy,
            "server_crash": True if server_crash else None}
    for field_name, value in said.items():
        if value is None:
            continue
        kind = CASE_FIELDS[field_name]
        same = [i for i, f in enumerate(out) if f["kind"] == kind]
        fault: Fault = {"duplicate": {"kind": "duplicate", "event": value}, "workers": {"kind": "workers", "count": value},
                        "deploy": {"kind": "deploy", "version": value}, "server_crash": {"kind": "server_crash"}}[field_name]
        fault = fault_kinds.normalize(fault)
        if field_name == "duplicate":
            try:
                fault_kinds.get("duplicate").check_target(fault)
            except FaultError as exc:
                raise FaultError(str(exc), ("duplicate",)) from None
            if any(out[i]["event"] == value for i in same):
                continue
        elif same:
            key = {"workers": "count", "deploy": "version"}.get(field_name)
            if key and out[same[0]][key] != fault[key]:
                raise FaultError(f"{field_name}: {value} and a {kind} fault of {key} {out[same[0]][key]} disagree "
                                 "(give one of them)", ("faults", same[0], key))
            continue
        where[len(out)] = (field_name,)
        out.append(fault)
    return out, where


@dataclass(frozen=True)
class TargetCase:
    """One variation of a target's run: ``human`` answers replace the target's; ``faults``, the registered fault kinds
    a target's case can hold (:mod:`crashpoint.harness.faults.kinds`: ``kill``, ``tool`` on an effect, ``duplicate``,
    ``workers``, ``deploy``, ``server_crash``), each ``{kind: ..., ...}``, spelt as in a pack's case file where the
    fault is the same (``{kind: tool, tool: EFFECT, call: N, outcome: O, times?, seconds?}``; a kill ``{kind: kill,
    at: POINT}`` fires before the sweep's own kill).

    The older fields are the same faults, read as their kinds' (:func:`case_faults`; after construction each reads
    back what ``faults`` holds): ``duplicate``: ``start`` | ``answer`` delivers the first start request or answer
    twice at once (two live processes; ``{kind: duplicate, event: start}``); ``workers``: K >= 2 workers recover
    after each kill, together at a barrier, each with its own identity (a DBOS executor id; each recovers the exited
    ones; ``{kind: workers, count: K}``); ``deploy``: a version of the code (a name in ``versions``, or where the
    engine keeps them: :meth:`~crashpoint.harness.engines.base.Engine.versions`) that every worker runs once the run
    first comes to rest with a workflow still running (``{kind: deploy, version: NAME}``); ``server_crash``: at that
    moment the engine's server is SIGKILLed and a new one started on the same database (``{kind: server_crash}``);
    and a tool fault ``{effect, outcome, times, seconds?}`` takes the effect's calls in turn.

    ``recovery`` (an engine whose workers have identities, with ``workers`` >= 2): how the K workers recover
    the dead one's work, :data:`RECOVERY`;
    ``expect``: thread -> ``{"status"?, "values"?, "effects"?}``, the end every run of the case must reach (``None``: the target's
    ``expect``; see :meth:`Target.expected`); ``no_effect``: ``True``, the case's path makes no side effect (a
    rejection path: its golden run calling no effect is what is expected, not an ``error``), or the names of the effects
    it does not make (each an effect of the target's: an ``effects:`` entry it never calls is then not an ``error``);
    a run of the case that applies one fails ``target.no_effect``; ``like_fault_free``: the case's golden run must end
    as the same case without its faults ends (a fault-free run of it is made first and is its reference:
    ``differential.same_end`` and ``differential.same_effects``), as a pack's ``expected.like_fault_free``.

    Raises:
        FaultError: a fault not of a target's kinds, or two spellings that disagree (:func:`case_faults`).
    """

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
    like_fault_free: bool = False
    #: fault index -> its path in the case as written (``("faults", 2)``, ``("workers",)``), for messages.
    spelt: dict[int, tuple[str | int, ...]] = field(default_factory=dict, init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        faults, where = case_faults(list(self.faults or []), self.duplicate, self.workers, self.deploy,
                                    self.server_crash)
        into = fault_kinds.injection(faults)
        set_ = object.__setattr__
        set_(self, "faults", faults)
        set_(self, "spelt", where)
        set_(self, "duplicate", into.duplicates[0] if into.duplicates else None)
        set_(self, "workers", into.together)
        set_(self, "deploy", into.deploy)
        set_(self, "server_crash", into.server_crash)

    def makes_no(self, effect: str | None = None) -> bool:
        """``True`` when the case says its path makes no side effect (``effect`` ``None``: none at all, ``no_effect:
        true``), or makes no ``effect`` (``true``, or a list naming it)."""
        if self.no_effect is True:
            return True
        return effect is not None and isinstance(self.no_effect, list) and effect in self.no_effect

    def injection(self) -> "fault_kinds.Injection":
        """What the target driver injects for this case (:func:`crashpoint.harness.faults.kinds.injection`)."""
        return fault_kinds.injection(self.faults)

    def where(self, kind: str, key: str | None = None) -> str:
        """The field (relative to the case) of its first fault of ``kind`` as written (``faults[2]``, with ``key``
        ``faults[2].version``; ``deploy`` for the older field), or ``kind`` when it has none."""
        for index, fault in enumerate(self.faults):
            if fault["kind"] == kind:
                steps = self.spelt.get(index, (kind,))
                return _path(steps + ((key,) if key and steps[0] == "faults" else ()))
        return kind

    def with_faults(self, faults: list[dict[str, Any]], **changes: Any) -> "TargetCase":
        """The same case with ``faults`` (fault dicts of the registered kinds) as all its faults, and ``changes`` to
        its other fields. The older fields (``duplicate``, ``workers``, ``deploy``, ``server_crash``) are reset: after
        construction ``faults`` holds what they said, so ``faults`` alone says it now."""
        return dataclasses.replace(self, faults=faults, duplicate=None, workers=1, deploy=None, server_crash=False,
                                   **changes)

    def without_faults(self) -> "TargetCase":
        """The same case with no fault (and without ``like_fault_free``): what a ``like_fault_free`` case must end
        like."""
        return self.with_faults([], like_fault_free=False)

    def to_data(self) -> dict[str, Any]:
        """The case's YAML form: its faults in the one spelling (the older fields are in them), ``None`` fields and
        defaults left out."""
        data: dict[str, Any] = {"name": self.name}
        if self.human is not None:
            data["human"] = copy.deepcopy(self.human)
        if self.faults:
            data["faults"] = copy.deepcopy(self.faults)
        if self.recovery != "explicit":
            data["recovery"] = self.recovery
        if self.expect is not None:
            data["expect"] = copy.deepcopy(self.expect)
        if self.no_effect is not False:
            data["no_effect"] = copy.deepcopy(self.no_effect)
        if self.like_fault_free:
            data["like_fault_free"] = True
        return data


#: ``status`` values an ``expect`` may name: the ends of a thread that came to rest.
EXPECT_STATUS = ("finished", "waiting")
#: The registered fault kind (:mod:`crashpoint.harness.faults.kinds.workers`) a target case may name in its ``faults``
#: (``{kind: workers, count: K}``), the same as ``workers: K``: one vocabulary for packs and targets.
WORKERS_KIND = WorkersKind.name


def _case(c: dict[str, Any], index: int, file: str | None) -> TargetCase:
    """``cases[index]`` of a target file's data as a :class:`TargetCase`.

    Raises:
        CaseError: a fault it cannot hold, or two spellings of one fault that disagree (the field inside it).
    """
    try:
        return TargetCase(c["name"], c.get("human"), copy.deepcopy(c.get("faults", [])), c.get("duplicate"),
                          int(c.get("workers", 1)), c.get("deploy"), bool(c.get("server_crash", False)),
                          recovery=c.get("recovery", "explicit"), expect=c.get("expect"),
                          no_effect=copy.deepcopy(c.get("no_effect", False)),
                          like_fault_free=bool(c.get("like_fault_free", False)))
    except FaultError as exc:
        raise CaseError(f"case {c['name']!r}: {exc}", file=file, field=f"cases[{index}].{_path(exc.path)}") from None


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
    if c.recovery not in RECOVERY or (c.recovery != "explicit" and (c.workers < 2 or not engine.worker_identities)):
        titles = " or ".join(e.title for e in engines() if e.worker_identities)
        raise CaseError(f"case {c.name!r}: recovery must be one of {', '.join(RECOVERY)}, and other than "
                        f"explicit only with workers >= 2 on a {titles} target (got {c.recovery!r}, workers "
                        f"{c.workers}, engine {engine.name})", file=file, field=f"cases[{index}].recovery")
    for n, fault in enumerate(c.faults):  # a kind the engine cannot do would run without it: a pass not earned
        for capability in fault_kinds.get(fault["kind"]).needs:
            if getattr(engine, capability, False):
                continue
            what = (f"several workers at once ({fault['count']}) need" if fault["kind"] == WORKERS_KIND
                    else f"{fault['kind']} needs")
            raise CaseError(f"case {c.name!r}: {what} {CAPABILITY_TEXT.get(capability, capability)} "
                            f"({', '.join(engine_names(**{capability: True})) or 'none installed'}), not {engine.name}",
                            file=file, field=f"cases[{index}].{_path(c.spelt.get(n, (fault['kind'],)))}")


#: An engine capability a fault kind needs (:attr:`~crashpoint.harness.faults.kinds.FaultKind.needs`) -> how a message
#: names the engines that have it.
CAPABILITY_TEXT = {"worker_identities": "an engine whose workers have their own identity",
                   "server": "an engine with a server"}


def compensations(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """A target file's ``compensations`` in one form: effect -> ``{"undo": EFFECT, "unless": [EFFECT, ...]}``
    (``draft_refund: void_draft`` is ``{"undo": "void_draft", "unless": []}``)."""
    return {effect: {"undo": spec, "unless": []} if isinstance(spec, str)
            else {"undo": spec["undo"], "unless": list(spec.get("unless", []))} for effect, spec in data.items()}


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
        expect: thread -> ``{"status"?: finished | waiting, "values"?: {...}, "effects"?: {EFFECT: times}}``, the
            end every case without an ``expect`` of its own must reach (judged by ``target.expected_end`` and, for
            ``effects``, the times each effect is applied in the thread, ``target.expected_effects``, on every run,
            the golden run included).
        ignore: dotted paths into every thread's final state values that ``differential.same_end`` leaves out
            (:mod:`crashpoint.harness.judge.stable`), besides what two fault-free runs of a case disagree on.
        outside_ledger: shell-style patterns over the commands of processes the team's code starts without the run's
            marker in their environment that make no side effect (a run that starts any other such process is an
            ``error``: :func:`crashpoint.harness.engines.effects.unobserved`).
        compensations: effect -> ``{"undo": EFFECT, "unless": [EFFECT, ...]}`` (the file's ``EFFECT: UNDO`` short
            form has no ``unless``): judged by :mod:`crashpoint.harness.judge.target_compensation`.
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
    ignore: list[str] = field(default_factory=list)
    outside_ledger: list[str] = field(default_factory=list)
    compensations: dict[str, dict[str, Any]] = field(default_factory=dict)
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
                odd = sorted(set(end) - {"status", "values", "effects"}) if isinstance(end, dict) else []
                if not isinstance(end, dict) or not end or odd:
                    raise CaseError(f"the expected end of {thread} takes status, values and effects, got "
                                    f"{', '.join(odd) if odd else repr(end)}", file=self.file,
                                    field=f"{where}.{thread}" + (f".{odd[0]}" if odd else ""))
                if "status" in end and end["status"] not in EXPECT_STATUS:
                    raise CaseError(f"the expected status of {thread} must be one of {', '.join(EXPECT_STATUS)}, got "
                                    f"{end['status']!r}", file=self.file, field=f"{where}.{thread}.status")
                if "values" in end and not isinstance(end["values"], dict):
                    raise CaseError(f"the expected values of {thread} must be a mapping (a subset of the final "
                                    f"state), got {end['values']!r}", file=self.file, field=f"{where}.{thread}.values")
                effects = end.get("effects", {})
                if not isinstance(effects, dict):
                    raise CaseError(f"the expected effects of {thread} must be a mapping (effect -> times applied), "
                                    f"got {effects!r}", file=self.file, field=f"{where}.{thread}.effects")
                for name, times in effects.items():
                    if isinstance(times, bool) or not isinstance(times, int) or times < 0:
                        raise CaseError(f"the expected effects of {thread}: {name} must be applied a whole number of "
                                        f"times, 0 or more, got {times!r}", file=self.file,
                                        field=f"{where}.{thread}.effects.{name}")
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
        cases = [_case(c, n, file) for n, c in enumerate(data.get("cases", [{"name": "default"}]))]
        name = data.get("engine") or default_engine().name
        options = engine_for(name).options(data) if name in engine_names() else {}  # else refused by the check

        return cls(name=data["target"], entry=data["entry"], inputs=data["inputs"], engine=name,
                   human=data.get("human", {}), gates=data.get("gates", {}), effects=effects,
                   invariants=data.get("invariants", []), durability=data.get("durability", ["sync"]),
                   saver=data.get("saver", "sqlite"), budget_s=float(data.get("budget_s", 60)),
                   pythonpath=[str((base / p).resolve()) for p in data.get("pythonpath", ["."])],
                   cases=cases or [TargetCase()], options=options,
                   versions=data.get("versions", {}), expect=data.get("expect", {}),
                   ignore=list(data.get("ignore", [])), outside_ledger=list(data.get("outside_ledger", [])),
                   compensations=compensations(data.get("compensations", {})),
                   file=file)

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
                "versions": self.versions, "expect": self.expect, "cases": [c.to_data() for c in self.cases],
                **({"ignore": list(self.ignore)} if self.ignore else {}),  # (absent when empty: versions unchanged)
                **({"outside_ledger": list(self.outside_ledger)} if self.outside_ledger else {}),
                **({"compensations": {e: dict(c, unless=list(c["unless"])) if c["unless"] else c["undo"]
                                      for e, c in self.compensations.items()}} if self.compensations else {})}

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
