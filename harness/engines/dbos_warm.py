"""What makes a DBOS worker of a target start fast (measured per worker, warm, dbos 3.4.0, README "Speed"):

* :func:`preload`: modules DBOS imports only inside ``DBOS.launch()`` on SQLite (its SQLite system database and
  SQLAlchemy's SQLite dialect, about 0.1 s), imported by the zygote so every fork has them;
* :func:`seed_schema`: a run's first worker finds its SQLite system database already migrated: a copy of an
  empty database migrated once per dbos install (``SystemDatabase.create(...).run_migrations()``, what
  ``DBOS.launch()`` does first; about 0.4 s per run otherwise);
* :func:`fast_queue_manager`: DBOS's queue manager thread looks for newly registered queues every 1 s
  (``check_interval`` in ``dbos._queue.queue_thread``), so a queue a team registers after ``DBOS.launch()`` (as
  DBOS requires) gets its dequeuing thread up to 1 s late in every fresh system database; it is lowered to the
  worker's poll interval, like DBOS's other polls;
* :func:`without_admin_server`: no worker starts DBOS's admin server (dbos 2.x runs one on port 3001 by default
  before 2.31; several workers of a run, or runs side by side, each logged "Failed to start admin server:
  [Errno 98] Address already in use"); crashpoint reads DBOS's state itself and needs none;
* :func:`unsynced`: the run's SQLite system database is written with ``PRAGMA synchronous=OFF`` (as crashpoint's
  ledger is): SQLite then does not wait for the disk at each commit (10 ms a commit here, 0.25 ms without), and a
  SIGKILL loses nothing the kernel accepted (only a power loss would, which crashpoint does not simulate).

These wrap DBOS internals (``SystemDatabase.create``'s first six parameters, ``DefaultSerializer``, the
constant ``1.0`` of ``queue_thread``), the same in dbos 2.20.0 to 3.4.0. Where a release differs, each falls
back to DBOS's own behaviour (slower, never different): nothing is copied, nothing is patched.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import tempfile
from pathlib import Path

#: Modules ``DBOS.launch()`` imports on a SQLite system database.
LAUNCH_IMPORTS = ("dbos._sys_db_sqlite", "sqlalchemy.dialects.sqlite")
#: The queue manager's interval between two looks for new queues, in seconds (DBOS's constant).
QUEUE_CHECK_S = 1.0


def preload() -> None:
    """Import :data:`LAUNCH_IMPORTS` (a missing one is skipped: DBOS imports what it has)."""
    for name in LAUNCH_IMPORTS:
        try:
            importlib.import_module(name)
        except ImportError:
            pass


def _template_path() -> Path:
    """Where this dbos install's migrated empty SQLite system database is kept (per user, dbos version and path)."""
    import dbos

    from importlib.metadata import version

    tag = hashlib.sha256(f"{version('dbos')} {dbos.__file__}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"crashpoint-dbos-schema-{os.getuid()}-{tag}.sqlite"


def _migrate(path: Path) -> bool:
    """Create ``path`` as an empty, migrated DBOS system database; ``False`` when this release's internals differ."""
    try:
        from dbos._serialization import DefaultSerializer
        from dbos._sys_db import SystemDatabase

        sys_db = SystemDatabase.create(system_database_url=f"sqlite:///{path}", engine_kwargs={}, engine=None,
                                       schema=None, serializer=DefaultSerializer(), executor_id=None)
    except (ImportError, TypeError, AttributeError):
        return False
    try:
        sys_db.run_migrations()
    finally:
        sys_db.destroy()
    return True


def seed_schema(database: Path) -> bool:
    """Copy the migrated empty system database to ``database`` when it does not exist yet (made once, atomically,
    by the first worker that needs it). Returns whether ``database`` was seeded (``False``: DBOS migrates it)."""
    if database.exists():
        return False
    template = _template_path()
    if not template.exists():
        scratch = template.with_name(f"{template.name}.{os.getpid()}.tmp")
        scratch.unlink(missing_ok=True)
        if not _migrate(scratch):
            scratch.unlink(missing_ok=True)
            return False
        os.replace(scratch, template)
    partial = database.with_name(f"{database.name}.{os.getpid()}.seed")
    shutil.copyfile(template, partial)
    try:  # never over a database another worker of the run already opened (two processes started at once)
        os.link(partial, database)
    except FileExistsError:
        return False
    finally:
        partial.unlink()
    return True


def unsynced(database: Path) -> None:
    """Open every SQLAlchemy connection to the SQLite file ``database`` with ``PRAGMA synchronous=OFF`` (a listener
    on SQLAlchemy's ``Engine`` ``connect`` event: DBOS's own engines, whatever release; other files are left alone)."""
    import sqlalchemy as sa
    from sqlalchemy import event

    wanted = os.path.realpath(database)

    def on_connect(dbapi_conn: object, record: object) -> None:
        try:
            files = [row[2] for row in dbapi_conn.execute("PRAGMA database_list")]  # type: ignore[attr-defined]
        except Exception:  # not a sqlite3 connection
            return
        if any(f and os.path.realpath(f) == wanted for f in files):
            dbapi_conn.execute("PRAGMA synchronous=OFF")  # type: ignore[attr-defined]

    event.listen(sa.engine.Engine, "connect", on_connect)


def fast_queue_manager(interval_s: float) -> bool:
    """Make DBOS's queue manager look for newly registered queues every ``interval_s`` seconds instead of
    :data:`QUEUE_CHECK_S` (before ``DBOS.launch()`` starts it). Returns whether it was patched (``False``: this
    release has no such constant, or exactly one, in ``dbos._queue.queue_thread``)."""
    try:
        from dbos import _queue
    except ImportError:
        return False
    fn = getattr(_queue, "queue_thread", None)
    code = getattr(fn, "__code__", None)
    if code is None or "check_interval" not in code.co_varnames or sum(
            type(c) is float and c == QUEUE_CHECK_S for c in code.co_consts) != 1:
        return False
    fn.__code__ = code.replace(co_consts=tuple(interval_s if c == QUEUE_CHECK_S and type(c) is float else c
                                               for c in code.co_consts))
    return True


def without_admin_server(config: dict, config_type: type | None = None) -> dict:
    """``config`` (a ``DBOSConfig`` dict) with ``run_admin_server: False`` where the installed dbos has that key
    (2.x: a server on ``admin_port`` 3001, on by default before 2.31), unchanged where it has none (3.x removed the
    admin server). ``config_type`` is ``dbos.DBOSConfig`` unless given (for tests)."""
    if config_type is None:
        from dbos import DBOSConfig as config_type  # type: ignore[no-redef]
    keys = getattr(config_type, "__annotations__", {})
    return {**config, "run_admin_server": False} if "run_admin_server" in keys else dict(config)
