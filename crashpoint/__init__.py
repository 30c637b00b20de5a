"""crashpoint: a chaos and eval testing harness for durable workflow engines.

The repository's top-level folders are the subpackages of this distribution:

* ``crashpoint.engine``    (``engine/``)    the reference durable workflow engine
* ``crashpoint.fakes``     (``fakes/``)     the external world: tools, ledgers, approvals, clock
* ``crashpoint.harness``   (``harness/``)   fault injection, runner, oracles, CLI, pytest plugin
* ``crashpoint.scenarios`` (``scenarios/``) scenario packs and the JSON Schemas of every format
* ``crashpoint.reports``   (``reports/``)   report renderers that read result data only

The target API (a team's own workflow code under crashpoint) is at the top level:
:func:`effect`, :func:`invariant`, :func:`run_dir`, :class:`RunView`, :class:`Target` (see :mod:`crashpoint.api`).
"""

from crashpoint.api import EffectFault, EffectRateLimited, EffectTimeout, RunView, effect, invariant, run_dir
from crashpoint.errors import CaseError, CrashpointError, StoreError, UsageError

__version__ = "0.1.0"
__all__ = ["CaseError", "CrashpointError", "EffectFault", "EffectRateLimited",
           "EffectTimeout", "RunView", "StoreError", "Target",
           "UsageError", "__version__", "effect", "invariant", "run_dir"]


def __getattr__(name: str):  # Target loads PyYAML and jsonschema: only when asked for
    if name == "Target":
        from crashpoint.harness.load.target import Target

        return Target
    raise AttributeError(f"module 'crashpoint' has no attribute {name!r}")
