"""Oracle rules: one signature, a stable id on every finding, and a registry other modules add to.

A rule reads one finished run through a :class:`RuleContext` and returns what is wrong with it::

    from crashpoint.harness.model.rules import RuleContext, found, rule

    @rule("side_effects.at_most_once", description="no effect of the pack is applied twice")
    def at_most_once(ctx: RuleContext) -> list[Finding]:
        return [found(f"effect {name} applied {n} times", lines) for ...]

Every finding a rule returns carries that rule's id (``Finding.rule``), stamped by
:func:`evaluate` whatever the rule put there; its prefix before the first dot is the oracle family
(``final_status``, ``side_effects``, ``trace``, ``agent``, ``differential``, ...), kept as
``Finding.oracle`` so that reports stay readable. Reports, metrics and JUnit select findings by
rule id, never by message text.

A rule that raises does not crash the sweep: :func:`evaluate` records it in
:attr:`Judgement.broken` (rule id and the exception, named), and the verdict function
(:func:`crashpoint.harness.judge.verdict.judge`) gives ``unknown`` when no other rule failed the run:
that rule could not decide it.

Rules register on import. The modules of :data:`RULE_MODULES` are imported the first time the
registry is read, so a module that defines rules only needs its name added there (ordered: the
findings of a run come out in module order, then registration order). The composition follows
Jepsen's composed checkers (``jepsen.checker/compose``): independent checkers, each with a name,
whose crashes are reported as ``:unknown`` rather than hiding the others' results.
"""

from __future__ import annotations

import dataclasses
import importlib
import re
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

if TYPE_CHECKING:  # light at import: the rules module is imported by every worker that judges
    from crashpoint.harness.load.loader import Case, Pack
    from crashpoint.harness.model.outcomes import RunOutcome

#: Modules whose import registers rules, in the order their findings are reported.
RULE_MODULES: list[str] = ["crashpoint.harness.judge.pack_rules", "crashpoint.harness.judge.effect_rules",
                           "crashpoint.harness.judge.invariants",
                           "crashpoint.harness.judge.target_rules", "crashpoint.harness.judge.target_scope"]
#: A rule id: ``family.name``, lower case, at most 50 characters (the results store's ``oracle`` column).
RULE_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$")
RULE_ID_MAX = 50


@dataclass(frozen=True)
class Finding:
    """One thing a rule found wrong with a run.

    Attributes:
        rule: the rule's id, ``family.name`` (``side_effects.at_most_once``); see README "Oracle rules".
        message: what was expected and what was seen.
        evidence: the trace or ledger lines that show it (at most a few).
    """

    rule: str
    message: str
    evidence: list[str] = field(default_factory=list)

    @property
    def oracle(self) -> str:
        """The oracle family: the rule id up to its first dot (``side_effects``)."""
        return self.rule.split(".", 1)[0]

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"rule", "oracle", "message", "evidence"}``."""
        return {"rule": self.rule, "oracle": self.oracle, "message": self.message, "evidence": list(self.evidence)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Finding":
        """The finding of a JSON form; a form stored before rule ids (only ``oracle``) keeps the
        family as its rule."""
        rule_id = data.get("rule") or data.get("oracle") or "?"
        return cls(str(rule_id), str(data.get("message", "")), [str(e) for e in data.get("evidence") or []])


#: The name findings had before rule ids (``Failure(oracle, message, evidence)`` still works: the
#: first argument is then the family, which is also its rule id).
Failure = Finding


def found(message: str, evidence: Iterable[str] = ()) -> Finding:
    """A finding for the rule that returns it (:func:`evaluate` stamps the rule's id on it)."""
    return Finding("?", message, list(evidence))


@dataclass
class RuleContext:
    """What a rule may read about one run.

    Attributes:
        case: the case as run (faults applied). ``pack``: its pack (``None`` for rules that need none).
        outcome: the finished run (status, trace, ledger calls, deliveries, kills).
        golden: the case's fault-free golden run, when known (``None`` for the golden run itself).
        references: ``(label, outcome)`` of the runs this one must end like (the golden run for a
            crashed run, the fault-free run for ``like_fault_free`` or a masked schedule); the
            ``differential`` rules compare against each.
    """

    case: "Case"
    pack: "Pack | None"
    outcome: "RunOutcome"
    golden: "RunOutcome | None" = None
    references: Sequence[tuple[str, "RunOutcome"]] = ()

    @property
    def subject(self) -> Any:
        """What was run: the pack (a pack's run) or the target (a target's run), as ``pack`` holds it."""
        return self.pack

    @property
    def kind(self) -> str:
        """``target`` for a run of a team's own code (its outcome has threads), else ``pack``."""
        return "target" if hasattr(self.outcome, "threads") else "pack"

    @property
    def ledger(self) -> list[dict[str, Any]]:
        """The world's ledger calls of the run, in order (``outcome.calls``)."""
        return self.outcome.calls

    @property
    def trace(self) -> list[dict[str, Any]]:
        """The engine's trace events of the run, in order (``outcome.trace``)."""
        return self.outcome.trace

    @property
    def kills(self) -> int:
        """SIGKILLs the harness delivered to the run's workers (count)."""
        return self.outcome.kills

    @property
    def crash_point(self) -> str | None:
        """The crash point the run was killed at (``"A >> B"`` for two kills), or ``None``."""
        return self.outcome.crash_point


RuleFunc = Callable[[RuleContext], "list[Finding]"]


#: What a rule judges: a pack's run (on an adapter), a target's run (the team's own code), or both.
SUBJECTS = ("pack", "target")
#: ``property``: a rule that must hold for any run (at most once per key); its finding fails the run whatever else
#: happened. ``expectation``: a rule that reads what the case says its faults lead to (``expected.final_status``,
#: a target case's ``expect``); its finding counts only on a run that tested what its case claims (on a golden run
#: whose faults never fired, the expectation was written for a run that did not happen: the verdict is ``error``).
KINDS = ("property", "expectation")


@dataclass(frozen=True)
class Rule:
    """A registered rule: ``id`` (``family.name``), ``description`` (one line, for the docs and
    ``--list``), ``check`` (the function), ``module`` (where it was defined), ``subjects`` (what it judges: a
    subset of :data:`SUBJECTS`), ``kind`` (one of :data:`KINDS`)."""

    id: str
    description: str
    check: RuleFunc
    module: str
    subjects: tuple[str, ...] = ("pack",)
    kind: str = "property"

    @property
    def family(self) -> str:
        """The oracle family (the id's prefix)."""
        return self.id.split(".", 1)[0]


_RULES: dict[str, Rule] = {}
_loaded = False


def rule(rule_id: str, *, description: str, subjects: tuple[str, ...] = ("pack",),
         kind: str = "property") -> Callable[[RuleFunc], RuleFunc]:
    """Register the decorated function ``f(ctx: RuleContext) -> list[Finding]`` as rule ``rule_id``, judging the
    runs of ``subjects`` (``("pack",)``, ``("target",)`` or both), of ``kind`` ``property`` or ``expectation``
    (:data:`KINDS`).

    Raises:
        ValueError: ``rule_id`` is not ``family.name`` in lower case (see :data:`RULE_ID`), is longer
            than :data:`RULE_ID_MAX`, is already registered by another function, ``description``
            is empty, or ``subjects`` / ``kind`` hold an unknown value.
    """
    if not RULE_ID.match(rule_id) or len(rule_id) > RULE_ID_MAX:
        raise ValueError(f"rule id {rule_id!r}: expected family.name in lower case (letters, digits, _), "
                         f"at most {RULE_ID_MAX} characters")
    if not description.strip():
        raise ValueError(f"rule {rule_id}: give a one-line description")
    if not subjects or set(subjects) - set(SUBJECTS) or kind not in KINDS:
        raise ValueError(f"rule {rule_id}: subjects must be a non-empty subset of {SUBJECTS} and kind one of {KINDS}, "
                         f"got {subjects!r}, {kind!r}")

    def register(func: RuleFunc) -> RuleFunc:
        old = _RULES.get(rule_id)
        where = f"{func.__module__}.{func.__qualname__}"
        if old is not None and f"{old.module}.{old.check.__qualname__}" != where:
            raise ValueError(f"rule id {rule_id} is already registered by {old.module}.{old.check.__qualname__}")
        _RULES[rule_id] = Rule(rule_id, description.strip(), func, func.__module__, tuple(subjects), kind)
        return func
    return register


def unregister(rule_id: str) -> None:
    """Remove rule ``rule_id`` (tests that register a rule of their own). Unknown ids are ignored."""
    _RULES.pop(rule_id, None)


def _load() -> None:
    global _loaded
    if not _loaded:
        _loaded = True
        for name in RULE_MODULES:
            importlib.import_module(name)


def registered(families: Iterable[str] | None = None, module: str | None = None,
               subject: str | None = None) -> list[Rule]:
    """The registered rules in report order (:data:`RULE_MODULES` order, then registration order),
    only those of ``families``, of ``module`` and judging ``subject`` (``pack`` or ``target``) when given."""
    _load()
    order = {name: n for n, name in enumerate(RULE_MODULES)}
    rules = sorted(_RULES.values(), key=lambda r: order.get(r.module, len(order)))  # stable: registration order
    wanted = set(families) if families is not None else None
    return [r for r in rules if (wanted is None or r.family in wanted) and (module is None or r.module == module)
            and (subject is None or subject in r.subjects)]


def get(rule_id: str) -> Rule:
    """The rule ``rule_id``. Raises ``KeyError`` naming the known ids."""
    _load()
    try:
        return _RULES[rule_id]
    except KeyError:
        raise KeyError(f"no rule {rule_id!r}; known: {', '.join(sorted(_RULES))}") from None


@dataclass
class Judgement:
    """What the rules said about one run.

    Attributes:
        findings: every finding, each with its rule's id, in report order.
        broken: ``(rule id, "ExceptionName: message")`` of each rule that raised instead of judging.
    """

    findings: list[Finding] = field(default_factory=list)
    broken: list[tuple[str, str]] = field(default_factory=list)

    def broken_text(self) -> str:
        """One line naming every rule that raised, or ``""``."""
        return "; ".join(f"rule {rid} raised {exc} (it could not judge this run)" for rid, exc in self.broken)

    def properties_found(self) -> bool:
        """``True`` when a finding comes from a ``property`` rule (:func:`is_property`)."""
        return any(is_property(f.rule) for f in self.findings)


def is_property(rule_id: str) -> bool:
    """``True`` for the id of a ``property`` rule (one that must hold for any run: its finding fails the run even
    where the run did not test what its case claims); a rule id not registered (a team invariant,
    ``target.invariant:NAME``) is a property."""
    _load()
    found_rule = _RULES.get(rule_id)
    return found_rule is None or found_rule.kind == "property"


def evaluate(ctx: RuleContext, rules: Sequence[Rule] | None = None) -> Judgement:
    """Run ``rules`` (default: every registered rule that judges ``ctx``'s kind of run, :attr:`RuleContext.kind`)
    on ``ctx``; a rule that raises is recorded in ``broken`` (never propagated), the others still run."""
    judgement = Judgement()
    for r in registered(subject=ctx.kind) if rules is None else rules:
        try:
            found_now = list(r.check(ctx) or ())
        except Exception as exc:  # a broken rule is an unknown, never a crashed sweep
            where = traceback.extract_tb(exc.__traceback__)[-1]
            judgement.broken.append((r.id, f"{type(exc).__name__}: {exc} (at {where.name}:{where.lineno})"))
            continue
        judgement.findings += [f if f.rule == r.id else dataclasses.replace(f, rule=r.id) for f in found_now]
    return judgement


def run_family(ctx: RuleContext, *families: str, module: str | None = None) -> list[Finding]:
    """The findings of the registered rules of ``families`` (default: every family), of ``module``
    when given, on ``ctx``, each with its rule's id. Unlike :func:`evaluate`, a rule that raises
    propagates its exception (for callers that judge one family directly, like its tests)."""
    findings: list[Finding] = []
    for r in registered(families or None, module, subject=ctx.kind):
        findings += [f if f.rule == r.id else dataclasses.replace(f, rule=r.id) for f in r.check(ctx) or ()]
    return findings


__all__ = ["Finding", "Failure", "RuleContext", "Rule", "Judgement", "rule", "found", "evaluate", "registered",
           "get", "unregister", "run_family", "RULE_MODULES", "SUBJECTS", "KINDS", "is_property"]
