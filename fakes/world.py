"""Factory that a worker process calls to build the fake world from a run folder.

``build(run_dir, probe) -> (Toolbox, VirtualClock)`` opens ``RUN_DIR/ledger.db``; it is
the ``--world crashpoint.fakes.world:build`` argument of the engine worker.

A pack may bring its own tools (``pack.yaml`` ``world.tools``: a Python file in the pack folder
with a ``TOOLS`` dict, see :func:`load_tools`). The harness writes the file's absolute path into
``RUN_DIR/world.json`` (:func:`write_world`) before any worker starts, and :func:`build` reads it
there: every worker, forked from a warm parent, started as a new interpreter, run in-process or on
another machine, finds the pack's tools from the run folder alone, whatever its working directory
or ``sys.path`` (the file is imported by path).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Mapping

from crashpoint.fakes.clock import VirtualClock
from crashpoint.fakes.ledger import Ledger
from crashpoint.fakes.tools import Tool, Toolbox
from crashpoint.protocols import Probe, no_probe

LEDGER_FILE = "ledger.db"
#: The run folder's description of its world: ``{"tools": "/abs/path/tools.py"}``.
WORLD_FILE = "world.json"

#: The tools of the tools modules loaded in this process, by module name.
_TOOLS: dict[str, dict[str, Tool]] = {}


def build(run_dir: str, probe: Probe = no_probe) -> tuple[Toolbox, VirtualClock]:
    """Open the world of ``run_dir``: its ledger-backed tools (the built-in ones, plus the pack's own
    when ``RUN_DIR/world.json`` names a tools file) and virtual clock."""
    ledger = Ledger(Path(run_dir) / LEDGER_FILE)
    clock = VirtualClock(ledger)
    spec = Path(run_dir) / WORLD_FILE
    tools = load_tools(json.loads(spec.read_text())["tools"]) if spec.exists() else None
    return Toolbox(ledger, clock, probe, tools=tools), clock


def write_world(run_dir: str | Path, tools_file: str | Path) -> None:
    """Record in ``run_dir`` that its world has the tools of ``tools_file`` (made absolute)."""
    (Path(run_dir) / WORLD_FILE).write_text(json.dumps({"tools": str(Path(tools_file).resolve())}))


def load_tools(path: str | Path) -> dict[str, Tool]:
    """The tools a pack's tools module provides: its ``TOOLS``, a dict tool name ->
    :class:`~crashpoint.fakes.tools.Tool` (or a bare handler ``f(box, args, ref) -> dict``, whose
    arguments are then not declared). The module is imported by :func:`load_module`.

    Raises:
        OSError: the file cannot be read. Exception: whatever importing the module raises.
        TypeError: no ``TOOLS`` dict, a name that is not a string, or a value that is neither a
            ``Tool`` nor callable (the message names the file and the tool).
    """
    module = load_module(path)
    if module.__name__ not in _TOOLS:
        _TOOLS[module.__name__] = _tools_of(module.__file__, getattr(module, "TOOLS", None))
    return _TOOLS[module.__name__]


def load_module(path: str | Path) -> ModuleType:
    """Import the Python file ``path`` of a pack by its path, once per process and version of the file.

    It gets a name of its own (``crashpoint_pack_<hash>``), and its folder is appended to ``sys.path``
    (appended: a pack's file never shadows an installed module), so it may import modules next to it.

    Raises:
        OSError: the file cannot be read. Exception: whatever executing the module raises.
    """
    key = str(Path(path).resolve())
    stamp = Path(key).stat()
    name = "crashpoint_pack_" + hashlib.sha1(f"{key}:{stamp.st_mtime_ns}:{stamp.st_size}".encode()).hexdigest()[:16]
    if name in sys.modules:  # an edited file gets a new name, and is read again
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, key)
    if spec is None or spec.loader is None:
        raise TypeError(f"{key}: not a Python module")
    module = importlib.util.module_from_spec(spec)
    folder = str(Path(key).parent)
    if folder not in sys.path:
        sys.path.append(folder)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _tools_of(file: str, raw: Any) -> dict[str, Tool]:
    if not isinstance(raw, Mapping):
        raise TypeError(f"{file}: defines no TOOLS dict (tool name -> crashpoint.fakes.tools.Tool), "
                        f"got {type(raw).__name__}")
    tools: dict[str, Tool] = {}
    for name, value in raw.items():
        if not isinstance(name, str):
            raise TypeError(f"{file}: TOOLS key {name!r} is not a string")
        if not isinstance(value, Tool) and not callable(value):
            raise TypeError(f"{file}: TOOLS[{name!r}] is a {type(value).__name__}, not a Tool or a handler")
        tools[name] = value if isinstance(value, Tool) else Tool(value, {}, (value.__doc__ or "").strip()
                                                                   .split("\n")[0])
    return tools
