"""Rewrite the generated reference tables of the docs site: ``python docs/generate.py`` (from the repository root).

Each table lies between two marker comments in a page::

    <!-- generated: NAME -->
    ...
    <!-- end generated: NAME -->

and is made from the code or file that defines it, never typed by hand:

* ``cli``: the options of every ``crashpoint`` command (``crashpoint.harness.cli.main.build_parser()``);
* ``exit-codes``: ``crashpoint.harness.cli.main.ExitCode`` and the comment after each value;
* ``pytest-options``: the options the pytest plugin registers (``crashpoint.harness.pytest.plugin.pytest_addoption``);
* ``rules``: the rule registry (``registered()`` of ``crashpoint.harness.model.rules``, where it lives today);
* ``fault-kinds``: the fault-kind registry (``crashpoint.harness.faults.kinds.table()``);
* ``builtin-tools``: ``crashpoint.fakes.tools.BUILTIN_TOOLS``;
* ``case-fields``, ``case-events``, ``case-faults``, ``target-fields``, ``target-faults``, ``pack-fields``, ``workflow-fields``: the
  JSON Schemas in ``scenarios/schemas/``.

``tests/unit/test_docs_reference.py`` fails when a page is out of date (and names this command). ``--check`` only
reports the pages that would change (exit 1), writing nothing.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import re
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SCHEMAS = ROOT / "scenarios" / "schemas"
MARKER = re.compile(r"(<!-- generated: (?P<name>[a-z-]+) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)",
                    re.S)


def cell(value: Any) -> str:
    """``value`` as the text of one Markdown table cell (pipes escaped, newlines folded)."""
    text = "" if value is None else str(value)
    return " ".join(text.replace("|", "\\|").split())


def table(head: list[str], rows: list[list[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


# --- the command line --------------------------------------------------------------------------------------------

def _spelling(action: argparse.Action) -> str:
    names = ", ".join(f"`{n}`" for n in action.option_strings) if action.option_strings else f"`{action.dest.upper()}`"
    if action.option_strings and action.nargs != 0:
        metavar = action.metavar or (("{" + ",".join(map(str, action.choices)) + "}") if action.choices else
                                     action.dest.upper())
        if isinstance(metavar, tuple):
            metavar = " ".join(metavar)
        names += f" `{metavar}`" if action.nargs != "?" else f" `[{metavar}]`"
    return names


def _default(action: argparse.Action) -> str:
    if action.nargs == 0 or action.default in (None, argparse.SUPPRESS, False, [], ""):
        return ""
    return f"`{action.default}`"


def cli() -> str:
    """A section per ``crashpoint`` command: its usage line and a table of its arguments and options."""
    from crashpoint.harness.cli.main import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = []
    for name, command in sub.choices.items():
        rows = [[_spelling(a), _default(a), a.help or ""] for a in command._actions
                if a.help != argparse.SUPPRESS and not isinstance(a, argparse._HelpAction)]
        usage = " ".join(command.format_usage().split())
        out += [f"### `crashpoint {name}`", "", cell(helps.get(name) or command.description or ""), "",
                f"```\n{usage}\n```", "", table(["argument or option", "default", "meaning"], rows), ""]
    return "\n".join(out).rstrip() + "\n"


def exit_codes() -> str:
    """The exit codes, with the comment each ``ExitCode`` value carries in its source."""
    from crashpoint.harness.cli import main as cli_main

    source = inspect.getsource(cli_main.ExitCode)
    said = {m.group(1): m.group(2).strip() for m in re.finditer(r"^\s+([A-Z_]+) = \d+\s+#:\s*(.*)$", source, re.M)}
    return table(["code", "name", "meaning"], [[f"{int(c)}", f"`{c.name}`", said.get(c.name, "")]
                                                for c in cli_main.ExitCode]) + "\n"


class _Options:
    """Records ``addoption`` calls, as pytest's parser would get them."""

    def __init__(self) -> None:
        self.rows: list[list[str]] = []

    def getgroup(self, *args: Any, **kwargs: Any) -> "_Options":
        return self

    def addoption(self, *names: str, **attrs: Any) -> None:
        metavar = attrs.get("metavar")
        spelled = ", ".join(f"`{n}`" for n in names) + (f" `{metavar}`" if metavar else "")
        default = attrs.get("default")
        shown = "" if attrs.get("action") == "store_true" or default in (None, False, "") else f"`{default}`"
        self.rows.append([spelled, shown, attrs.get("help", "")])


def pytest_options() -> str:
    """The options of the pytest plugin (``--chaos`` and ``--chaos-seed`` are added as aliases of the first two
    when no other plugin owns them)."""
    from crashpoint.harness.pytest import plugin

    parser = _Options()
    plugin.pytest_addoption(parser)  # type: ignore[arg-type]
    return table(["option", "default", "meaning"], parser.rows) + "\n"


# --- registries ---------------------------------------------------------------------------------------------------

def _rules_module() -> Any:
    for name in ("crashpoint.harness.model.rules",):
        try:
            return importlib.import_module(name)
        except ModuleNotFoundError:
            continue
    raise ModuleNotFoundError("no rule registry: crashpoint.harness.model.rules (or judge.rules) is gone")


def rules() -> str:
    """Every registered rule, in report order, with the module that registers it; the engines' own rules after the
    others, by engine module (their registration order is the order the engine modules happened to be imported in,
    so a process that imported one engine first would otherwise make another table)."""
    registry = _rules_module()
    engine = "crashpoint.harness.engines."
    listed = [r for _, r in sorted(enumerate(registry.registered()), key=lambda ir: (
        ir[1].module.startswith(engine), ir[1].module if ir[1].module.startswith(engine) else "", ir[0]))]
    rows = [[f"`{r.id}`", r.description, f"`{r.module.removeprefix('crashpoint.')}`"] for r in listed]
    return table(["rule id", "checks", "registered in"], rows) + "\n"


def fault_kinds() -> str:
    """The fault-kind registry's own table."""
    from crashpoint.harness.faults import kinds

    return kinds.table() + "\n"


def builtin_tools() -> str:
    """The built-in tools, their arguments (``?``: optional) and what each does."""
    from crashpoint.fakes.tools import BUILTIN_TOOLS

    rows = []
    for name, tool in BUILTIN_TOOLS.items():
        args = getattr(tool, "args", None) or getattr(tool, "arguments", None) or {}
        spelled = ", ".join(f"`{a}`: {t}" for a, t in args.items()) if isinstance(args, dict) else cell(args)
        rows.append([f"`{name}`", spelled, getattr(tool, "description", "") or getattr(tool, "doc", "")])
    return table(["tool", "arguments", "what it does"], rows) + "\n"


# --- JSON Schemas -------------------------------------------------------------------------------------------------

def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _resolve(schema: dict[str, Any], node: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``(node with its $ref followed, the $defs name it came from)``."""
    name = None
    while "$ref" in node and node["$ref"].startswith("#/$defs/"):
        name = node["$ref"].rsplit("/", 1)[1]
        merged = {**schema["$defs"][name], **{k: v for k, v in node.items() if k != "$ref"}}
        node = merged
    return node, name


def _type(schema: dict[str, Any], node: dict[str, Any]) -> str:
    node, ref = _resolve(schema, node)
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return " | ".join(f"`{json.dumps(v) if not isinstance(v, str) else v}`" for v in node["enum"])
    for key in ("oneOf", "anyOf"):
        if key in node:
            return " or ".join(_type(schema, alt) for alt in node[key])
    kind = node.get("type")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array":
        items = node.get("items")
        return f"list of {_type(schema, items)}" if isinstance(items, dict) else "list"
    if kind == "object" and ref:
        return f"{ref} (object)"
    if kind == "object" and "additionalProperties" in node and isinstance(node["additionalProperties"], dict) \
            and not node.get("properties"):
        return f"map of {_type(schema, node['additionalProperties'])}"
    if kind:
        return str(kind)
    return ref or "any"


def _limits(node: dict[str, Any]) -> str:
    said = []
    for key, word in (("minimum", ">="), ("exclusiveMinimum", ">"), ("maximum", "<="), ("exclusiveMaximum", "<"),
                      ("minLength", "length >="), ("maxLength", "length <="), ("minItems", "items >="),
                      ("maxItems", "items <="), ("pattern", "matches")):
        if key in node:
            said.append(f"{word} `{node[key]}`")
    return ", ".join(said)


def _fields(schema: dict[str, Any], node: dict[str, Any], path: str, depth: int, rows: list[list[Any]],
            seen: tuple[str, ...] = ()) -> None:
    node, _ = _resolve(schema, node)
    required = set(node.get("required", ()))
    for name, prop in (node.get("properties") or {}).items():
        resolved, ref = _resolve(schema, prop)
        where = f"{path}{name}"
        default = resolved.get("default", prop.get("default"))
        shown = "" if default is None else f"`{json.dumps(default)}`"
        rows.append([f"`{where}`", _type(schema, prop), "yes" if name in required else "", shown,
                     " ".join(x for x in (prop.get("description") or resolved.get("description") or "",
                                          _limits(resolved)) if x)])
        if depth <= 0 or (ref and ref in seen):
            continue
        inner = (ref,) if ref else ()
        if resolved.get("properties"):
            _fields(schema, resolved, f"{where}.", depth - 1, rows, seen + inner)
        items = resolved.get("items")
        if isinstance(items, dict):
            item, item_ref = _resolve(schema, items)
            if item.get("properties") and not (item_ref and item_ref in seen):
                _fields(schema, item, f"{where}[].", depth - 1, rows, seen + inner + ((item_ref,) if item_ref else ()))
        extra = resolved.get("additionalProperties")
        if isinstance(extra, dict):
            value, value_ref = _resolve(schema, extra)
            if value.get("properties") and not (value_ref and value_ref in seen):
                _fields(schema, value, f"{where}.NAME.", depth - 1, rows,
                        seen + inner + ((value_ref,) if value_ref else ()))


FIELD_HEAD = ["field", "type", "required", "default", "meaning"]


def _field_table(name: str, depth: int = 3) -> str:
    schema = _schema(name)
    rows: list[list[Any]] = []
    _fields(schema, schema, "", depth, rows)
    return table(FIELD_HEAD, rows) + "\n"


def _defs_tables(name: str, defs: list[str], heading: Callable[[str, dict[str, Any]], str]) -> str:
    schema = _schema(name)
    out = []
    for d in defs:
        node = schema["$defs"][d]
        rows: list[list[Any]] = []
        _fields(schema, node, "", 2, rows)
        out += [heading(d, node), ""]
        if node.get("description"):
            out += [cell(node["description"]), ""]
        out += [table(FIELD_HEAD, rows) if rows else "(no fields)", ""]
    return "\n".join(out).rstrip() + "\n"


def case_fields() -> str:
    """The fields of a case file, ``expected`` expanded."""
    return _field_table("case", depth=1)


def _alternatives(schema: dict[str, Any], name: str) -> list[str]:
    """The ``$defs`` a def dispatches to (``oneOf``/``anyOf`` alternatives, ``if``/``then``/``else`` branches), in
    order, once each."""
    found: list[str] = []

    def walk(node: Any, branch: bool) -> None:
        if isinstance(node, dict):
            ref = node.get("$ref", "")
            if branch and ref.startswith("#/$defs/") and ref.rsplit("/", 1)[1] not in found:
                found.append(ref.rsplit("/", 1)[1])
            for key, value in node.items():
                walk(value, branch or key in ("then", "else", "oneOf", "anyOf"))
        elif isinstance(node, list):
            for value in node:
                walk(value, branch)

    walk(schema["$defs"][name], False)
    return found


def _event_title(d: str, node: dict[str, Any]) -> str:
    kinds = (node.get("properties") or {}).get("type", {})
    names = kinds.get("enum") or ([kinds["const"]] if "const" in kinds else [d])
    return "#### " + " / ".join(f"`{n}`" for n in names)


def case_events() -> str:
    """One table per event type of a case's ``events``."""
    schema = _schema("case")
    return _defs_tables("case", _alternatives(schema, "event"), _event_title)


def _fault_tables(name: str) -> str:
    """One table per fault kind the ``name`` schema's ``fault`` definition dispatches to."""
    schema = _schema(name)

    def title(d: str, node: dict[str, Any]) -> str:
        kind = (node.get("properties") or {}).get("kind", {})
        names = kind.get("enum") or ([kind["const"]] if "const" in kind else [])
        return "#### " + (" / ".join(f"`{n}`" for n in names) if names else f"{d.replace('_', ' ')} (no `kind`)")

    return _defs_tables(name, _alternatives(schema, "fault"), title)


def case_faults() -> str:
    """One table per fault kind a case file may hold in ``faults``."""
    return _fault_tables("case")


def target_faults() -> str:
    """One table per fault kind a target file's case may hold in ``faults``."""
    return _fault_tables("target")


def target_fields() -> str:
    """The fields of a target file, nested objects expanded."""
    return _field_table("target", depth=3)


def pack_fields() -> str:
    """The fields of a pack's ``pack.yaml``."""
    return _field_table("pack", depth=2)


def workflow_fields() -> str:
    """The fields of a workflow definition file."""
    return _field_table("workflow", depth=3)


GENERATORS: dict[str, Callable[[], str]] = {
    "cli": cli, "exit-codes": exit_codes, "pytest-options": pytest_options, "rules": rules,
    "fault-kinds": fault_kinds, "builtin-tools": builtin_tools, "case-fields": case_fields,
    "case-events": case_events, "case-faults": case_faults, "target-fields": target_fields,
    "target-faults": target_faults,
    "pack-fields": pack_fields, "workflow-fields": workflow_fields,
}


def render(text: str, made: dict[str, str] | None = None) -> str:
    """``text`` (a page) with every generated block made anew; ``made`` caches each generator's output."""
    made = {} if made is None else made

    def fill(m: re.Match) -> str:
        name = m.group("name")
        if name not in GENERATORS:
            raise KeyError(f"unknown generated block {name!r} (known: {', '.join(GENERATORS)})")
        if name not in made:
            made[name] = GENERATORS[name]()
        return f"{m.group(1)}{made[name]}{m.group(4)}"

    return MARKER.sub(fill, text)


def pages() -> list[Path]:
    """The pages of the site that hold a generated block."""
    return sorted(p for p in DOCS.rglob("*.md") if "<!-- generated: " in p.read_text(encoding="utf-8"))


def stale() -> list[tuple[Path, str]]:
    """``(page, its text as it should be)`` for each page whose generated blocks are out of date."""
    made: dict[str, str] = {}
    out = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        new = render(text, made)
        if new != text:
            out.append((page, new))
    return out


def main(argv: list[str] | None = None) -> int:
    """Rewrite the stale pages (or, with ``--check``, list them and exit 1)."""
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    changed = stale()
    for page, new in changed:
        if check:
            print(f"out of date: {page.relative_to(ROOT)}")
        else:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {page.relative_to(ROOT)}")
    return 1 if check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
