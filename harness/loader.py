"""Load and validate scenario packs, workflows and cases.

Every input is YAML (JSON files are read as YAML too), checked first against its
JSON Schema in ``scenarios/schemas/`` and then for cross references (a case's
tools and effects must exist in its pack, and so on). Every problem raises
:class:`~crashpoint.errors.CaseError` with the file, the 1-based line and the
dotted field path, e.g.::

    cases/x.yaml:7: field events[1].colour: unknown field 'colour'; allowed: times, tool, type

Nothing is skipped: :func:`load_target` loads every case before returning and
raises on the first bad one.

Shapes (after loading, defaults filled from the schemas):

* ``Pack.workflows[name]``: the workflow mapping, ``{"workflow", "version",
  "description"?, "phases": [{"id", "checkpoint", "timeout_s"?, "on_error",
  "human_gate": False | {...}, "tasks": [{"id", "tool", "args", "retries",
  "backoff_s"?, "critical", "side_effect", "irreversible", "compensation"?,
  "checkpoint"}]}]}``; every task has a ``checkpoint`` (default: its id).
  Fields marked ``?`` may be absent (the engine picks their defaults).
* ``Pack.effects[name]``: ``{"tool", "compensation"?, "gated_by"?, "required_on_success"}``.
* ``Case.events``: event mappings with ``times`` (tool events), ``retryable``
  (``tool_failure``) and ``deliveries`` (approval decisions, ``cancel``, ``start``) filled.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import yaml
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match, relevance

from crashpoint.errors import CaseError
from crashpoint.scenarios import SCHEMA_DIR

__all__ = [
    "APPROVAL_TOOL", "Case", "Locator", "Pack", "dotted", "find_pack_dir", "load_case",
    "load_pack", "load_target", "load_yaml", "validate", "workflow_tools",
]

#: The tool the engine calls to ask for a human approval; cases may script it.
APPROVAL_TOOL = "approvals.request"
#: Suffixes of case files in a cases folder.
CASE_SUFFIXES = (".yaml", ".yml", ".json")

PathT = tuple[str | int, ...]


# --------------------------------------------------------------------------- YAML

def dotted(path: Iterable[str | int]) -> str:
    """Render a JSON path as a field name: ``("events", 1, "type")`` -> ``"events[1].type"``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class Locator:
    """Maps JSON paths of a loaded document to 1-based line numbers.

    A mapping entry's line is its key's line; a sequence item's line is where the
    item starts. ``lines`` holds every path found; ``line(path)`` falls back to the
    nearest existing ancestor and finally to line 1.
    """

    def __init__(self, lines: dict[PathT, int] | None = None) -> None:
        self.lines: dict[PathT, int] = dict(lines or {})
        self.lines.setdefault((), 1)

    def line(self, path: Iterable[str | int] = ()) -> int:
        """Line of the node at ``path`` (or of its nearest existing ancestor)."""
        p = tuple(path)
        while p not in self.lines:
            p = p[:-1]
        return self.lines[p]


def _walk(node: yaml.Node, path: PathT, lines: dict[PathT, int], file: str,
          keys: yaml.constructor.SafeConstructor, stack: set[int]) -> None:
    """Record the line of every node under ``node``; raise on a duplicate or non-string key."""
    if id(node) in stack:  # a recursive alias: nothing new below
        return
    stack.add(id(node))
    if isinstance(node, yaml.MappingNode):
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                continue  # complex keys fail in construction; `<<` merges are not located
            key = keys.construct_object(key_node)
            line = key_node.start_mark.line + 1
            if not isinstance(key, str):
                raise CaseError(f"keys must be strings, got {type(key).__name__} {key!r}; quote it",
                                file=file, line=line, field=dotted(path) or None)
            if key in first:
                raise CaseError(f"duplicate key {key!r} (first at line {first[key]})",
                                file=file, line=line, field=dotted(path + (key,)))
            first[key] = line
            lines[path + (key,)] = line
            _walk(value_node, path + (key,), lines, file, keys, stack)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _walk(item, path + (i,), lines, file, keys, stack)
    stack.discard(id(node))


def load_yaml(path: str | Path) -> tuple[Any, Locator]:
    """Parse one YAML (or JSON) document with ``yaml.safe_load`` semantics.

    Returns ``(data, locator)``; an empty file gives ``None``.

    Raises:
        CaseError: file missing or not a file, not readable, YAML syntax error
            (line from the YAML mark), a duplicate key in a mapping, or a key
            that is not a string (``1:``, ``yes:``; JSON has string keys only).
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise CaseError("file not found", file=file)
    if not path.is_file():
        raise CaseError("not a file", file=file)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"cannot read file: {exc}", file=file) from exc
    if path.suffix.lower() == ".json":
        # Valid JSON has tabs only as whitespace, which YAML refuses for indentation.
        text = text.replace("\t", " ")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
        lines: dict[PathT, int] = {}
        if node is not None:
            _walk(node, (), lines, file, yaml.SafeLoader(""), set())
        data = yaml.SafeLoader("").construct_document(node) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = "YAML error" if isinstance(exc, yaml.constructor.ConstructorError) else "YAML syntax error"
        message = f"{what}: {exc.problem or exc.context or 'invalid YAML'}"
        if exc.problem and exc.context:
            message += f" ({exc.context})"
        raise CaseError(message, file=file, line=mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:
        raise CaseError(f"YAML error: {exc}", file=file) from exc
    return data, Locator(lines)


def _load_mapping(path: Path, what: str) -> tuple[dict[str, Any], Locator]:
    data, locator = load_yaml(path)
    if not isinstance(data, dict):
        got = "an empty file" if data is None else f"a {type(data).__name__}"
        raise CaseError(f"a {what} file must be a mapping at the top level, got {got}",
                        file=str(path), line=1)
    return data, locator


# --------------------------------------------------------------------------- schemas

@functools.cache
def _schema(name: str) -> dict[str, Any]:
    schema = json.loads((SCHEMA_DIR / f"{name}.schema.json").read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    return schema


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(_schema(name))


def _describe(error: ValidationError, path: PathT, locator: Locator) -> tuple[str, PathT, int]:
    """Message, field path and line for one schema error."""
    inst = error.instance
    if error.validator == "additionalProperties" and isinstance(inst, dict):
        props = error.schema.get("properties", {})
        patterns = error.schema.get("patternProperties", {})
        extra = [k for k in inst if k not in props and not any(re.search(p, str(k)) for p in patterns)]
        if extra:
            allowed = ", ".join(sorted(props)) or "(none)"
            if patterns:
                allowed += ", or a name matching " + " / ".join(patterns)
            key = extra[0]
            return f"unknown field {key!r}; allowed: {allowed}", path + (key,), locator.line(path + (key,))
    if error.validator == "required" and isinstance(inst, dict):
        missing = [k for k in error.validator_value if k not in inst]
        if missing:
            return f"missing required field {missing[0]!r}", path + (missing[0],), locator.line(path)
    if error.validator == "const" and error.validator_value is False:  # human_gate
        return f"must be false or a mapping, got {inst!r}", path, locator.line(path)
    return error.message, path, locator.line(path)


def validate(data: Any, schema_name: str, path: str | Path, locator: Locator) -> None:
    """Validate ``data`` against ``scenarios/schemas/<schema_name>.schema.json``.

    ``schema_name`` is ``"case"``, ``"pack"`` or ``"workflow"``; ``path`` is the
    file named in errors. Returns ``None`` when valid.

    Raises:
        CaseError: for the single best error (shallowest first, then earliest in
            the file), with its line and dotted field; an unknown field reads
            ``unknown field 'foo'; allowed: a, b, c`` at the unknown key's line.
    """
    def key(error: ValidationError) -> tuple:
        base = relevance(error)
        # Same depth: prefer the earlier line, then "unknown field" over "missing field".
        return (base[0], -locator.line(error.absolute_path), error.validator == "additionalProperties",
                *base[2:])

    error = best_match(_validator(schema_name).iter_errors(data), key=key)
    if error is None:
        return
    message, field_path, line = _describe(error, tuple(error.absolute_path), locator)
    raise CaseError(message, file=str(path), line=line, field=dotted(field_path) or None)


def _fill_defaults(data: Any, schema: dict[str, Any], root: dict[str, Any]) -> None:
    """Fill in place the ``default`` of every absent property ``schema`` declares.

    Follows ``$ref`` (local), ``allOf``, ``if``/``then``/``else``, ``properties``,
    ``additionalProperties`` and ``items``; ``data`` must already be valid.
    """
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        _fill_defaults(data, target, root)
    for sub in schema.get("allOf", []):
        _fill_defaults(data, sub, root)
    if "if" in schema:
        branch = "then" if Draft202012Validator(schema["if"]).is_valid(data) else "else"
        if branch in schema:
            _fill_defaults(data, schema[branch], root)
    if isinstance(data, dict):
        props = schema.get("properties", {})
        for name, sub in props.items():
            if name not in data and "default" in sub:
                data[name] = copy.deepcopy(sub["default"])
            if name in data:
                _fill_defaults(data[name], sub, root)
        extra = schema.get("additionalProperties")
        if isinstance(extra, dict):
            for name, value in data.items():
                if name not in props:
                    _fill_defaults(value, extra, root)
    elif isinstance(data, list) and isinstance(schema.get("items"), dict):
        for item in data:
            _fill_defaults(item, schema["items"], root)


def _load_checked(path: Path, schema_name: str, what: str) -> tuple[dict[str, Any], Locator]:
    data, locator = _load_mapping(path, what)
    validate(data, schema_name, path, locator)
    _fill_defaults(data, _schema(schema_name), _schema(schema_name))
    return data, locator


# --------------------------------------------------------------------------- packs

def workflow_tools(workflow: dict[str, Any]) -> frozenset[str]:
    """Tools a workflow may call: tasks' ``tool`` and ``compensation``, plus ``approvals.request``."""
    tools = {APPROVAL_TOOL}
    for phase in workflow["phases"]:
        for task in phase["tasks"]:
            tools.add(task["tool"])
            if "compensation" in task:
                tools.add(task["compensation"])
    return frozenset(tools)


@dataclass(frozen=True)
class Pack:
    """A loaded scenario pack (``pack.yaml`` plus its workflows).

    ``workflows`` maps a workflow name to its validated data (defaults filled, see
    the module docstring); ``workflow_files`` to its file; ``effects`` maps an
    effect name to ``{"tool", "compensation"?, "gated_by"?, "required_on_success"}``.
    """

    name: str
    version: str
    root: Path
    description: str
    workflows: dict[str, dict[str, Any]]
    workflow_files: dict[str, Path]
    default_workflow: str | None
    effects: dict[str, dict[str, Any]]
    cases_dir: Path

    def effect_for_tool(self, tool: str) -> str | None:
        """Name of the effect whose ``tool`` is ``tool``, or ``None``."""
        for name, effect in self.effects.items():
            if effect["tool"] == tool:
                return name
        return None

    def tools(self, workflow: str) -> frozenset[str]:
        """Tools workflow ``workflow`` may call (see :func:`workflow_tools`)."""
        return workflow_tools(self.workflows[workflow])


_REF = re.compile(r"^\$result\.([^.]+)\.")


def _check_workflow(data: dict[str, Any], file: Path, loc: Locator) -> None:
    """Semantic checks of one schema-valid workflow; fills each task's ``checkpoint``."""
    def fail(message: str, path: PathT) -> None:
        raise CaseError(message, file=str(file), line=loc.line(path), field=dotted(path))

    ids: dict[str, int] = {}  # phase and task ids share one namespace (as in the engine)
    task_ids: set[str] = set()
    gated = False  # a human gate in an earlier phase
    for i, phase in enumerate(data["phases"]):
        if phase["id"] in ids:
            fail(f"duplicate id {phase['id']!r} (first at line {ids[phase['id']]})", ("phases", i, "id"))
        ids[phase["id"]] = loc.line(("phases", i, "id"))
        for j, task in enumerate(phase["tasks"]):
            at = ("phases", i, "tasks", j)
            if task["id"] in ids:
                fail(f"duplicate id {task['id']!r} (first at line {ids[task['id']]})", at + ("id",))
            for name, value in task["args"].items():
                ref = _REF.match(value) if isinstance(value, str) else None
                if ref and ref.group(1) not in task_ids:
                    fail(f"{value!r} refers to {ref.group(1)!r}, which is not an earlier task",
                         at + ("args", name))
            ids[task["id"]] = loc.line(at + ("id",))
            task_ids.add(task["id"])
            if task["irreversible"] and not gated:
                fail(f"irreversible task {task['id']!r} needs a human_gate in an earlier phase",
                     at + ("irreversible",))
            if "compensation" in task and not task["side_effect"]:
                fail(f"task {task['id']!r} has a compensation but no side_effect; "
                     "set side_effect: true or drop the compensation", at + ("compensation",))
            task.setdefault("checkpoint", task["id"])
        gated = gated or bool(phase["human_gate"])


def load_pack(pack_dir: str | Path) -> Pack:
    """Load ``pack_dir/pack.yaml`` and every workflow it lists.

    Raises:
        CaseError: pack.yaml or a workflow file missing or invalid (schema);
            ``default_workflow`` unknown; an effect's ``tool``/``compensation``
            used by no workflow, its ``gated_by`` no workflow's approval_id, or
            two effects sharing a tool; a phase or task id used twice (one
            namespace for both); an
            ``irreversible`` task with no ``human_gate`` in an earlier phase; a
            ``compensation`` on a task without ``side_effect``; a
            ``$result.TASK.x`` arg naming no earlier task.
    """
    root = Path(pack_dir)
    file = root / "pack.yaml"
    data, loc = _load_checked(file, "pack", "pack")

    def fail(message: str, path: PathT) -> None:
        raise CaseError(message, file=str(file), line=loc.line(path), field=dotted(path))

    workflows: dict[str, dict[str, Any]] = {}
    workflow_files: dict[str, Path] = {}
    for name, rel in data["workflows"].items():
        wf_file = root / rel
        if not wf_file.is_file():
            fail(f"workflow file not found: {wf_file}", ("workflows", name))
        wf, wf_loc = _load_checked(wf_file, "workflow", "workflow")
        _check_workflow(wf, wf_file, wf_loc)
        workflows[name], workflow_files[name] = wf, wf_file

    default = data.get("default_workflow")
    if default is not None and default not in workflows:
        fail(f"unknown workflow {default!r}; workflows: {', '.join(workflows)}", ("default_workflow",))

    used = frozenset().union(*(workflow_tools(wf) for wf in workflows.values()))
    approvals = {p["human_gate"]["approval_id"] for wf in workflows.values()
                 for p in wf["phases"] if p["human_gate"]}
    owner: dict[str, str] = {}
    for name, effect in data["effects"].items():
        for key in ("tool", "compensation"):
            if key in effect and effect[key] not in used:
                fail(f"tool {effect[key]!r} is used by no workflow of the pack", ("effects", name, key))
        if effect["tool"] in owner:
            fail(f"tool {effect['tool']!r} already belongs to effect {owner[effect['tool']]!r}",
                 ("effects", name, "tool"))
        owner[effect["tool"]] = name
        if "gated_by" in effect and effect["gated_by"] not in approvals:
            fail(f"no workflow has a human_gate with approval_id {effect['gated_by']!r}",
                 ("effects", name, "gated_by"))

    return Pack(
        name=data["pack"], version=data["version"], root=root,
        description=data.get("description", ""), workflows=workflows,
        workflow_files=workflow_files, default_workflow=default,
        effects=data["effects"], cases_dir=root / data["cases"],
    )


def find_pack_dir(path: str | Path) -> Path:
    """The nearest folder at or above ``path`` (a file or folder) holding a ``pack.yaml``.

    Raises:
        CaseError: no such folder.
    """
    start = Path(path).absolute()
    for folder in ([start] if start.is_dir() else []) + list(start.parents):
        if (folder / "pack.yaml").is_file():
            return folder
    raise CaseError("no pack.yaml in this folder or any folder above it", file=str(path))


# --------------------------------------------------------------------------- cases

@dataclass(frozen=True)
class Case:
    """A loaded case.

    ``workflow`` and ``initial_step`` are resolved (defaults applied);
    ``events`` have their defaults filled (see the module docstring);
    ``expected`` is as written; ``line_of`` maps a dotted field path
    (``"events[1].tool"``) to its line in ``path``.
    """

    case_id: str
    path: Path
    workflow: str
    initial_step: str
    input: dict[str, Any]
    events: list[dict[str, Any]]
    expected: dict[str, Any]
    tags: tuple[str, ...] = ()
    line_of: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    description: str = ""


def load_case(path: str | Path, pack: Pack) -> Case:
    """Load and check one case file of ``pack``.

    Raises:
        CaseError: unreadable or invalid (schema) file; unknown ``workflow`` (or
            none given and no ``default_workflow``); ``initial_step`` not a task
            id of the workflow; an event ``tool`` the workflow does not use; a
            ``start`` event that is not first; ``must_not_X``, ``effects`` or
            ``compensated`` naming an effect not in the pack.
    """
    path = Path(path)
    data, loc = _load_checked(path, "case", "case")

    def fail(message: str, at: PathT) -> None:
        raise CaseError(message, file=str(path), line=loc.line(at), field=dotted(at))

    workflow = data.get("workflow", pack.default_workflow)
    if workflow is None:
        fail("no workflow given and the pack has no default_workflow", ("workflow",))
    if workflow not in pack.workflows:
        fail(f"unknown workflow {workflow!r}; pack {pack.name!r} has: {', '.join(pack.workflows)}",
             ("workflow",))
    wf = pack.workflows[workflow]
    task_ids = [t["id"] for p in wf["phases"] for t in p["tasks"]]
    initial_step = data.get("initial_step", task_ids[0])
    if initial_step not in task_ids:
        fail(f"initial_step {initial_step!r} is not a task of workflow {workflow!r}; "
             f"tasks: {', '.join(task_ids)}", ("initial_step",))

    tools = workflow_tools(wf)
    for i, event in enumerate(data["events"]):
        if "tool" in event and event["tool"] not in tools:
            fail(f"tool {event['tool']!r} is not used by workflow {workflow!r}; "
                 f"tools: {', '.join(sorted(tools))}", ("events", i, "tool"))
        if event["type"] == "start" and i > 0:
            fail("a start event is only allowed as the first event", ("events", i, "type"))

    expected = data["expected"]
    known = ", ".join(pack.effects) or "(none)"

    def check_effect(name: str, at: PathT) -> None:
        if name not in pack.effects:
            fail(f"unknown effect {name!r}; pack {pack.name!r} effects: {known}", at)

    for key in expected:
        if key.startswith("must_not_"):
            check_effect(key.removeprefix("must_not_"), ("expected", key))
    for name in expected.get("effects", {}):
        check_effect(name, ("expected", "effects", name))
    for i, name in enumerate(expected.get("compensated", [])):
        check_effect(name, ("expected", "compensated", i))
        if not pack.effects[name].get("compensation"):
            fail(f"effect {name!r} has no compensation in pack {pack.name!r}, so it cannot be compensated",
                 ("expected", "compensated", i))

    return Case(
        case_id=data["case_id"], path=path, workflow=workflow, initial_step=initial_step,
        input=data["input"], events=data["events"], expected=expected,
        tags=tuple(data["tags"]), description=data.get("description", ""),
        line_of={dotted(p): line for p, line in loc.lines.items() if p},
    )


def _case_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in CASE_SUFFIXES)


def load_target(path: str | Path) -> tuple[Pack, list[Case]]:
    """Load a pack and cases from ``path``.

    ``path`` is a pack folder or its ``pack.yaml`` (every ``*.yaml``/``*.yml``/``*.json`` of its cases
    folder, sorted by name), another folder inside a pack (its case files), or
    one case file. The pack is the nearest folder at or above ``path`` holding
    ``pack.yaml``.

    Raises:
        CaseError: ``path`` missing; no pack; the pack's cases folder missing;
            the first case that fails to load; a ``case_id`` used twice.
    """
    path = Path(path)
    if not path.exists():
        raise CaseError("no such file or folder", file=str(path))
    if path.is_file() and path.name == "pack.yaml":  # the pack file stands for its pack
        path = path.parent
    pack_dir = find_pack_dir(path)
    pack = load_pack(path if path.is_dir() and (path / "pack.yaml").is_file() else pack_dir)
    if path.is_file():
        files = [path]
    else:
        folder = pack.cases_dir if (path / "pack.yaml").is_file() else path
        if not folder.is_dir():
            raise CaseError(f"cases folder not found: {folder}", file=str(pack.root / "pack.yaml"),
                            field="cases")
        files = _case_files(folder)
    cases: list[Case] = []
    seen: dict[str, Case] = {}
    for file in files:
        case = load_case(file, pack)
        if case.case_id in seen:
            first = seen[case.case_id]
            raise CaseError(f"duplicate case_id {case.case_id!r} (first in "
                            f"{first.path}:{first.line_of.get('case_id', 1)})",
                            file=str(file), line=case.line_of.get("case_id", 1), field="case_id")
        seen[case.case_id] = case
        cases.append(case)
    return pack, cases
