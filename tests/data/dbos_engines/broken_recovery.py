"""A broken DBOS for crashpoint's own tests: explicit recovery of a named dead executor does nothing (a DBOS
whose control-plane recovery loses a dead executor's work). Used as a target's ``dbos.setup``."""

from __future__ import annotations

from dbos import DBOS

from dbos_refund.app import setup as app_setup


def setup() -> None:
    """The app's setup, then ``DBOS._recover_pending_workflows`` replaced by a no-op."""
    app_setup()
    DBOS._recover_pending_workflows = classmethod(lambda cls, executor_ids=("local",): [])  # type: ignore[assignment]
