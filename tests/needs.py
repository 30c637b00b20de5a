"""Tests that need a service (PostgreSQL, Chromium): skipped on a laptop without it, failed in CI.

``.ci/run`` sets ``CRASHPOINT_CI=1`` (CI also sets ``CI``) after starting the services, so a CI
run can never silently skip these tests.
"""

from __future__ import annotations

import os
import shutil
import uuid
from typing import Iterator

import pytest

PG_ENV = "CRASHPOINT_TEST_PG_URL"


def in_ci() -> bool:
    """``True`` under ``.ci/run`` (``CRASHPOINT_CI``) or any CI (``CI``) that sets it to a true value."""
    return any(os.environ.get(k, "").lower() in ("1", "true", "yes") for k in ("CRASHPOINT_CI", "CI"))


def need(ok: bool, why: str) -> None:
    """Skip the test when ``ok`` is false, or fail it in CI."""
    if ok:
        return
    if in_ci():
        pytest.fail(f"{why}; CI must provide it (.ci/services.sh)")
    pytest.skip(why)


def chromium() -> str:
    """Path of the Chromium binary (skip or fail without one)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    need(path is not None, "chromium is not installed")
    return path  # type: ignore[return-value]


def fresh_pg_database() -> Iterator[str]:
    """A URL of a new, empty PostgreSQL database on the server of ``$CRASHPOINT_TEST_PG_URL``,
    dropped afterwards (generator for a fixture)."""
    base = os.environ.get(PG_ENV)
    need(bool(base), f"${PG_ENV} is not set (no PostgreSQL server)")
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    name = f"cp_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        yield make_url(base).set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
