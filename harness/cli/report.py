"""The reporting side of the command line: ``crashpoint run --results-db`` and ``crashpoint report``.

::

    crashpoint run PATH ... [--results-db [URL]]
    crashpoint report [RUN_ID|latest] [--format json|junit|markdown|html] [--out FILE] [--db URL]
    crashpoint report --list [--db URL]
    crashpoint report --weekly --since YYYY-MM-DD --until YYYY-MM-DD [--format markdown|json|html]
                      [--out FILE] [--db URL]

``--results-db`` without a URL records to ``$CRASHPOINT_RESULTS_DB`` or ``.crashpoint/results.db``;
without the option nothing is recorded. ``--db`` defaults the same way. ``report`` exits 0 when the
run is complete and every run passed, 1 otherwise (a failure, or an incomplete run); the weekly
report exits 1 when it lists new failures, incident recurrences or alerts. Bad input exits 2.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from crashpoint.errors import UsageError
from crashpoint.harness.run.modes import crash_label
from crashpoint.harness.run.store_recorder import SweepRecorder

FORMATS = ("json", "junit", "markdown", "html")
WEEKLY_FORMATS = ("markdown", "json", "html")


def add_run_options(run: argparse.ArgumentParser) -> None:
    """Add ``--results-db [URL]`` to the ``run`` command."""
    run.add_argument("--results-db", nargs="?", const="", default=None, metavar="URL",
                     help="append this run to a results store as it goes (SQLite path or database URL; "
                          "without URL: $CRASHPOINT_RESULTS_DB or .crashpoint/results.db)")


def start_recording(args: argparse.Namespace, subject: Any) -> SweepRecorder | None:
    """A :class:`SweepRecorder` of ``subject`` (a pack's or a target's sweep) when ``--results-db`` was given, else
    ``None``."""
    if getattr(args, "results_db", None) is None:
        return None
    return SweepRecorder(args.results_db, subject, crash_label(args.crash, args.crash_mode),
                         only=args.crash_point or (), crash_mode=args.crash_mode, points=points_of(args))


def points_of(args: argparse.Namespace) -> str:
    """The ``--points`` a sweep runs with, its default filled in (``classes`` for ``--crash sampled``, else ``all``):
    recorded with the run, so that ``--resume`` appends only to a run swept the same way."""
    return getattr(args, "points", None) or ("classes" if getattr(args, "crash", None) == "sampled" else "all")


def add_report_parser(sub: Any, handler: Callable[[argparse.Namespace], int] | None = None) -> None:
    """Add the ``report`` command to the ``crashpoint`` subparsers."""
    rep = sub.add_parser("report", help="render a stored run (JSON, JUnit XML, Markdown, HTML) or the weekly report")
    rep.add_argument("run", nargs="?", default="latest", help="run id (or a unique prefix), or latest (default)")
    rep.add_argument("--format", default=None, help=f"one of {', '.join(FORMATS)} (default markdown)")
    rep.add_argument("--out", type=Path, metavar="FILE", help="write here, atomically (default: standard output)")
    rep.add_argument("--db", default=None, metavar="URL",
                     help="results store (default $CRASHPOINT_RESULTS_DB or .crashpoint/results.db)")
    rep.add_argument("--list", action="store_true", help="list the stored runs, newest last")
    rep.add_argument("--weekly", action="store_true", help="compare the weeks from --since to --until")
    rep.add_argument("--since", metavar="YYYY-MM-DD", help="first day of the weekly report")
    rep.add_argument("--until", metavar="YYYY-MM-DD", help="last day of the weekly report (inclusive)")
    rep.set_defaults(func=handler or cmd_report)


def _check_out(out: Path | None) -> None:
    if out is not None:
        from crashpoint.paths import output_file

        output_file(out, "--out")


def _emit(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        return
    from crashpoint.reports.json_report import write_atomic

    write_atomic(out, text)
    print(f"report written to {out} ({len(text.encode('utf-8'))} bytes)", file=sys.stderr)


def render_stored(stored: dict[str, Any], fmt: str) -> str:
    """Render a stored run in ``fmt`` (one of :data:`FORMATS`)."""
    if fmt == "json":
        from crashpoint.reports.journal import render
    elif fmt == "junit":
        from crashpoint.reports.junit import render
    elif fmt == "markdown":
        from crashpoint.reports.markdown import render
    elif fmt == "html":
        from crashpoint.reports.html import render
    else:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    return render(stored)


def _list_runs(db: str | None) -> int:
    from tabulate import tabulate

    from crashpoint.reports.results_store import ResultStore

    store = ResultStore(db, create=False)
    try:
        runs = store.runs()
        counts = store.verdict_counts([r["run_id"] for r in runs])
    finally:
        store.close()
    rows = [[r["run_id"][:8], r["started_at"].isoformat(timespec="seconds"), f"{r['pack']} {r['pack_version'] or ''}",
             f"{r['engine']} {r['engine_version'] or ''}", r["crash"] or "-", r["source"] or "-",
             "yes" if r["complete"] else "NO", (r["git_commit"] or "-")[:10],
             f"{counts[r['run_id']].get('passed', 0)}/{sum(counts[r['run_id']].values())}"] for r in runs]
    print(tabulate(rows, headers=["run", "started (UTC)", "pack", "engine", "crash", "source", "complete",
                                  "commit", "passed"]))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    """``crashpoint report``: see the module docstring. Returns an exit code (0, 1; 2 via UsageError, 3 via StoreError)."""
    from crashpoint.reports.results_store import ResultStore

    _check_out(args.out)
    if args.list:
        return _list_runs(args.db)
    if args.weekly:
        from crashpoint.reports import weekly

        fmt = args.format or "markdown"
        if fmt not in WEEKLY_FORMATS:
            raise UsageError(f"--format {fmt!r} with --weekly: expected one of {', '.join(WEEKLY_FORMATS)}")
        if not args.since or not args.until:
            raise UsageError("--weekly needs --since YYYY-MM-DD and --until YYYY-MM-DD")
        if args.run != "latest":
            raise UsageError(f"--weekly takes no run id (got {args.run!r})")
        since, until = weekly.parse_date(args.since, "--since"), weekly.parse_date(args.until, "--until")
        store = ResultStore(args.db, create=False)
        try:
            report = weekly.weekly(store, since, until)
        finally:
            store.close()
        render = {"markdown": weekly.render_markdown, "json": weekly.render_json, "html": weekly.render_html}[fmt]
        _emit(render(report), args.out)
        bad = report["new_failures"] or report["incidents"] or report["alerts"]
        return 1 if bad else 0
    if args.since or args.until:
        raise UsageError("--since/--until go with --weekly")
    fmt = args.format or "markdown"
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    store = ResultStore(args.db, create=False)
    try:
        stored = store.load_run(args.run)
    finally:
        store.close()
    _emit(render_stored(stored, fmt), args.out)
    ok = stored["run"].get("complete") and all(r["verdict"] == "passed" for r in stored["results"])
    return 0 if ok else 1
