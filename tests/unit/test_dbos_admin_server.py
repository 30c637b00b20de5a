"""No DBOS worker starts DBOS's admin server (issue 24 item 5): dbos 2.x ran one on port 3001 in every process by
default (before 2.31), so the second of several workers logged "Failed to start admin server: [Errno 98] Address
already in use". tests/adapters/test_extras_keep_engine.py runs two workers on dbos 2.24.0 and reads their logs."""

from __future__ import annotations

from typing import Optional, TypedDict

from crashpoint.harness.engines.dbos_warm import without_admin_server

BASE = {"name": "app", "system_database_url": "sqlite:///x.sqlite"}


class Config2(TypedDict, total=False):  # dbos 2.20 to 2.31: DBOSConfig declares the admin server's keys
    name: str
    system_database_url: str
    admin_port: Optional[int]
    run_admin_server: Optional[bool]


class Config3(TypedDict, total=False):  # dbos 3.x: no admin server, no such key
    name: str
    system_database_url: str


def test_a_dbos_with_an_admin_server_is_told_to_run_none() -> None:
    assert without_admin_server(BASE, Config2) == {**BASE, "run_admin_server": False}


def test_a_dbos_without_one_gets_its_config_unchanged() -> None:
    assert without_admin_server(BASE, Config3) == BASE
    assert "run_admin_server" not in BASE  # the caller's dict is not changed

