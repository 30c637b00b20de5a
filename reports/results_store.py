"""The results store: an append-only history of runs and their results, over SQLAlchemy Core.

A store is named by a database URL:

* ``sqlite:///PATH`` (default ``sqlite:///.crashpoint/results.db``): one file, WAL journal, a 30 s
  busy timeout, so parallel writers (``--jobs`` workers, two CI jobs on one machine) queue instead of
  corrupting it. A bare file path is taken as a SQLite file.
* ``postgresql+psycopg://USER@HOST/DB``: one store shared by many CI machines.

Schema (format ``crashpoint.store/1``, recorded in ``crashpoint_meta``):

``crashpoint_runs``: one row per run: ``run_id`` (32 hex), ``engine``, ``engine_version``,
``adapter``, ``pack``, ``pack_version``, ``crash`` (mode), ``seed`` (or NULL), ``git_commit`` (or
NULL), ``host``, ``source`` (``cli`` | ``pytest``), ``started_at``/``ended_at`` (UTC),
``complete`` (false until :meth:`ResultStore.finish_run`), ``summary`` (JSON: ``summary``,
``per_case``, ``coverage``, ``vacuity`` of the result document, set at the end).

``crashpoint_results``: one row per (case, crash point/fault) of a run, committed as it arrives:
``id`` (order of arrival), ``run_id``, ``case_id``, ``crash_point`` (``none`` for a golden run),
``verdict`` (passed|failed|error|unknown|unsupported), ``oracle`` (the rule id of the first finding, such as
``side_effects.at_most_once``, or NULL; rows stored before rule ids hold the oracle family), ``message``
(first finding or the error), ``final_status``, ``wall_s``, ``recorded_at``, ``reproduce`` (or
NULL), ``tags`` (JSON list), ``measures`` (JSON: per-run metric inputs, see
:mod:`crashpoint.harness.judge.record`) and ``data`` (JSON: the full result dict, with ``timeline`` for a
run that did not pass).

``crashpoint_run_keys``: one row per run recorded by this version: ``run_id``, ``selection`` (JSON:
what the run was asked to do, see :func:`crashpoint.harness.run.resume.selection`; ``--resume``
appends only to a run whose selection is the same), and its **writer**: ``host``, ``pid`` and
``pid_started`` (the process's start time, so a reused pid is not taken for the writer) of the
process appending to it, ``NULL`` once it has finished or let go. A run whose writer is alive is
not appended to by anyone else (:meth:`ResultStore.claim_run`); a writer that was killed leaves its
row, and the next claim finds the process gone and takes over.

Rows are only ever inserted (and a run's end stamped once), so a run killed half-way keeps
every finished row readable and stays ``complete = false``. Reports read this data only.

A store made by an older version is brought up to this schema by its next writer: missing tables are
created, and string columns it holds narrower than this schema (``verdict`` was ``VARCHAR(10)``, too
short for ``unsupported``) are widened on PostgreSQL (:func:`narrow_columns`; elsewhere a clear
:class:`~crashpoint.errors.StoreError` gives the statement to run). Readers change nothing.
"""

from __future__ import annotations

import functools
import os
import socket
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from sqlalchemy import (JSON, Boolean, Column, DateTime, Float, Integer, MetaData, String, Table, Text,
                        create_engine, event, func, inspect, select, update)
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, OperationalError, ProgrammingError

from crashpoint.errors import CrashpointError, StoreError, UsageError
from crashpoint.sqlite import BUSY_TIMEOUT_S

FORMAT = "crashpoint.store/1"
DEFAULT_PATH = Path(".crashpoint") / "results.db"
DEFAULT_URL = f"sqlite:///{DEFAULT_PATH}"
ENV_URL = "CRASHPOINT_RESULTS_DB"

metadata = MetaData()

meta_table = Table(
    "crashpoint_meta", metadata,
    Column("key", String(64), primary_key=True),
    Column("value", Text, nullable=False),
)

runs_table = Table(
    "crashpoint_runs", metadata,
    Column("run_id", String(32), primary_key=True),
    Column("engine", String(200), nullable=False),
    Column("engine_version", String(100)),
    Column("adapter", String(200)),
    Column("pack", String(200)),
    Column("pack_version", String(100)),
    Column("crash", String(20)),
    Column("seed", String(100)),
    Column("git_commit", String(64)),
    Column("host", String(255)),
    Column("source", String(20)),
    Column("started_at", DateTime(timezone=True), nullable=False, index=True),
    Column("ended_at", DateTime(timezone=True)),
    Column("complete", Boolean, nullable=False, default=False),
    Column("summary", JSON),
)

results_table = Table(
    "crashpoint_results", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False, index=True),
    Column("case_id", String(300), nullable=False),
    Column("crash_point", Text, nullable=False),
    Column("verdict", String(16), nullable=False),
    Column("oracle", String(50)),
    Column("message", Text),
    Column("final_status", String(50)),
    Column("wall_s", Float),
    Column("recorded_at", DateTime(timezone=True), nullable=False),
    Column("reproduce", Text),
    Column("tags", JSON),
    Column("measures", JSON),
    Column("data", JSON),
)

keys_table = Table(
    "crashpoint_run_keys", metadata,
    Column("run_id", String(32), primary_key=True),
    Column("selection", JSON),
    Column("host", String(255)),
    Column("pid", Integer),
    Column("pid_started", String(32)),
    Column("since", DateTime(timezone=True)),
)

RUN_FIELDS = ("engine", "engine_version", "adapter", "pack", "pack_version", "crash", "seed", "git_commit",
              "host", "source")


def normalize_url(raw: str | os.PathLike[str] | None) -> str:
    """A database URL from ``raw``: ``None`` -> ``$CRASHPOINT_RESULTS_DB`` or :data:`DEFAULT_URL`; a
    plain path -> ``sqlite:///PATH``; a URL as given. Raises :class:`UsageError` for a malformed URL."""
    value = str(raw) if raw else os.environ.get(ENV_URL) or DEFAULT_URL
    if "://" not in value:
        value = f"sqlite:///{value}"
    try:
        make_url(value)
    except ArgumentError as exc:
        raise UsageError(f"results database {value!r}: not a database URL ({exc})") from None
    return value


def narrow_columns(insp: Any) -> list[tuple[str, str, int, int]]:
    """The string columns of a store (read through the SQLAlchemy inspector ``insp``) that hold fewer
    characters than this version's schema gives them: ``[(table, column, stored length, our length)]``,
    in table order. A store made before ``unsupported`` was a verdict has ``crashpoint_results.verdict``
    as ``VARCHAR(10)``: PostgreSQL refuses an 11-character verdict there."""
    out = []
    for table in metadata.sorted_tables:
        stored = {c["name"]: c["type"] for c in insp.get_columns(table.name)}
        for column in table.columns:
            want = getattr(column.type, "length", None)
            have = getattr(stored.get(column.name), "length", None)
            if isinstance(column.type, String) and want and have and have < want:
                out.append((table.name, column.name, int(have), int(want)))
    return out


def _utc(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")  # the wait of every SQLite file crashpoint keeps
    cur.execute("PRAGMA synchronous=NORMAL")
    cur.close()


def _unusable(where: str, exc: BaseException, doing: str = "used") -> StoreError:
    first = (str(exc).splitlines() or [""])[0][:300]
    return StoreError(f"results database {where}: cannot be {doing} (damaged, or not a crashpoint store): "
                      f"{type(exc).__name__}: {first}", file=where)


def _guarded(doing: str) -> Any:
    """A decorator turning any failure of a store method into a :class:`StoreError` naming the store
    (``doing``: ``"read"`` or ``"written"``); crashpoint's own errors pass as they are."""
    def decorate(method: Any) -> Any:
        @functools.wraps(method)
        def wrapper(self: "ResultStore", *args: Any, **kwargs: Any) -> Any:
            try:
                return method(self, *args, **kwargs)
            except CrashpointError:
                raise
            except Exception as exc:
                raise _unusable(self.where, exc, doing) from None
        return wrapper
    return decorate


_reader, _writer = _guarded("read"), _guarded("written")


def _strs(value: Any) -> list[str]:
    return [str(x) for x in value] if isinstance(value, list) else []


def clean_result(row: dict[str, Any]) -> dict[str, Any]:
    """The result dict of a ``crashpoint_results`` row with the shape every renderer relies on:
    ``case_id``, ``crash_point``, ``verdict`` from their columns; ``failures`` a list of
    ``{"rule", "oracle", "message", "evidence"}`` (no ``rule`` in findings stored before rule ids: their
    ``oracle`` family stands for it, see :func:`crashpoint.reports.summary.rule_of`); ``measures`` and ``timeline`` dicts (``timeline`` with
    lists of dict ``events`` and ``deliveries``); ``tags`` and ``notes`` lists of strings; ``wall_s``
    a number. Other keys are kept as stored."""
    data = dict(row["data"]) if isinstance(row.get("data"), dict) else {}
    data.update(case_id=str(row["case_id"]), crash_point=str(row["crash_point"]), verdict=str(row["verdict"]))
    failures = data.get("failures") if isinstance(data.get("failures"), list) else []
    data["failures"] = [({"rule": str(f["rule"])} if f.get("rule") is not None else {})
                        | {"oracle": str(f.get("oracle", "?")), "message": str(f.get("message", "")),
                           "evidence": _strs(f.get("evidence"))} for f in failures if isinstance(f, dict)]
    measures = data.get("measures", row.get("measures"))
    data["measures"] = measures if isinstance(measures, dict) else {}
    data["tags"], data["notes"] = _strs(data.get("tags")), _strs(data.get("notes"))
    for key in ("error", "final_status", "stop_reason", "reproduce"):
        if data.get(key) is not None and not isinstance(data[key], str):
            data[key] = str(data[key])
    if not isinstance(data.get("wall_s"), (int, float)) or isinstance(data.get("wall_s"), bool):
        data["wall_s"] = 0.0
    if "timeline" in data:
        tl = data["timeline"] if isinstance(data["timeline"], dict) else {}
        events = tl.get("events") if isinstance(tl.get("events"), list) else []
        deliveries = tl.get("deliveries") if isinstance(tl.get("deliveries"), list) else []
        data["timeline"] = {"events": [e for e in events if isinstance(e, dict)],
                            "deliveries": [d for d in deliveries if isinstance(d, dict)],
                            "truncated": tl.get("truncated") if isinstance(tl.get("truncated"), int) else 0}
    return data


class ResultStore:
    """An open results store.

    Args:
        url: database URL or SQLite path (see :func:`normalize_url`).
        create: create the tables when the database is empty (``False``: a missing store is an error,
            for readers).

    Raises:
        UsageError: the URL is malformed or names no file, or (``create=False``) there is no store there
            yet. StoreError: the database cannot be opened, a SQLite file is not a SQLite database, or the
            database holds tables that are not a crashpoint store of this format (the message names the
            file or URL; nothing is recreated or overwritten).
    """

    def __init__(self, url: str | os.PathLike[str] | None = None, *, create: bool = True) -> None:
        self.url = normalize_url(url)
        parsed = make_url(self.url)
        self.where = parsed.database if parsed.get_backend_name() == "sqlite" else \
            parsed.render_as_string(hide_password=True)
        self.is_sqlite = parsed.get_backend_name() == "sqlite"
        if self.is_sqlite:
            if not parsed.database or parsed.database == ":memory:":
                raise UsageError(f"results database {self.url}: give a file (sqlite:///PATH)")
            path = Path(parsed.database)
            if not path.exists():
                if not create:
                    raise UsageError(f"results database {path}: no such file (record a run with --results-db first)")
                try:
                    path.parent.mkdir(parents=True, exist_ok=True)
                except OSError as exc:
                    raise StoreError(f"results database {path}: cannot create its folder: {exc}",
                                     file=str(path)) from None
            elif path.is_dir():
                raise UsageError(f"results database {path}: is a folder, not a SQLite file")
            elif not path.is_file():  # reading a FIFO's first bytes would wait for a writer forever
                raise UsageError(f"results database {path}: not a regular file (a FIFO, device or socket); "
                                 "give a SQLite file")
            else:
                with path.open("rb") as fh:
                    head = fh.read(16)
                if head and head != b"SQLite format 3\x00":
                    raise StoreError(f"results database {path}: not a SQLite database (refusing to touch it)",
                                     file=str(path))
            self.engine: Engine = create_engine(self.url, connect_args={"timeout": BUSY_TIMEOUT_S})
            event.listen(self.engine, "connect", _sqlite_pragmas)
        else:
            try:
                self.engine = create_engine(self.url, pool_pre_ping=True)
            except Exception as exc:  # an unknown dialect or a missing driver
                raise UsageError(f"results database {self.where}: {type(exc).__name__}: {exc}") from None
        self._check_schema(create)

    def _check_schema(self, create: bool) -> None:
        ours = {t.name for t in metadata.sorted_tables}
        for attempt in range(6):
            try:
                tables = set(inspect(self.engine).get_table_names())
                foreign = tables - ours
                if foreign and (self.is_sqlite or not tables & ours and not create):
                    raise StoreError(f"results database {self.where}: holds other tables "
                                     f"({', '.join(sorted(foreign)[:5])}), not a crashpoint results store; "
                                     f"refusing to touch it (give another --results-db)", file=self.where)
                if not ours <= tables:
                    if not create:
                        raise UsageError(f"results database {self.where}: empty, no run recorded yet")
                    metadata.create_all(self.engine, checkfirst=True)  # idempotent; a racing writer may win
                with self.engine.begin() as conn:
                    fmt = conn.execute(select(meta_table.c.value).where(meta_table.c.key == "format")).scalar()
                    if fmt is None and create:
                        conn.execute(meta_table.insert().values(key="format", value=FORMAT))
                        fmt = FORMAT
                insp = inspect(self.engine)
                for table in metadata.sorted_tables:
                    have = {c["name"] for c in insp.get_columns(table.name)}
                    missing = {c.name for c in table.columns} - have
                    if missing:
                        raise StoreError(f"results database {self.where}: table {table.name} lacks column(s) "
                                         f"{', '.join(sorted(missing))}: not a {FORMAT} store", file=self.where)
                if fmt != FORMAT:
                    raise StoreError(f"results database {self.where}: format {fmt!r}, expected {FORMAT!r}",
                                     file=self.where)
                if create:  # a reader changes nothing, not even the journal mode
                    self._widen(narrow_columns(insp))
                    self._wal()
                return
            except CrashpointError:
                raise
            except Exception as exc:  # a damaged file fails in many ways (sqlite errors, undecodable names)
                # two writers creating one store at once: the loser retries and finds it made
                transient = isinstance(exc, (IntegrityError, OperationalError, ProgrammingError)) and any(
                    word in str(exc).lower() for word in ("already exists", "locked", "duplicate key",
                                                          "unique constraint"))
                if attempt == 5 or not transient:
                    raise _unusable(self.where, exc) from None
                time.sleep(0.05 * (attempt + 1))

    def _widen(self, narrow: list[tuple[str, str, int, int]]) -> None:
        """Widen the columns a store made by an older version holds narrower than this version writes
        (:func:`narrow_columns`; ``verdict`` was ``VARCHAR(10)``, too short for ``unsupported``), in one
        transaction. SQLite enforces no length: nothing to do there.

        Raises:
            StoreError: a database other than SQLite or PostgreSQL (the message gives the statement to
                run), or the change was refused (no ALTER privilege: the message says so).
        """
        if not narrow or self.is_sqlite:
            return
        name = self.engine.dialect.name
        quote = self.engine.dialect.identifier_preparer.quote
        statements = [f"ALTER TABLE {quote(t)} ALTER COLUMN {quote(c)} TYPE VARCHAR({want})"
                      for t, c, _, want in narrow]
        where = ", ".join(f"{t}.{c} is VARCHAR({have}), this version needs VARCHAR({want})" for t, c, have, want in narrow)
        if name != "postgresql":
            raise StoreError(f"results database {self.where}: {where}; widen it ({'; '.join(statements)} or "
                             f"your database's equivalent), then run again", file=self.where)
        try:
            with self.engine.begin() as conn:
                for statement in statements:
                    conn.exec_driver_sql(statement)
        except Exception as exc:
            raise StoreError(f"results database {self.where}: {where}, and widening it failed "
                             f"({type(exc).__name__}: {str(exc).splitlines()[0]}); run {'; '.join(statements)} "
                             "as the table's owner", file=self.where) from None

    def _wal(self) -> None:
        """Switch a SQLite store (ours, checked) to the WAL journal: readers never block the writer,
        and a writer killed mid-transaction leaves the last committed state (a persistent setting)."""
        if self.is_sqlite:
            with self.engine.connect() as conn:
                conn.exec_driver_sql("PRAGMA journal_mode=WAL")

    # -- writing ---------------------------------------------------------------------------------

    @_writer
    def begin_run(self, info: dict[str, Any], started_at: datetime | None = None,
                  selection: dict[str, Any] | None = None) -> str:
        """Record the start of a run; returns its ``run_id`` (32 hex characters).

        ``info`` has the keys of :data:`RUN_FIELDS` (missing ones are NULL; ``engine`` is required);
        ``selection`` is what the run was asked to do (kept for ``--resume``). The row is committed at
        once with ``complete = false``, this process as its writer (see :meth:`claim_run`).
        """
        if not info.get("engine"):
            raise UsageError("begin_run: field engine is required")
        run_id = uuid.uuid4().hex
        row = {k: (str(info[k]) if info.get(k) is not None else None) for k in RUN_FIELDS}
        with self.engine.begin() as conn:
            conn.execute(runs_table.insert().values(run_id=run_id, started_at=_utc(started_at) or _now(),
                                                    complete=False, **row))
            conn.execute(keys_table.insert().values(run_id=run_id, selection=selection, **_me()))
        return run_id

    @_writer
    def claim_run(self, run_id: str) -> None:
        """Become the writer of ``run_id`` (``--resume``), atomically.

        Raises:
            UsageError: another live process is its writer (the message names its host and pid), or the run
                was recorded without a key row (by an older crashpoint: its selection is unknown).
        """
        for _ in range(5):
            with self.engine.begin() as conn:
                row = conn.execute(select(keys_table).where(keys_table.c.run_id == run_id)).mappings().first()
                if row is None:
                    raise UsageError(f"run {run_id} in {self.where} has no selection record (recorded by an older "
                                     "crashpoint): it cannot be resumed; start a new run")
                if _alive(row):
                    raise UsageError(f"run {run_id} in {self.where} is still being written by pid {row['pid']} on "
                                     f"{row['host']} (since {_utc(row['since'])}); wait for it, or stop it first")
                taken = conn.execute(update(keys_table).where(
                    keys_table.c.run_id == run_id,
                    keys_table.c.pid.is_(None) if row["pid"] is None else keys_table.c.pid == row["pid"],
                ).values(**_me())).rowcount
            if taken == 1:
                return
        raise UsageError(f"run {run_id} in {self.where}: another process claimed it at the same time")

    @_writer
    def release_run(self, run_id: str) -> None:
        """Stop being the writer of ``run_id`` (nothing if this process is not its writer)."""
        with self.engine.begin() as conn:
            conn.execute(update(keys_table).where(keys_table.c.run_id == run_id, keys_table.c.pid == os.getpid(),
                                                  keys_table.c.host == host_name())
                         .values(host=None, pid=None, pid_started=None, since=None))

    @_reader
    def run_key(self, run_id: str) -> dict[str, Any] | None:
        """``{"selection", "host", "pid", "pid_started", "since"}`` of ``run_id``, or ``None`` (no key row)."""
        with self.engine.connect() as conn:
            row = conn.execute(select(keys_table).where(keys_table.c.run_id == run_id)).mappings().first()
        return dict(row) if row is not None else None

    @_writer
    def add_result(self, run_id: str, result: dict[str, Any]) -> None:
        """Append one result (a result dict of the document, plus optional ``tags``, ``measures``,
        ``timeline``, ``reproduce``) to ``run_id``, in its own committed transaction. ``case_id`` and
        ``verdict`` are required (``KeyError``); the columns take what the other fields hold of the
        expected types, and ``data`` keeps the dict as given."""
        failures = result.get("failures") if isinstance(result.get("failures"), list) else []
        first = next((f for f in failures if isinstance(f, dict)), None)

        def text_of(value: Any) -> str | None:
            return None if value is None else str(value)

        wall = result.get("wall_s")
        with self.engine.begin() as conn:
            conn.execute(results_table.insert().values(
                run_id=run_id, case_id=str(result["case_id"]), crash_point=str(result.get("crash_point") or "none"),
                verdict=str(result["verdict"]), oracle=text_of(first.get("rule") or first.get("oracle")) if first else None,
                message=text_of(first.get("message")) if first else text_of(result.get("error")),
                final_status=text_of(result.get("final_status")),
                wall_s=float(wall) if isinstance(wall, (int, float)) and not isinstance(wall, bool) else None,
                recorded_at=_now(), reproduce=text_of(result.get("reproduce")),
                tags=_strs(result.get("tags")),
                measures=result.get("measures") if isinstance(result.get("measures"), dict) else {}, data=result))

    @_writer
    def finish_run(self, run_id: str, summary: dict[str, Any] | None = None,
                   ended_at: datetime | None = None, complete: bool = True) -> None:
        """Stamp the end of ``run_id``: ``complete`` (``true`` unless the session left runs of its selection out, as
        a time budget does: then ``--resume`` finishes it), ``ended_at``, and the ``summary`` JSON."""
        with self.engine.begin() as conn:
            conn.execute(update(runs_table).where(runs_table.c.run_id == run_id)
                         .values(complete=complete, ended_at=_utc(ended_at) or _now(), summary=summary))

    # -- reading ---------------------------------------------------------------------------------

    @_reader
    def runs(self, since: datetime | None = None, until: datetime | None = None) -> list[dict[str, Any]]:
        """Runs started in ``[since, until)`` (UTC; either bound optional), oldest first, as dicts."""
        query = select(runs_table).order_by(runs_table.c.started_at, runs_table.c.run_id)
        if since is not None:
            query = query.where(runs_table.c.started_at >= _utc(since))
        if until is not None:
            query = query.where(runs_table.c.started_at < _utc(until))
        with self.engine.connect() as conn:
            rows = [dict(r._mapping) for r in conn.execute(query)]
        for r in rows:
            r["started_at"], r["ended_at"] = _utc(r["started_at"]), _utc(r["ended_at"])
        return rows

    @_reader
    def verdict_counts(self, run_ids: Iterable[str]) -> dict[str, dict[str, int]]:
        """``{run_id: {verdict: count}}`` for the given runs (one grouped query)."""
        ids = list(run_ids)
        out: dict[str, dict[str, int]] = {i: {} for i in ids}
        if not ids:
            return out
        query = select(results_table.c.run_id, results_table.c.verdict, func.count()) \
            .where(results_table.c.run_id.in_(ids)).group_by(results_table.c.run_id, results_table.c.verdict)
        with self.engine.connect() as conn:
            for run_id, verdict, n in conn.execute(query):
                out[run_id][verdict] = int(n)
        return out

    @_reader
    def resolve(self, ref: str | None) -> str:
        """The run id that ``ref`` names: ``None``/``latest`` -> the most recently started run; a full
        id or a unique prefix (at least 4 characters). Raises :class:`UsageError` otherwise."""
        with self.engine.connect() as conn:
            if not ref or ref == "latest":
                found = conn.execute(select(runs_table.c.run_id).order_by(runs_table.c.started_at.desc(),
                                                                          runs_table.c.run_id.desc())).first()
                if found is None:
                    raise UsageError(f"results database {self.where}: no run recorded yet")
                return found[0]
            if len(ref) < 4 or not all(c in "0123456789abcdef" for c in ref):
                raise UsageError(f"run id {ref!r}: give 'latest' or at least 4 hex characters of a run id")
            found = conn.execute(select(runs_table.c.run_id).where(runs_table.c.run_id.like(ref + "%"))).all()
        if len(found) != 1:
            raise UsageError(f"run id {ref!r}: {'no' if not found else len(found)} matching run(s) in {self.where}")
        return found[0][0]

    @_reader
    def results(self, run_ids: Iterable[str]) -> list[dict[str, Any]]:
        """Result rows of the given runs, in order of arrival, as dicts (columns of
        ``crashpoint_results``)."""
        ids = list(run_ids)
        if not ids:
            return []
        out: list[dict[str, Any]] = []
        with self.engine.connect() as conn:
            for i in range(0, len(ids), 500):
                query = select(results_table).where(results_table.c.run_id.in_(ids[i:i + 500])) \
                    .order_by(results_table.c.id)
                out.extend(dict(r._mapping) for r in conn.execute(query))
        return out

    @_reader
    def load_run(self, ref: str | None) -> dict[str, Any]:
        """A stored run as the data every renderer takes::

            {"run": {run columns, "started_at"/"ended_at" ISO strings}, "results": [result dicts]}

        where each result dict is the stored ``data`` (the result document's result, with
        ``reproduce``, ``tags``, ``measures``, ``timeline`` when recorded), its shape made sure of
        (see :func:`clean_result`), so a renderer never trips on a damaged or foreign row. Raises
        :class:`UsageError` for an unknown run, :class:`StoreError` for an unreadable store."""
        run_id = self.resolve(ref)
        run = next(r for r in self.runs() if r["run_id"] == run_id)
        run = {k: (v.isoformat(timespec="seconds") if isinstance(v, datetime) else v) for k, v in run.items()}
        if not isinstance(run.get("summary"), dict):
            run["summary"] = None
        return {"run": run, "results": [clean_result(r) for r in self.results([run_id])]}

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()


def host_name() -> str:
    """This machine's host name (recorded with each run)."""
    return socket.gethostname()


def _started(pid: int) -> str | None:
    """The start time of process ``pid`` in clock ticks since boot (Linux ``/proc``), or ``None``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def _me() -> dict[str, Any]:
    """The writer columns naming this process."""
    return {"host": host_name(), "pid": os.getpid(), "pid_started": _started(os.getpid()), "since": _now()}


def _alive(row: Any) -> bool:
    """Is the writer a key row names still running? A writer on another host is taken as alive (this
    machine cannot tell); here, a pid that is gone, or reused by a process started at another time, is not."""
    if row["pid"] is None:
        return False
    if row["host"] != host_name():
        return True
    try:
        os.kill(int(row["pid"]), 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return row["pid_started"] is None or _started(int(row["pid"])) in (None, row["pid_started"])

