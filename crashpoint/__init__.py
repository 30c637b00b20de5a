"""crashpoint: a chaos and eval testing harness for durable workflow engines.

The repository's top-level folders are the subpackages of this distribution:

* ``crashpoint.engine``    (``engine/``)    the reference durable workflow engine
* ``crashpoint.fakes``     (``fakes/``)     the external world: tools, ledgers, approvals, clock
* ``crashpoint.harness``   (``harness/``)   fault injection, runner, oracles, CLI, pytest plugin
* ``crashpoint.scenarios`` (``scenarios/``) scenario packs and the JSON Schemas of every format
* ``crashpoint.reports``   (``reports/``)   report renderers that read result data only
"""

from crashpoint.errors import CaseError, CrashpointError, StoreError, UsageError

__version__ = "0.1.0"
__all__ = ["CaseError", "CrashpointError", "StoreError", "UsageError", "__version__"]
