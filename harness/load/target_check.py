"""What a target file means, checked against the team's code in a child interpreter (``crashpoint validate``, and
``crashpoint run`` and the ``crashpoint_sweep`` fixture before a sweep): the team's import-time code stays out of
the calling process.

The child imports every object the file names, with the target's ``pythonpath`` (:func:`named_objects`: the entry,
the invariants, the ``effects:`` paths, a saver class, what the engine's options name, the deployed versions), patches the ``effects:`` paths as a worker does, then reports what the code holds
(:func:`facts_of_code`). What cannot be meant is refused (:func:`check_target`), each with the file, the line and
the field:

* a name that imports nothing;
* an ``effects:`` entry that a module of the team's code holds by name, imported before the entry was wrapped (calls
  through it are not observed);
* an effect in ``gates`` (or ``compensations``, a case's ``no_effect`` list, an ``expect``'s ``effects``) that no effect has (the effects the code makes through
  ``crashpoint.effect`` on import of its modules, and the ``effects:`` entries): the gate would gate nothing and
  every run would pass it;
* a node in ``human`` or a gate's node that the graph does not have, where the entry is a graph whose nodes can be
  read (a LangGraph ``StateGraph`` or compiled graph; an answer no node asks for is otherwise an ``error`` of the
  golden run, :func:`crashpoint.harness.judge.verdict.judge_target`);
* two invariants of one name (one would never be judged, :class:`crashpoint.api.InvariantClash`);
* a version that is the entry itself under another name (the same object: a deploy that changes no code), or, for an
  engine whose versions name lists of code (Temporal's workflows and activities), whose code is the target's own.

A version whose import fails in the child beside the entry (DBOS refuses one workflow name registered by two
modules in one process; a worker runs a version alone) is imported again in a child of its own.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

from crashpoint.errors import CaseError

#: Seconds the child may take to import the team's code.
IMPORT_TIMEOUT_S = 120.0

_CHILD = "from crashpoint.harness.load.target_check import child_main; child_main()"


def named_objects(target: Any) -> list[tuple[str, list[str | int], str]]:
    """``(field, its path in the file, "module:attr")`` for each object the target file names: the entry, the
    invariants, the effects, a saver class (not ``sqlite``), the objects its engine's options name
    (:meth:`~crashpoint.harness.engines.base.Engine.named_objects`)."""
    from crashpoint.harness.engines.base import engine_for

    names: list[tuple[str, list[str | int], str]] = [("entry", ["entry"], target.entry)]
    names += [(f"invariants[{i}]", ["invariants", i], s) for i, s in enumerate(target.invariants)]
    names += [(f"effects[{i}]", ["effects", i], e["path"]) for i, e in enumerate(target.effects)]
    if target.saver != "sqlite":
        names.append(("saver", ["saver"], target.saver))
    names += engine_for(target.engine).named_objects(target)
    return [n for n in names if ":" in n[2]]


def _version_specs(target: Any) -> dict[str, dict[str, Any]]:
    """Version name -> ``{"field", "path", "entry"}`` (a version that is an entry point) or ``{"field", "path",
    "code": {KEY: [specs]}, "own": {KEY: [specs]}}`` (an engine whose versions name lists of its options, merged
    with the target's own as its worker merges them: a key the version leaves empty is the target's), from the
    engine's :meth:`~crashpoint.harness.engines.base.Engine.versions`."""
    from crashpoint.harness.engines.base import engine_for

    where, known = engine_for(target.engine).versions(target)
    out: dict[str, dict[str, Any]] = {}
    for name, code in (known or {}).items():
        spec: dict[str, Any] = {"field": f"{where}.{name}", "path": [*where.split("."), name]}
        if isinstance(code, str):
            spec["entry"] = code
        else:
            keys = [*code, *(k for k, v in target.options.items() if isinstance(v, list) and k not in code)]
            own = {k: list(target.options.get(k) or []) for k in keys}
            spec["own"], spec["code"] = own, own | {k: v for k, v in (code or {}).items() if v}
        out[name] = spec
    return out


def _load(spec: str) -> Any:
    from crashpoint.harness.engines.workerlib import load_object

    return load_object(spec)


def _flat(specs: Sequence[str]) -> list[Any]:
    out: list[Any] = []
    for spec in specs:
        obj = _load(spec)
        out += list(obj) if isinstance(obj, (list, tuple)) else [obj]
    return out


def _graph_nodes(entry: Any) -> list[str] | None:
    """The node names of a graph entry (an object with a ``nodes`` mapping that compiles or invokes: a LangGraph
    ``StateGraph`` or compiled graph), without the engine's own ``__start__``/``__end__``; ``None`` for any other
    entry (a factory is not called here: it may do anything)."""
    nodes = getattr(entry, "nodes", None)
    if not (hasattr(entry, "compile") or hasattr(entry, "invoke")) or not hasattr(nodes, "keys"):
        return None
    return sorted(str(n) for n in nodes.keys() if not str(n).startswith("__"))


def facts_of_code(data: dict[str, Any]) -> dict[str, Any]:
    """What the child reports of the team's code (``data``: the target's :meth:`~crashpoint.harness.load.target.
    Target.to_data`, its ``pythonpath`` already on ``sys.path``): ``{"error": [field, spec, text]}`` for the first
    name that imports nothing; else ``{"effects": {name: [origin...]}, "nodes": [...] | None, "clash": [name,
    origins] | None, "same_code": [version...], "deferred": [version...], "unwrapped": [...]}`` (``deferred``:
    versions whose import raised here, to be imported alone; ``unwrapped``: the globals of the team's modules that
    still hold an ``effects:`` entry's original once it is wrapped, :func:`~crashpoint.harness.engines.workerlib.
    patch_effects`)."""
    import crashpoint.api as api
    from crashpoint.harness.engines.workerlib import patch_effects
    from crashpoint.harness.load.target import Target

    target = Target.from_data(data)
    for field, _, spec in named_objects(target):
        try:
            _load(spec)
        except BaseException as exc:  # noqa: BLE001 - the team's import-time code may raise anything, SystemExit too
            return {"error": [field, spec, f"{type(exc).__name__}: {exc}"]}
    try:
        unwrapped = patch_effects(target.effects, team=target.pythonpath)
    except BaseException as exc:  # noqa: BLE001
        return {"error": ["effects", target.effects[0]["path"] if target.effects else "", f"{type(exc).__name__}: {exc}"]}
    clash = None
    try:
        api.resolve_invariants(target.invariants)
    except api.InvariantClash as exc:
        clash = [exc.name, exc.origins]
    facts: dict[str, Any] = {"effects": api.registered_effects(), "nodes": _graph_nodes(_load(target.entry)),
                             "clash": clash, "same_code": [], "deferred": [], "unwrapped": unwrapped}
    entry = _load(target.entry)
    for name, spec in _version_specs(target).items():
        try:
            if "entry" in spec:
                same = _load(spec["entry"]) is entry
            else:
                same = all(_same_objects(_flat(spec["code"][k]), _flat(spec["own"][k])) for k in spec["code"])
        except BaseException:  # noqa: BLE001 - e.g. one workflow name registered by two modules; imported alone below
            facts["deferred"].append(name)
            continue
        if same:
            facts["same_code"].append(name)
    return facts


def _same_objects(a: list[Any], b: list[Any]) -> bool:
    """``a`` and ``b`` hold the same objects (by identity), in any order."""
    return len(a) == len(b) and all(any(x is y for y in b) for x in a) and all(any(y is x for x in a) for y in b)


def child_main() -> None:
    """The child interpreter: ``argv[1]`` the target's data as JSON, ``argv[2]`` (optional) one version to import
    alone. Prints one JSON line (:func:`facts_of_code`, or ``{"error": ...}`` for the version alone)."""
    data = json.loads(sys.argv[1])
    sys.path[:0] = data["pythonpath"]
    if len(sys.argv) > 2:  # one version alone, as a worker of that version imports it
        from crashpoint.harness.load.target import Target

        spec = _version_specs(Target.from_data(data))[sys.argv[2]]
        try:
            if "entry" in spec:
                _load(spec["entry"])
            else:
                for specs in spec["code"].values():
                    _flat(specs)
            print(json.dumps({}))
        except BaseException as exc:  # noqa: BLE001
            print(json.dumps({"error": [spec["field"], spec.get("entry") or json.dumps(spec["code"]),
                                        f"{type(exc).__name__}: {exc}"]}))
        sys.stdout.flush()
        return
    print(json.dumps(facts_of_code(data)))
    sys.stdout.flush()


def _run_child(target: Any, cwd: Path, *extra: str, timeout_s: float) -> dict[str, Any]:
    try:
        out = subprocess.run([sys.executable, "-c", _CHILD, json.dumps(target.to_data()), *extra],
                             capture_output=True, text=True, timeout=timeout_s, cwd=cwd)
    except subprocess.TimeoutExpired:
        raise CaseError(f"importing the target's code took over {timeout_s:.0f} s", file=target.file) from None
    lines = [x for x in out.stdout.strip().splitlines() if x.startswith("{")]
    if not lines:  # the team's code ended the child (os._exit) or crashpoint broke: say so, never "valid"
        tail = " | ".join((out.stderr or out.stdout).strip().splitlines()[-3:])
        raise CaseError(f"importing the target's code ended the child interpreter with {out.returncode} before it "
                        f"reported: {tail}"[:800], file=target.file)
    return json.loads(lines[-1])


def _nodes_named(target: Any) -> list[tuple[str, list[str | int], str]]:
    """``(field, path, node)`` of each node the file names as interrupting: ``human`` keys (the target's and each
    case's) and the nodes ``gates`` names."""
    out: list[tuple[str, list[str | int], str]] = [(f"human.{n}", ["human", n], n) for n in target.human]
    for i, case in enumerate(target.cases):
        out += [(f"cases[{i}].human.{n}", ["cases", i, "human", n], n) for n in case.human or {}]
    out += [(f"gates.{effect}", ["gates", effect], node) for effect, node in target.gates.items()]
    return out


def check_target(target: Any, path: str | Path | None = None, timeout_s: float = IMPORT_TIMEOUT_S) -> dict[str, Any]:
    """Check ``target`` against its code in a child interpreter (see the module docstring).

    Args:
        target: a :class:`~crashpoint.harness.load.target.Target`. ``path``: its file (default ``target.file``): the
            child runs in its folder and errors name its lines; without a file, errors have no line.

    Returns:
        The facts the child reported (:func:`facts_of_code`).

    Raises:
        CaseError: the first thing refused, ``FILE:LINE: field FIELD: message``.
    """
    file = str(path) if path is not None else target.file
    locator = None
    if file is not None:
        from crashpoint.harness.load.loader import _load_mapping

        _, locator = _load_mapping(Path(file), "target")
    cwd = Path(file).resolve().parent if file else Path.cwd()

    def refuse(message: str, field: str, steps: list[str | int]) -> CaseError:
        return CaseError(message[:800], file=file, line=locator.line(steps) if locator else None, field=field)

    facts = _run_child(target, cwd, timeout_s=timeout_s)
    if "error" in facts:
        field, spec, error = facts["error"]
        steps = next((p for f, p, _ in named_objects(target) if f == field),
                     next((s["path"] for s in _version_specs(target).values() if s["field"] == field), [field]))
        raise refuse(f"{spec!r} names nothing importable (pythonpath {target.pythonpath}): {error}", field, steps)
    for found in facts.get("unwrapped") or ():
        from crashpoint.harness.engines.workerlib import unwrapped_text

        i = next(i for i, e in enumerate(target.effects) if e["path"] == found["path"])
        raise refuse(unwrapped_text(found), f"effects[{i}]", ["effects", i])
    effects = dict(facts["effects"])
    for e in target.effects:
        effects.setdefault(e.get("name") or e["path"].rpartition(":")[2].rsplit(".", 1)[-1], [e["path"]])
    for effect in target.gates:
        if effect not in effects:
            known = ", ".join(sorted(effects)) or "none"
            raise refuse(f"gates names effect {effect!r}, which no effect has: the gate would gate nothing (the "
                         f"target's code makes these effects: {known}; crashpoint.effect on import of its modules, "
                         "and effects:)", f"gates.{effect}", ["gates", effect])
    for effect, spec in target.compensations.items():
        named = [(effect, f"compensations.{effect}", [effect]),
                 (spec["undo"], f"compensations.{effect}" + (".undo" if spec["unless"] else ""),
                  [effect, "undo"] if spec["unless"] else [effect])]
        named += [(e, f"compensations.{effect}.unless[{k}]", [effect, "unless", k]) for k, e in enumerate(spec["unless"])]
        for name, where, at in named:
            if name not in effects:
                raise refuse(f"compensations names effect {name!r}, which no effect has: the rule would judge nothing "
                             f"(the target's code makes these effects: {', '.join(sorted(effects)) or 'none'})",
                             where, ["compensations", *at])
    for i, case in enumerate(target.cases):
        for j, effect in enumerate(case.no_effect if isinstance(case.no_effect, list) else []):
            if effect not in effects:
                raise refuse(f"case {case.name!r} says it makes no {effect!r}, which no effect has (the target's code "
                             f"makes these effects: {', '.join(sorted(effects)) or 'none'})",
                             f"cases[{i}].no_effect[{j}]", ["cases", i, "no_effect", j])
    expects = [("expect", ["expect"], target.expect)] + [(f"cases[{i}].expect", ["cases", i, "expect"], c.expect)
                                                         for i, c in enumerate(target.cases)]
    for where, steps, expect in expects:
        for thread, end in (expect or {}).items():
            for effect in end.get("effects") or {}:
                if effect not in effects:
                    raise refuse(f"{where} counts effect {effect!r} of {thread}, which no effect has: it would be "
                                 f"applied 0 times on every run (the target's code makes these effects: "
                                 f"{', '.join(sorted(effects)) or 'none'})", f"{where}.{thread}.effects.{effect}",
                                 [*steps, thread, "effects", effect])
    nodes = facts["nodes"]
    if nodes is not None:
        for field, steps, node in _nodes_named(target):
            if node not in nodes:
                what = "human answers node" if field.startswith(("human", "cases")) else "gates waits on node"
                raise refuse(f"{what} {node!r}, which the graph does not have (its nodes: {', '.join(nodes)}): no "
                             "thread would ever wait there, so its answers would never be asked for", field, steps)
    if facts["clash"]:
        name, origins = facts["clash"]
        where = next((i for i, s in enumerate(target.invariants) if any(o.startswith(s.partition(":")[0] + ":")
                                                                       for o in origins)), 0)
        raise refuse(f"two invariants are named {name!r}: {', '.join(origins)}; one would never be judged (give one "
                     "another name: crashpoint.invariant(name=...))", f"invariants[{where}]", ["invariants", where])
    specs = _version_specs(target)
    for name in facts["same_code"]:
        spec = specs[name]
        said = (f"{spec['entry']!r} is the entry {target.entry!r} itself under another name" if "entry" in spec else
                f"its {' and '.join(spec['code'])} are the target's own")
        raise refuse(f"version {name!r}: {said}: a deploy of it would change no code "
                     "(name the next version's code)", spec["field"], spec["path"])
    for name in facts["deferred"]:
        alone = _run_child(target, cwd, name, timeout_s=timeout_s)
        if "error" in alone:
            field, spec, error = alone["error"]
            raise refuse(f"{spec!r} names nothing importable (pythonpath {target.pythonpath}): {error}", field,
                         specs[name]["path"])
    return facts
