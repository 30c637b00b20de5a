"""A DBOS target on a PostgreSQL system database (``dbos.database_url``): each run gets its own database on that
server (created by DBOS at launch, dropped after the run), and the workers' reads of DBOS's tables (a message
waiting, ``recv``'s durable timeout, a status row before an effect) go to PostgreSQL's ``dbos`` schema.
Skipped without ``$CRASHPOINT_TEST_PG_URL``; failed instead in CI (.ci/services.sh starts one)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import pytest
from installed import needs

pytestmark = needs("dbos")

from needs import fresh_pg_database  # noqa: E402

from crashpoint.harness.run.target_sweep import run_one  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

TARGET = Path(__file__).resolve().parents[2] / "examples/dbos_refund/target.yaml"


@pytest.fixture
def pg_url() -> Iterator[str]:
    yield from fresh_pg_database()


def _databases(url: str) -> set[str]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return {r[0] for r in conn.execute(sa.text("SELECT datname FROM pg_database"))}
    finally:
        engine.dispose()


@pytest.mark.slow
def test_a_dbos_target_runs_and_recovers_on_a_postgresql_system_database(pg_url: str, tmp_path: Path) -> None:
    base = Target.from_file(TARGET)
    target = Target.from_data(base.to_data() | {"dbos": {**base.options, "database_url": pg_url}}, file=base.file)
    golden = run_one(target, target.case("approved"), "sync", tmp_path / "golden", None, None, keep=True)
    assert golden.verdict == "passed", (golden.error, [f.message for f in golden.failures])
    assert {t["status"] for t in golden.outcome.threads.values()} == {"finished"}
    used = json.loads((tmp_path / "golden/target.json").read_text())["dbos"]["database_url"]
    name = used.rsplit("/", 1)[1]
    assert name.startswith(pg_url.rsplit("/", 1)[1] + "_") and not (tmp_path / "golden/dbos.sqlite").exists()
    assert name not in _databases(pg_url)  # dropped after the run
    killed = run_one(target, target.case("two-workers-recover"), "sync", tmp_path / "kill", "after_effect:draft_refund",
                     golden.outcome, keep=True)
    assert killed.verdict == "passed" and killed.kills == 1, (killed.error, [f.message for f in killed.failures])
    assert len([p for p in killed.outcome.pids if p["phase"] == "recover"]) == 2
    assert {t["dbos_status"] for t in killed.outcome.threads.values()} == {"SUCCESS"}
