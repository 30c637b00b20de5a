"""``crashpoint tools [PACK]``: the tools a pack's workflows can call, with their arguments.

Without ``PACK``, the built-in tools (:data:`crashpoint.fakes.tools.BUILTIN_TOOLS`); with one, those
plus the pack's own (``pack.yaml`` ``world.tools``), each marked with where it comes from and which
of the pack's workflows call it. Exit 0; a pack that does not load is exit 2 (one message naming
file, line and field).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Mapping

if TYPE_CHECKING:  # imported in the command: the fake world is heavy for a parser (crashpoint --version)
    from crashpoint.fakes.tools import Tool


def add_tools_parser(sub: argparse._SubParsersAction) -> None:
    """Add the ``tools`` command to the ``crashpoint`` parser."""
    cmd = sub.add_parser("tools", help="list the tools a pack's workflows can call, with their arguments")
    cmd.add_argument("path", nargs="?", metavar="PACK",
                     help="pack folder, case file or built-in pack name (default: the built-in tools only)")
    cmd.set_defaults(func=_cmd_tools)


def render(tools: Mapping[str, Tool], origin: Mapping[str, str], used: Mapping[str, list[str]]) -> str:
    """The listing: per tool (sorted by name) a line ``NAME  (ORIGIN[; used by W, ...])  DESCRIPTION``,
    then one indented line per argument (``NAME  WHAT``; ``?`` marks an optional one)."""
    from crashpoint.errors import printable

    lines = []
    for name in sorted(tools):
        tool = tools[name]
        where = origin.get(name, "built in") + (f"; used by {', '.join(used[name])}" if used.get(name) else "")
        lines.append(f"{printable(name)}  ({printable(where)})  {printable(tool.description)}".rstrip())
        width = max((len(a) for a in tool.args), default=0)
        for arg, what in tool.args.items():
            lines.append(f"    {printable(arg).ljust(width)}  {printable(what)}")
        if not tool.args:
            lines.append("    (arguments not declared)")
    return "\n".join(lines)


def _cmd_tools(args: argparse.Namespace) -> int:
    from crashpoint.fakes.tools import BUILTIN_TOOLS
    from crashpoint.harness.cli.main import ExitCode, resolve_path

    if args.path is None:
        print(render(BUILTIN_TOOLS, {}, {}))
        print(f"\n{len(BUILTIN_TOOLS)} built-in tool(s); a pack adds its own with pack.yaml world.tools "
              "(docs/how-to/pack-tools.md)")
        return ExitCode.OK
    from crashpoint.harness.load.loader import APPROVAL_TOOL, find_pack_dir, load_pack
    from crashpoint.harness.load.pack_world import provided_tools

    pack = load_pack(find_pack_dir(resolve_path(args.path)))
    tools = provided_tools(pack.tools_file)
    origin = {name: f"pack {pack.name}, {pack.tools_file.name}" for name in tools if name not in BUILTIN_TOOLS}
    used: dict[str, list[str]] = {}
    for workflow, data in pack.workflows.items():
        called = {t.get(k) for p in data["phases"] for t in p["tasks"] for k in ("tool", "compensation")} - {None}
        if any(p["human_gate"] for p in data["phases"]):
            called.add(APPROVAL_TOOL)  # the engine asks for every approval through it
        for name in sorted(called):
            used.setdefault(name, []).append(workflow)
    print(render(tools, origin, used))
    print(f"\n{len(tools)} tool(s): {len(tools) - len(origin)} built in, {len(origin)} of pack {pack.name}; "
          f"{len(used)} called by its workflows")
    return ExitCode.OK
