"""Load and validate scenario packs, workflows and cases.

Every input is YAML (JSON files are read as YAML too), checked first against its
JSON Schema in ``scenarios/schemas/`` and then for cross references (a case's
tools and effects must exist in its pack, and so on). Every problem raises
:class:`~crashpoint.errors.CaseError` with the file, the 1-based line and the
dotted field path, e.g.::

    cases/x.yaml:7: field events[1].colour: unknown field 'colour'; allowed: times, tool, type

Nothing is skipped: :func:`load_target` loads every case before returning and
raises on the first bad one; an entry of the cases folder it would otherwise
skip (a subfolder, a broken symlink, a FIFO, a symlink out of the pack) is an
error too. Only names starting with ``.`` (editor swap and lock files) and files
with other suffixes are ignored.

Hostile input is refused up front, so nothing malformed reaches a run:

* files over :data:`MAX_FILE_BYTES` (1 MiB) and nesting deeper than
  :data:`MAX_DEPTH` (64 levels);
* YAML aliases (``*name``), refused on the event stream before they expand (no
  alias bombs, no recursive data), and ``<<`` merge keys;
* values JSON cannot hold, anywhere (``input`` included): dates and times,
  ``!!binary``, ``!!set``, ``!!omap``, ``.nan`` and ``.inf``; an ``integer``
  field refuses ``1.0``;
* names that end up in crash point ids and folder names (phase and task ids,
  checkpoint names, approval ids, tool names, ``case_id``) must match the
  schemas' patterns; trace event kinds must be in :data:`TRACE_KINDS`;
* workflow files and the cases folder must lie inside the pack folder.

Shapes (after loading, defaults filled from the schemas):

* ``Pack.workflows[name]``: the workflow mapping, ``{"workflow", "version",
  "description"?, "phases": [{"id", "checkpoint", "timeout_s"?, "on_error",
  "human_gate": False | {...}, "tasks": [{"id", "tool", "args", "retries",
  "backoff_s"?, "critical", "side_effect", "irreversible", "compensation"?,
  "checkpoint"}]}]}``; every task has a ``checkpoint`` (default: its id).
  Fields marked ``?`` may be absent (the engine picks their defaults).
* ``Pack.effects[name]``: ``{"tool", "compensation"?, "gated_by"?, "after"?, "required_on_success"}``.
* ``Case.events``: event mappings with ``times`` (tool events), ``retryable``
  (``tool_failure``), ``deliveries`` (approval decisions, ``cancel``, ``start``),
  ``before_wait`` (approval decisions) and ``rename_tasks`` (``deploy``) filled.
"""

from __future__ import annotations

import copy
import datetime
import difflib
import errno
import functools
import json
import math
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import yaml
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match, relevance

from crashpoint.errors import CaseError
from crashpoint.harness.faults import kinds as fault_kinds
from crashpoint.harness.load import pack_world
from crashpoint.scenarios import SCHEMA_DIR

__all__ = [
    "APPROVAL_TOOL", "MAX_DEPTH", "MAX_FILE_BYTES", "TRACE_KINDS", "Case", "Locator", "Pack", "dotted",
    "find_pack_dir", "first_gate", "load_case", "load_pack", "load_target", "load_yaml", "redeployed", "validate",
    "workflow_tools",
]

#: The tool the engine calls to ask for a human approval; cases may script it.
APPROVAL_TOOL = "approvals.request"
#: Suffixes of case files in a cases folder.
CASE_SUFFIXES = (".yaml", ".yml", ".json")
#: Largest input file read, in bytes (1 MiB); a larger file is an error, not read.
MAX_FILE_BYTES = 1 << 20
#: Deepest nesting of mappings and sequences in one file (the top level is level 1).
MAX_DEPTH = 64
#: Trace event kinds, the vocabulary of ``expected.required_trace_events`` and
#: ``forbidden_trace_events`` (the ``enum`` of ``$defs.trace_kind`` in the case schema).
TRACE_KINDS = (
    "workflow_accepted", "workflow_started", "workflow_resumed", "workflow_finished", "transition",
    "checkpoint", "step_started", "step_result", "tool_call", "tool_result", "task_skipped",
    "retry_scheduled", "approval_requested", "approval_granted", "approval_denied", "approval_timeout",
    "event_received", "event_duplicate", "event_ignored", "cancel_requested", "compensation_required",
    "compensation_started", "compensation_result", "revision_started", "progress",
)

PathT = tuple[str | int, ...]


# --------------------------------------------------------------------------- YAML

def dotted(path: Iterable[str | int]) -> str:
    """Render a JSON path as a field name: ``("events", 1, "type")`` -> ``"events[1].type"``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _one_line(text: str) -> str:
    """``text`` with its line breaks turned into spaces (messages are one line)."""
    return " ".join(part.strip() for part in str(text).splitlines() if part.strip())


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


_TAG = "tag:yaml.org,2002:"
_NESTED = (yaml.MappingStartEvent, yaml.SequenceStartEvent)


def _short_tag(tag: str) -> str:
    return "!!" + tag.removeprefix(_TAG) if tag.startswith(_TAG) else tag


class _Loader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses aliases and deep nesting while composing.

    Both checks run on the event stream, before any node is built, so an alias bomb
    (``&a [*a, *a, ...]``) or a recursive alias never expands. Errors during
    construction (``!!float nope``) become :class:`CaseError` at the node's line.
    """

    def __init__(self, text: str, file: str) -> None:
        super().__init__(text)
        self.file = file
        self.path: list[str | int] = []       # path of the node being composed
        self.depth = 0                        # open mappings and sequences
        self.paths: dict[int, PathT] = {}     # id(node) -> its path (keys: their mapping's)

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node:
        pushed = parent is not None and index is not None  # a sequence item or a mapping value
        if pushed:
            self.path.append(index if isinstance(index, int) else str(getattr(index, "value", "?")))
        try:
            event = self.peek_event()
            if isinstance(event, yaml.AliasEvent):
                raise CaseError(f"YAML aliases are not allowed (*{event.anchor}); write the value out",
                                file=self.file, line=event.start_mark.line + 1, field=dotted(self.path) or None)
            nested = isinstance(event, _NESTED)
            if nested:
                self.depth += 1
                if self.depth > MAX_DEPTH:
                    raise CaseError(f"nesting is deeper than {MAX_DEPTH} levels", file=self.file,
                                    line=event.start_mark.line + 1, field=dotted(self.path) or None)
            try:
                node = super().compose_node(parent, index)
            finally:
                if nested:
                    self.depth -= 1
            self.paths[id(node)] = tuple(self.path)
            return node
        finally:
            if pushed:
                self.path.pop()

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        def fail(message: str, mark: yaml.Mark | None) -> CaseError:
            return CaseError(_one_line(message), file=self.file, line=(mark or node.start_mark).line + 1,
                             field=dotted(self.paths.get(id(node), ())) or None)
        try:
            return super().construct_object(node, deep)
        except CaseError:
            raise
        except yaml.constructor.ConstructorError as exc:  # an unknown tag (!foo, !!python/...), bad base64
            if "could not determine a constructor" in str(exc.problem):
                raise fail(f"YAML tag {_short_tag(node.tag)} is not allowed: only plain JSON values are read "
                           "(no !!python/* or custom tags)", exc.problem_mark) from exc
            message = f"YAML error: {exc.problem or exc.context}"
            if exc.problem and exc.context:
                message += f" ({exc.context})"
            raise fail(message, exc.problem_mark) from exc
        except Exception as exc:  # SafeConstructor lets ValueError & co. escape
            value = str(node.value) if isinstance(node, yaml.ScalarNode) else None
            what = "" if value is None else f" value {value if len(value) <= 40 else value[:37] + '...'!r}"
            raise fail(f"YAML error: cannot read {_short_tag(node.tag)}{what}: {_one_line(exc)[:200]}",
                       None) from exc


def _walk(node: yaml.Node, path: PathT, lines: dict[PathT, int], file: str, loader: _Loader) -> None:
    """Record the line of every node under ``node``.

    Raises on a duplicate or non-string key, a ``<<`` merge key, and a mapping or
    sequence that is not a JSON one (``!!set``, ``!!omap``, ``!!pairs``).
    """
    def fail(message: str, line: int, at: PathT) -> None:
        raise CaseError(message, file=file, line=line, field=dotted(at) or None)

    def not_json(kind: str) -> None:
        if node.tag.startswith(_TAG + "python/") or not node.tag.startswith(_TAG):
            fail(f"YAML tag {_short_tag(node.tag)} is not allowed: only plain JSON values are read "
                 "(no !!python/* or custom tags)", node.start_mark.line + 1, path)
        what = (f"{node.tag.removeprefix(_TAG)} ({_short_tag(node.tag)})" if node.tag.startswith(_TAG)
                else f"a {kind} tagged {node.tag}")
        fail(f"not a JSON value: {what}; use a plain {kind}", node.start_mark.line + 1, path)

    if isinstance(node, yaml.MappingNode):
        if node.tag != _TAG + "map":
            not_json("mapping")
        first: dict[Any, int] = {}
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _TAG + "merge":
                fail("YAML merge keys (<<) are not allowed; write the fields out", line, path)
            if not isinstance(key_node, yaml.ScalarNode):
                fail("keys must be strings, got a YAML " + ("mapping" if isinstance(key_node, yaml.MappingNode)
                                                             else "sequence"), line, path)
            key = loader.construct_object(key_node)
            if not isinstance(key, str):
                fail(f"keys must be strings, got {type(key).__name__} {key!r}; quote it", line, path)
            if key in first:
                fail(f"duplicate key {key!r} (first at line {first[key]})", line, path + (key,))
            first[key] = line
            lines[path + (key,)] = line
            _walk(value_node, path + (key,), lines, file, loader)
    elif isinstance(node, yaml.SequenceNode):
        if node.tag != _TAG + "seq":
            not_json("list")
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _walk(item, path + (i,), lines, file, loader)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _check_json(value: Any, path: PathT, file: str, locator: Locator) -> None:
    """Raise on the first value under ``value`` that JSON cannot hold (a date, bytes, NaN, a string
    or key with a lone surrogate, which no UTF-8 file, store or terminal can take, ...)."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_json(key, path + (key,), file, locator)
            _check_json(item, path + (key,), file, locator)
        return
    if isinstance(value, list):
        for i, item in enumerate(value):
            _check_json(item, path + (i,), file, locator)
        return
    if isinstance(value, str) and (bad := _SURROGATE.search(value)):
        raise CaseError(f"a lone surrogate \\u{ord(bad.group()):04x} at character {bad.start() + 1} is not text "
                        "(UTF-8 cannot hold it); write the character itself or its pair",
                        file=file, line=locator.line(path), field=dotted(path) or None)
    if value is None or isinstance(value, (str, bool, int)):
        return
    if isinstance(value, float):
        if math.isfinite(value):
            return
        message = f"not a JSON value: {value!r}; JSON numbers are finite"
    elif isinstance(value, (datetime.date, datetime.time)):
        message = (f"not a JSON value: {type(value).__name__} {value}; quote it to make it a string "
                   "(YAML reads unquoted dates as timestamps)")
    elif isinstance(value, (bytes, bytearray)):
        message = "not a JSON value: bytes (!!binary); use a string"
    else:
        message = f"not a JSON value: {type(value).__name__} {_one_line(repr(value))[:60]}"
    raise CaseError(message, file=file, line=locator.line(path), field=dotted(path) or None)


def _read_text(path: Path) -> str:
    """The text of the regular file ``path`` (UTF-8, at most :data:`MAX_FILE_BYTES`)."""
    file = str(path)
    problem = _file_problem(path)
    if problem == "missing":
        raise CaseError("file not found", file=file)
    if problem == "a folder":
        raise CaseError("not a file (a folder)", file=file)
    if problem is not None:
        raise CaseError(f"not a regular file ({problem})", file=file)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
            if len(raw) > MAX_FILE_BYTES:
                size = max(os.fstat(fh.fileno()).st_size, len(raw))
                raise CaseError(f"file is {size} bytes; the limit is {MAX_FILE_BYTES}", file=file, line=1)
    except OSError as exc:
        raise CaseError(f"cannot read file: {_one_line(exc.strerror or exc)}", file=file) from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_start = raw.rfind(b"\n", 0, exc.start) + 1
        raise CaseError(f"not UTF-8: byte 0x{raw[exc.start]:02x} at column {exc.start - line_start + 1} "
                        f"cannot be decoded ({exc.reason}); save the file as UTF-8",
                        file=file, line=raw.count(b"\n", 0, exc.start) + 1) from exc


def load_yaml(path: str | Path) -> tuple[Any, Locator]:
    """Parse one YAML (or JSON) document with ``yaml.safe_load`` semantics, JSON values only.

    Returns ``(data, locator)``; an empty file gives ``None``.

    Raises:
        CaseError: file missing or not a regular file, not readable, larger than
            :data:`MAX_FILE_BYTES`, not UTF-8 (line of the first bad byte), a
            YAML syntax error or a forbidden character such as NUL (line from
            the YAML mark), an alias ``*name`` (refused before it expands),
            nesting deeper than :data:`MAX_DEPTH`, a ``<<`` merge key, a
            duplicate key, a key that is not a string (``1:``, ``yes:``), or a
            value JSON cannot hold: a date or time (``2024-01-01``), ``!!binary``,
            ``!!set``, ``!!omap``/``!!pairs``, or a non-finite float (``.nan``,
            ``.inf``).
    """
    path = Path(path)
    file = str(path)
    text = _read_text(path)
    if path.suffix.lower() == ".json":
        # Valid JSON has tabs only as whitespace, which YAML refuses for indentation.
        text = text.replace("\t", " ")
    loader: _Loader | None = None
    try:
        loader = _Loader(text, file)
        node = loader.get_single_node()
        lines: dict[PathT, int] = {}
        if node is not None:
            _walk(node, (), lines, file, loader)
        data = loader.construct_document(node) if node is not None else None
    except yaml.reader.ReaderError as exc:
        char = exc.character if isinstance(exc.character, int) else ord(exc.character)
        name = " (NUL)" if char == 0 else ""
        raise CaseError(f"YAML error: unacceptable character #x{char:04x}{name}: {exc.reason}",
                        file=file, line=text.count("\n", 0, exc.position) + 1) from exc
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        what = "YAML error" if isinstance(exc, yaml.constructor.ConstructorError) else "YAML syntax error"
        message = f"{what}: {exc.problem or exc.context or 'invalid YAML'}"
        if exc.problem and exc.context:
            message += f" ({exc.context})"
        raise CaseError(_one_line(message), file=file, line=mark.line + 1 if mark else None) from exc
    except yaml.YAMLError as exc:
        raise CaseError(f"YAML error: {_one_line(exc)}", file=file, line=1) from exc
    finally:
        if loader is not None:
            loader.dispose()
    locator = Locator(lines)
    _check_json(data, (), file, locator)
    return data, locator


def _file_problem(path: Path) -> str | None:
    """Why ``path`` is not a regular file (following symlinks), or ``None`` when it is one.

    ``"missing"``, ``"a broken symlink"``, ``"a symlink loop"``, ``"a folder"``,
    ``"a FIFO"``, ``"a socket"``, ``"a device"`` or ``"not accessible (...)"``.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "a broken symlink" if os.path.islink(path) else "missing"
    except OSError as exc:
        return "a symlink loop" if exc.errno == errno.ELOOP else f"not accessible ({exc.strerror})"
    except ValueError:  # an embedded NUL
        return "not accessible (the name contains NUL)"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "a device"


def _inside(path: Path, root: Path) -> bool:
    """Whether ``path``, symlinks resolved, lies in folder ``root`` (symlinks resolved)."""
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(root))


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
    if name == "target":  # the engines a target may name are the registry's (declared once, by each engine)
        from crashpoint.harness.engines.base import engine_names

        schema["properties"]["engine"]["enum"] = list(engine_names())
    Draft202012Validator.check_schema(schema)
    return schema


def _is_integer(checker: Any, instance: Any) -> bool:
    """JSON Schema ``integer``, but only Python ``int``: ``1.0`` is a float here (Draft 2020-12 allows it)."""
    return isinstance(instance, int) and not isinstance(instance, bool)


@functools.cache
def _ecma_regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` for :func:`re.search` with ECMA-262's ``$``: the end of the string, not before a final newline."""
    if pattern.endswith("$") and not pattern.endswith("\\$"):
        pattern = pattern[:-1] + r"\Z"
    return re.compile(pattern)


def _pattern(validator: Any, pattern: str, instance: Any, schema: dict[str, Any]) -> Iterable[ValidationError]:
    """The ``pattern`` keyword, ``$`` as in ECMA-262 (Python's would let ``"refund\\n"`` match ``^[a-z]+$``)."""
    if validator.is_type(instance, "string") and not _ecma_regex(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


#: Draft 2020-12 with a strict ``integer`` (``times: 1.0`` is an error, not a float the engine
#: trips on) and an ECMA-262 ``pattern`` (a trailing newline does not slip past ``$``).
StrictValidator = validators.extend(
    Draft202012Validator, validators={"pattern": _pattern},
    type_checker=Draft202012Validator.TYPE_CHECKER.redefine("integer", _is_integer))

#: Explanations appended to ``pattern`` errors, by pattern.
_PATTERN_HINTS = {
    "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$":
        "a name is 1-128 letters, digits, '_', '.' or '-', starting with a letter, digit or '_' "
        "(it becomes part of crash point ids and folder names)",
    "^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$":
        "an id is 1-128 letters, digits, '_' or '-', starting with a letter, digit or '_' "
        "(no '.': `$result.ID.FIELD` splits at dots)",
}


@functools.cache
def _validator(name: str) -> Draft202012Validator:
    return StrictValidator(_schema(name))


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
    message = _one_line(error.message)
    if error.validator == "enum" and isinstance(inst, str):
        close = difflib.get_close_matches(inst, [str(v) for v in error.validator_value], n=1)
        if close:
            message += f"; did you mean {close[0]!r}?"
    if error.validator == "pattern" and error.validator_value in _PATTERN_HINTS:
        message += f"; {_PATTERN_HINTS[error.validator_value]}"
    return message, path, locator.line(path)


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
        branch = "then" if StrictValidator(schema["if"]).is_valid(data) else "else"
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
    effect name to ``{"tool", "compensation"?, "gated_by"?, "required_on_success"}``;
    ``line_of`` maps a dotted field path of ``pack.yaml`` (``"cases"``) to its line.
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
    line_of: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    #: the pack's own tools module (``world.tools``, absolute), or ``None``: see :mod:`.world`
    tools_file: Path | None = None
    #: workflow -> ``"ABS_FILE:FUNCTION"`` of its input generator (``world.inputs``)
    inputs: dict[str, str] = field(default_factory=dict)

    def effect_for_tool(self, tool: str) -> str | None:
        """Name of the effect whose ``tool`` is ``tool``, or ``None``."""
        for name, effect in self.effects.items():
            if effect["tool"] == tool:
                return name
        return None

    def tools(self, workflow: str) -> frozenset[str]:
        """Tools workflow ``workflow`` may call (see :func:`workflow_tools`)."""
        return workflow_tools(self.workflows[workflow])

    def workflow_input(self, workflow: str, seed: int) -> dict[str, Any]:
        """A generated input of ``workflow`` for ``seed``: the pack's generator, else the built-in one."""
        return pack_world.workflow_input(self.inputs, workflow, seed)


_REF = re.compile(r"^\$result\.([^.]+)\.")


def _check_workflow(data: dict[str, Any], file: Path, loc: Locator) -> None:
    """The rules of one schema-valid workflow, checked once: by the engine's own definition check
    (:meth:`crashpoint.engine.definition.WorkflowDefinition.check`), whose error path this maps to a
    line of ``file``. Fills each task's ``checkpoint`` (default: its id)."""
    from crashpoint.engine.definition import DefinitionError, WorkflowDefinition

    for phase in data["phases"]:
        for task in phase["tasks"]:
            task.setdefault("checkpoint", task["id"])
    try:
        WorkflowDefinition.from_dict(data)
    except DefinitionError as exc:
        first = f" (first at line {loc.line(exc.first)})" if exc.first else ""
        raise CaseError(f"{exc}{first}", file=str(file), line=loc.line(exc.path), field=dotted(exc.path) or None) \
            from exc


def load_pack(pack_dir: str | Path) -> Pack:
    """Load ``pack_dir/pack.yaml`` and every workflow it lists.

    Workflow files and the cases folder must lie inside ``pack_dir`` (after
    resolving symlinks); a workflow file's ``workflow`` name must equal its key
    in ``workflows``.

    Raises:
        CaseError: pack.yaml or a workflow file missing, not a regular file or
            invalid (schema); a workflow path or ``cases`` that is absolute or
            points outside the pack folder; a workflow whose ``workflow`` name
            differs from its key; ``default_workflow`` unknown; an effect's ``tool``/``compensation``
            used by no workflow, its ``gated_by`` no workflow's approval_id, or
            two effects sharing a tool; a phase or task id used twice (one
            namespace for both); an
            ``irreversible`` task with no ``human_gate`` in an earlier phase; a
            ``compensation`` on a task without ``side_effect``; a
            ``$result.TASK.x`` arg naming no earlier task; a task calling a tool no world
            provides (built in, or the pack's ``world.tools``); a ``world`` section that does not
            load (see :func:`crashpoint.harness.load.pack_world.load_world`).
    """
    root = Path(pack_dir)
    file = root / "pack.yaml"
    data, loc = _load_checked(file, "pack", "pack")

    def fail(message: str, path: PathT) -> None:
        raise CaseError(message, file=str(file), line=loc.line(path), field=dotted(path))

    def inside(rel: str, at: PathT) -> Path:
        """``root / rel``, or an error when ``rel`` leaves the pack folder."""
        if "\0" in rel:
            fail(f"{rel!r} contains a NUL character", at)
        if Path(rel).is_absolute():
            fail(f"must be a path relative to the pack folder, got {rel!r}", at)
        target = root / rel
        if not _inside(target, root):
            fail(f"{rel!r} points outside the pack folder (resolves to {os.path.realpath(target)})", at)
        return target

    cases_dir = inside(data["cases"], ("cases",))
    tools_file, inputs = pack_world.load_world(data.get("world", {}), inside, fail, data["workflows"])
    provided = pack_world.provided_tools(tools_file)
    workflows: dict[str, dict[str, Any]] = {}
    workflow_files: dict[str, Path] = {}
    for name, rel in data["workflows"].items():
        wf_file = inside(rel, ("workflows", name))
        problem = _file_problem(wf_file)
        if problem == "missing":
            fail(f"workflow file not found: {wf_file}", ("workflows", name))
        if problem is not None:
            fail(f"workflow file {wf_file} is not a regular file ({problem})", ("workflows", name))
        wf, wf_loc = _load_checked(wf_file, "workflow", "workflow")
        if wf["workflow"] != name:
            raise CaseError(f"workflow {wf['workflow']!r} is listed as {name!r} in "
                            f"{file}:{loc.line(('workflows', name))}; the two names must be equal",
                            file=str(wf_file), line=wf_loc.line(("workflow",)), field="workflow")
        _check_workflow(wf, wf_file, wf_loc)
        pack_world.check_tools(wf, provided, _failing(wf_file, wf_loc), tools_file)
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
        for i, before in enumerate(effect.get("after", [])):
            if before not in data["effects"] or before == name:
                fail(f"'after' names {before!r}, which is not another effect of the pack; effects: "
                     f"{', '.join(data['effects'])}", ("effects", name, "after", i))

    return Pack(
        name=data["pack"], version=data["version"], root=root,
        description=data.get("description", ""), workflows=workflows,
        workflow_files=workflow_files, default_workflow=default,
        effects=data["effects"], cases_dir=cases_dir,
        line_of={dotted(p): line for p, line in loc.lines.items() if p},
        tools_file=tools_file, inputs=inputs,
    )


def _failing(file: Path, loc: Locator) -> Callable[[str, PathT], None]:
    """``fail(message, field path)`` raising the :class:`CaseError` of that field of ``file``."""
    def fail(message: str, path: PathT) -> None:
        raise CaseError(message, file=str(file), line=loc.line(path), field=dotted(path))
    return fail


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

#: Keys of a case file (``case.schema.json``), in the order :meth:`Case.to_data` writes them.
CASE_KEYS = ("case_id", "description", "workflow", "initial_step", "input", "tags", "events", "faults", "expected")


@dataclass(frozen=True)
class Case:
    """A loaded case: the one case model every reader and writer shares.

    ``workflow`` and ``initial_step`` are resolved (defaults applied);
    ``events`` have their defaults filled (see the module docstring);
    ``faults`` are in the one spelling ``{kind: ...}`` (:mod:`crashpoint.harness.faults.kinds`),
    defaults filled; ``expected`` is as written; ``line_of`` maps a dotted field path
    (``"events[1].tool"``) to its line in ``path``.

    :meth:`to_data` and :meth:`from_data` are a round trip: ``Case.from_data(c.to_data(), pack,
    path=c.path) == c`` (a property test checks it), and every writer of a case (repro cases,
    trace files, incidents) goes through :meth:`to_data`.
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
    faults: list[dict[str, Any]] = field(default_factory=list)

    def to_data(self) -> dict[str, Any]:
        """The case as case-file data (the keys of ``case.schema.json``, in :data:`CASE_KEYS` order; a
        copy): ``description`` and ``faults`` only when not empty, and ``expected`` without the
        ``false`` defaults the loader fills (``must_not_*`` flags are kept as written)."""
        data: dict[str, Any] = {"case_id": self.case_id}
        if self.description:
            data["description"] = self.description
        data |= {"workflow": self.workflow, "initial_step": self.initial_step, "input": copy.deepcopy(self.input),
                 "tags": list(self.tags), "events": copy.deepcopy(self.events)}
        if self.faults:
            data["faults"] = copy.deepcopy(self.faults)
        data["expected"] = {k: copy.deepcopy(v) for k, v in self.expected.items()
                            if v is not False or k.startswith("must_not_")}
        return data

    @classmethod
    def from_data(cls, data: dict[str, Any], pack: "Pack | None" = None, *, path: str | Path = "<case>",
                  locator: Locator | None = None) -> "Case":
        """The case of case-file ``data`` (not changed), checked as :func:`load_case` checks a file.

        With ``pack``, every cross reference is checked and defaults are resolved from it (the
        workflow, the first task); without, only the schema, and ``workflow`` and ``initial_step``
        must be given. ``path`` and ``locator`` name the file and lines in errors.

        Raises:
            CaseError: as :func:`load_case`.
        """
        loc = locator or Locator()
        data = copy.deepcopy(data)
        validate(data, "case", path, loc)
        schema = _schema("case")
        _fill_defaults(data, schema, schema)
        return _case_from_data(data, pack, Path(path), loc)


def load_case(path: str | Path, pack: Pack) -> Case:
    """Load and check one case file of ``pack``.

    Raises:
        CaseError: unreadable or invalid (schema) file; unknown ``workflow`` (or
            none given and no ``default_workflow``); ``initial_step`` not a task
            id of the workflow; an event ``tool`` the workflow does not use; a
            ``start`` event that is not first; ``must_not_X``, ``effects`` or
            ``compensated`` naming an effect not in the pack; a fault its kind refuses.
    """
    path = Path(path)
    data, loc = _load_checked(path, "case", "case")
    return _case_from_data(data, pack, path, loc)


def _case_from_data(data: dict[str, Any], pack: Pack | None, path: Path, loc: Locator) -> Case:
    """The :class:`Case` of valid case-file ``data`` (defaults filled), cross-checked against ``pack``."""

    def fail(message: str, at: PathT) -> None:
        raise CaseError(message, file=str(path), line=loc.line(at), field=dotted(at))

    if pack is None:
        for key in ("workflow", "initial_step"):
            if key not in data:
                fail(f"missing required field {key!r} (a case read without its pack names them)", (key,))
        return Case(case_id=data["case_id"], path=path, workflow=data["workflow"], initial_step=data["initial_step"],
                    input=data["input"], events=data["events"], expected=data["expected"], tags=tuple(data["tags"]),
                    description=data.get("description", ""),
                    faults=[_fault(raw, i, None, data["workflow"], fail) for i, raw in enumerate(data["faults"])],
                    line_of={dotted(p): line for p, line in loc.lines.items() if p})

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
    later = None  # index of the first external event that is neither `start` nor an early approval
    version = wf["version"]
    for i, event in enumerate(data["events"]):
        if "tool" in event and event["tool"] not in tools:
            fail(f"tool {event['tool']!r} is not used by workflow {workflow!r}; "
                 f"tools: {', '.join(sorted(tools))}", ("events", i, "tool"))
        if event["type"] == "start" and i > 0:
            fail("a start event is only allowed as the first event", ("events", i, "type"))
        if event.get("before_wait"):
            if first_gate(wf) is None:
                fail(f"before_wait: workflow {workflow!r} has no human_gate to wait at", ("events", i, "before_wait"))
            if later is not None:
                fail(f"an approval with before_wait: true is delivered right after the start request, so it must "
                     f"come before every other event but tool events and start (event {later} is a "
                     f"{data['events'][later]['type']})", ("events", i, "before_wait"))
        elif event["type"] != "start" and not event["type"].startswith("tool_") and later is None:
            later = i
        if event["type"] == "deploy":
            if event["version"] <= version:
                fail(f"deploy version {event['version']} must be greater than {version} (the workflow's "
                     "version or an earlier deploy's)", ("events", i, "version"))
            version = event["version"]
            for old in event["rename_tasks"]:
                if old not in task_ids:
                    fail(f"rename_tasks: {old!r} is not a task of workflow {workflow!r}; tasks: "
                         f"{', '.join(task_ids)}", ("events", i, "rename_tasks", old))
            ids = [p["id"] for p in wf["phases"]] + [event["rename_tasks"].get(t, t) for t in task_ids]
            twice = sorted({x for x in ids if ids.count(x) > 1})
            if twice:
                fail(f"rename_tasks: the new version would use the id {twice[0]!r} twice (phase and task ids "
                     "share one namespace)", ("events", i, "rename_tasks"))

    faults = [_fault(raw, i, tools, workflow, fail) for i, raw in enumerate(data.get("faults", ()))]
    expected = data["expected"]
    if expected.get("like_fault_free") and not faults:
        fail("like_fault_free compares the run with the same case without its faults, but the case has no "
             "`faults`", ("expected", "like_fault_free"))
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
        tags=tuple(data["tags"]), description=data.get("description", ""), faults=faults,
        line_of={dotted(p): line for p, line in loc.lines.items() if p},
    )




def _fault(raw: dict[str, Any], i: int, tools: Iterable[str] | None, workflow: str,
           fail: Callable[[str, PathT], None]) -> dict[str, Any]:
    """Fault ``i`` of a case in the one spelling, defaults filled, checked by its kind (against the
    workflow's ``tools`` when known)."""
    try:
        fault = fault_kinds.normalize(raw)
        if tools is not None:
            fault_kinds.get(fault["kind"]).check(fault, tools, workflow)
        schema = _schema("case")
        _fill_defaults(fault, schema["$defs"]["fault"], schema)  # an old spelling gets its kind's defaults
    except fault_kinds.FaultError as exc:
        fail(str(exc), ("faults", i) + exc.path)
    except ValueError as exc:
        fail(str(exc), ("faults", i))
    return fault


def first_gate(workflow: dict[str, Any]) -> dict[str, Any] | None:
    """The ``human_gate`` of the workflow's first gated phase (``{"approval_id", ...}``), or ``None``."""
    return next((p["human_gate"] for p in workflow["phases"] if p["human_gate"]), None)


def redeployed(workflow: dict[str, Any], version: int, rename_tasks: dict[str, str] | None = None) -> dict[str, Any]:
    """A copy of the workflow data as a ``deploy`` event deploys it: ``version`` replaced, tasks renamed.

    A renamed task keeps its checkpoint name; ``$result.OLD.field`` references in task args follow
    the rename (``$result.NEW.field``), so the new version is consistent on its own.
    """
    rename = dict(rename_tasks or {})
    data = copy.deepcopy(workflow)
    data["version"] = version
    for phase in data["phases"]:
        for task in phase["tasks"]:
            task["checkpoint"] = task.get("checkpoint", task["id"])
            task["id"] = rename.get(task["id"], task["id"])
            for name, value in task["args"].items():
                ref = _REF.match(value) if isinstance(value, str) else None
                if ref and ref.group(1) in rename:
                    task["args"][name] = f"$result.{rename[ref.group(1)]}.{value[ref.end():]}"
    return data


def _check_case_path(path: Path, pack_root: Path) -> None:
    """Raise unless ``path`` is a regular file inside the pack (after resolving symlinks)."""
    problem = _file_problem(path)
    if problem == "missing":
        raise CaseError("file not found", file=str(path))
    if problem is not None:
        raise CaseError(f"not a regular file ({problem}); a case must be a YAML or JSON file", file=str(path))
    if not _inside(path, pack_root):
        raise CaseError(f"points outside the pack {pack_root} (resolves to {os.path.realpath(path)}); "
                        "copy the case into the pack", file=str(path))


def _case_files(folder: Path, pack_root: Path) -> list[Path]:
    """The case files of ``folder``, sorted by name; raise on anything that would be skipped.

    Names starting with ``.`` are ignored (editor swap and lock files, ``.git``).
    Other files whose suffix is not one of :data:`CASE_SUFFIXES` are ignored
    (``README.md``). Everything else is an error, never silently skipped: a
    subfolder (or a symlink to one; subfolders are not read), and a ``*.yaml``/
    ``*.yml``/``*.json`` entry that is not a regular file (a broken symlink, a
    symlink loop, a FIFO, ...) or that resolves outside the pack folder.
    """
    try:
        entries = sorted(folder.iterdir())
    except OSError as exc:
        raise CaseError(f"cannot list the folder: {_one_line(exc.strerror or exc)}", file=str(folder)) from exc
    files: list[Path] = []
    for entry in entries:
        if entry.name.startswith("."):
            continue
        if _file_problem(entry) == "a folder":
            raise CaseError(f"subfolders of the cases folder are not read; move the case files in {entry} up "
                            "or remove it", file=str(entry))
        if entry.suffix.lower() not in CASE_SUFFIXES:
            continue
        _check_case_path(entry, pack_root)
        files.append(entry)
    return files


def load_target(path: str | Path) -> tuple[Pack, list[Case]]:
    """Load a pack and cases from ``path``.

    ``path`` is a pack folder or its ``pack.yaml`` (every ``*.yaml``/``*.yml``/``*.json`` of its cases
    folder, sorted by name), another folder inside a pack (its case files), or
    one case file. The pack is the nearest folder at or above ``path`` holding
    ``pack.yaml``. Case files must be regular files inside the pack folder (after
    resolving symlinks); names starting with ``.`` (editor swap and lock files)
    and files with other suffixes are ignored; a subfolder is an error (see
    :func:`_case_files`).

    Raises:
        CaseError: ``path`` missing or not a regular file or folder; no pack; the
            pack's cases folder missing or not a folder (at the line of ``cases``
            in pack.yaml, line 1 when defaulted); an entry of the folder that would
            otherwise be skipped; the first case that fails to load; a ``case_id``
            used twice.
    """
    path = Path(path)
    if not path.exists():
        raise CaseError("no such file or folder", file=str(path))
    if path.is_file() and path.name == "pack.yaml":  # the pack file stands for its pack
        path = path.parent
    if not path.is_file() and not path.is_dir():
        raise CaseError(f"not a regular file or folder ({_file_problem(path)})", file=str(path))
    pack_dir = find_pack_dir(path)
    pack = load_pack(path if path.is_dir() and (path / "pack.yaml").is_file() else pack_dir)
    if path.is_file():
        _check_case_path(path, pack.root)
        files = [path]
    else:
        folder = pack.cases_dir if (path / "pack.yaml").is_file() else path
        problem = _file_problem(folder)
        if problem != "a folder":
            message = (f"cases folder not found: {folder}" if problem in ("missing", "a broken symlink")
                       else f"cases path is not a folder ({problem or 'a file'}): {folder}")
            raise CaseError(message, file=str(pack.root / "pack.yaml"), line=pack.line_of.get("cases", 1),
                            field="cases")
        files = _case_files(folder, pack.root)
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
