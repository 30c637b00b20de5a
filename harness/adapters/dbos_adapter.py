"""The DBOS adapter (``pip install 'crashpoint[dbos]'``): DBOS Transact embedded, SQLite system database.

``crashpoint certify --adapter crashpoint.harness.adapters.dbos_adapter:DBOSAdapter``. The worker is
:mod:`crashpoint.harness.adapters.dbos_adapter_worker`; the harness side only touches ``adapter.db``.
"""

from __future__ import annotations

from crashpoint.versions import installed_versions as _versions
from crashpoint.harness.adapters.runtime import InterpretedAdapter


class DBOSAdapter(InterpretedAdapter):
    """DBOS Transact: one DBOS workflow per run, steps for tool calls, ``recv`` for approvals."""

    name = "dbos"
    worker_module = "crashpoint.harness.adapters.dbos_adapter_worker"

    def version(self) -> str:
        """``dbos X``."""
        return _versions("dbos")
