"""The world a pack brings: its own tools module and input generators (``pack.yaml`` ``world``).

::

    world:
      tools: tools.py                       # a Python file in the pack folder defining TOOLS
      inputs:
        ticket: inputs.py:ticket_input      # workflow -> FILE:FUNCTION, FUNCTION(seed: int) -> dict

A pack's tools are added to the built-in ones (:data:`crashpoint.fakes.tools.BUILTIN_TOOLS`) and
get the same ledger, scripted faults, idempotency keys and ``before_effect``/``after_effect`` crash
points (see :mod:`crashpoint.fakes.tools`). Every tool a workflow calls (a task's ``tool`` or
``compensation``) must be provided by the world, or the pack is refused naming the workflow file,
line and field. A case without ``input`` gets ``FUNCTION(seed)`` of its workflow's generator, or the
built-in one (:func:`crashpoint.fakes.data.generated_input`).

The pack's files are imported in the harness process (``validate`` included) and in every worker:
they are the pack's code, trusted like the engine under test.
"""

from __future__ import annotations

import difflib
import functools
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from crashpoint.errors import CaseError
from crashpoint.fakes.data import generated_input
from crashpoint.fakes.tools import BUILTIN_TOOLS, Tool
from crashpoint.fakes.world import load_module, load_tools

#: ``FILE:FUNCTION`` of an input generator.
_GENERATOR = re.compile(r"^(?P<file>[^:]+\.py):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")

Fail = Callable[[str, tuple], None]


def load_world(data: Mapping[str, Any], inside: Callable[[str, tuple], Path], fail: Fail,
               workflows: Mapping[str, Any]) -> tuple[Path | None, dict[str, str]]:
    """Check ``pack.yaml``'s ``world`` section: ``(tools file or None, {workflow: "ABS_FILE:FUNCTION"})``.

    Args:
        data: the pack's ``world`` mapping (schema-valid; ``{}`` when absent).
        inside: ``inside(rel, field path) -> Path``, the loader's check that ``rel`` stays in the pack.
        fail: ``fail(message, field path)``, raises the loader's ``CaseError`` for ``pack.yaml``.
        workflows: the pack's ``workflows`` (names are checked against the ``inputs`` keys).

    Raises:
        CaseError: (through ``fail``) a file missing or outside the pack, a tools module that does not
            import or defines no proper ``TOOLS``, a tool named like a built-in one, an ``inputs`` key
            that is no workflow of the pack, or a generator that is not a function of its file.
    """
    tools_file = None
    if "tools" in data:
        tools_file = _python_file(data["tools"], ("world", "tools"), inside, fail).resolve()
        try:
            tools = load_tools(tools_file)
        except Exception as exc:  # the pack's own code: any error is the pack's
            fail(f"tools module {tools_file}: cannot load it: {type(exc).__name__}: {exc}", ("world", "tools"))
        clash = sorted(set(tools) & set(BUILTIN_TOOLS))
        if clash:
            fail(f"tools module {tools_file} redefines built-in tool(s) {', '.join(clash)}; give them other names",
                 ("world", "tools"))
    inputs: dict[str, str] = {}
    for workflow, spec in data.get("inputs", {}).items():
        at = ("world", "inputs", workflow)
        if workflow not in workflows:
            fail(f"unknown workflow {workflow!r}; workflows: {', '.join(workflows)}", at)
        match = _GENERATOR.match(spec)
        if not match:
            fail(f"expected FILE.py:FUNCTION (a file in the pack folder), got {spec!r}", at)
        file = _python_file(match["file"], at, inside, fail).resolve()
        try:
            function = getattr(load_module(file), match["function"], None)
        except Exception as exc:
            fail(f"{file}: cannot load it: {type(exc).__name__}: {exc}", at)
        if not callable(function):
            fail(f"{file} has no function {match['function']!r}", at)
        inputs[workflow] = f"{file}:{match['function']}"
    return tools_file, inputs


def _python_file(rel: str, at: tuple, inside: Callable[[str, tuple], Path], fail: Fail) -> Path:
    path = inside(rel, at)
    if path.suffix != ".py":
        fail(f"{rel!r} is not a Python file (*.py)", at)
    if not path.is_file():
        fail(f"{path}: no such file", at)
    return path


def provided_tools(tools_file: Path | None) -> dict[str, Tool]:
    """Every tool a world with the tools module ``tools_file`` (or none) provides, by name."""
    return {**BUILTIN_TOOLS, **(load_tools(tools_file) if tools_file else {})}


def check_tools(workflow: Mapping[str, Any], provided: Mapping[str, Tool], fail: Fail,
                tools_file: Path | None) -> None:
    """Refuse a workflow task that calls a tool (``tool`` or ``compensation``) ``provided`` lacks.

    Raises:
        CaseError: (through ``fail``, at ``phases[i].tasks[j].tool`` or ``.compensation`` of the
            workflow file) naming the tool, the closest known names, and where to add it.
    """
    for i, phase in enumerate(workflow["phases"]):
        for j, task in enumerate(phase["tasks"]):
            for key in ("tool", "compensation"):
                name = task.get(key)
                if name is None or name in provided:
                    continue
                close = difflib.get_close_matches(name, list(provided), n=3, cutoff=0.6)
                hint = f"did you mean {', '.join(close)}? " if close else ""
                where = f"the pack's tools module {tools_file}" if tools_file else \
                    "a tools module of the pack (pack.yaml world.tools)"
                fail(f"unknown tool {name!r}: no world provides it; {hint}add it to {where}, "
                     "or see crashpoint tools PACK", ("phases", i, "tasks", j, key))


def workflow_input(inputs: Mapping[str, str], workflow: str, seed: int) -> dict[str, Any]:
    """The generated input of ``workflow`` for ``seed``: the pack's generator (``inputs``, as
    :func:`load_world` returns them) or the built-in one; built once per process and arguments."""
    return json.loads(_input_json(inputs.get(workflow), workflow, seed))


@functools.lru_cache(maxsize=256)
def _input_json(generator: str | None, workflow: str, seed: int) -> str:
    if generator is None:
        return json.dumps(generated_input(workflow, seed=seed))
    file, _, function = generator.rpartition(":")
    value = getattr(load_module(file), function)(seed)
    if not isinstance(value, dict):
        raise CaseError(f"input generator {generator} returned a {type(value).__name__}, not a mapping",
                        file=file)
    return json.dumps(value)
