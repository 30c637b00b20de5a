"""Built-in scenario packs and the JSON Schemas of every input format.

Layout::

    scenarios/
      schemas/{case,pack,workflow,trace}.schema.json   JSON Schema draft 2020-12
      refunds/                                   a pack
        pack.yaml                                workflows, effect vocabulary, cases folder
        workflows/refund.yaml                    a workflow: phases of tasks
        cases/*.yaml|*.yml|*.json                one case per file

Load packs and cases with :mod:`crashpoint.harness.load.loader`.
"""

from __future__ import annotations

from pathlib import Path

from crashpoint.errors import UsageError

#: Folder of ``case.schema.json``, ``pack.schema.json``, ``workflow.schema.json`` and ``trace.schema.json``.
SCHEMA_DIR: Path = Path(__file__).resolve().parent / "schemas"
#: Folder holding the built-in packs, one sub-folder (with a ``pack.yaml``) each.
PACKS_DIR: Path = Path(__file__).resolve().parent


def builtin_pack(name: str) -> Path:
    """Return the folder of the built-in pack ``name`` (for example ``"refunds"``).

    Raises:
        UsageError: no built-in pack of that name; the message lists those there are.
    """
    folder = PACKS_DIR / name
    if name and "/" not in name and (folder / "pack.yaml").is_file():
        return folder
    known = sorted(p.parent.name for p in PACKS_DIR.glob("*/pack.yaml"))
    raise UsageError(f"no built-in pack {name!r}; built-in packs: {', '.join(known) or '(none)'}")
