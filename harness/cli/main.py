"""The ``crashpoint`` command line.

Commands:
    crashpoint run PATH [--crash every|none] [--crash-point ID ...] [--json FILE] [--workers N]
                        [--executor processes|threads|dask://HOST:PORT] [--progress|--no-progress]
                        [--engine MODULE:CLASS] [--workdir DIR] [--worker-timeout S] [--save-traces DIR] [-q]
    crashpoint validate PATH
    crashpoint tools [PACK]
    crashpoint replay TRACE [--engine MODULE:CLASS | --adapter MODULE:ATTR] [--workdir DIR] [--worker-timeout S]
    crashpoint incident TRACE [--out FILE]
    crashpoint search PATH [--seed N|last] [--schedules N] [--max-faults N] [--kinds K,K]
                      [--engine MODULE:CLASS | --adapter MODULE:CLASS]
    crashpoint report [RUN_ID|latest] [--format ...] [--out FILE] [--db URL]   (see cli_report)

PATH is a pack folder, a case file inside a pack, or the name of a built-in pack
(``refunds``). Exit codes are :class:`ExitCode`.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import threading
import time
from enum import IntEnum
from pathlib import Path
from typing import Any, Sequence

from crashpoint.errors import CaseError, CrashpointError, EngineCrashed, UsageError, WorkerTimeout, printable
from crashpoint.paths import output_file, output_folder
from crashpoint.harness.process import crashpoints
from crashpoint.harness.run.modes import CRASH_MODES


class ExitCode(IntEnum):
    """Process exit codes (documented in docs/reference/cli.md, generated from the comments here)."""

    OK = 0  #: every run passed (or every file is valid)
    FAILED = 1  #: at least one run failed, errored, or could not be decided (unknown)
    USAGE = 2  #: bad input or usage: nothing was run and no result was written
    INTERNAL = 3  #: a store that cannot be read or written (named), or a bug in crashpoint (traceback shown)
    INTERRUPTED = 130  #: stopped by Ctrl-C (SIGINT); no result written


def exit_code_of(exc: BaseException) -> ExitCode:
    """The exit code an exception that reached the command line stands for: bad input or usage
    (:class:`CaseError`, :class:`UsageError`) 2; an engine that crashed or hung outside a sweep
    (``crashpoint replay``) 1, a run that did not pass; a store that cannot be read or written
    (:class:`StoreError`), or anything else, 3."""
    if isinstance(exc, (CaseError, UsageError)):
        return ExitCode.USAGE
    if isinstance(exc, (EngineCrashed, WorkerTimeout)):
        return ExitCode.FAILED
    return ExitCode.INTERNAL


#: The largest ``--worker-timeout`` (seconds): a week. Larger values overflow the platform's time_t
#: in deadline arithmetic (``1e10`` gave every run ``OverflowError``).
MAX_WORKER_TIMEOUT_S = 7 * 24 * 3600


def check_worker_timeout(value: float) -> None:
    """Check a ``--worker-timeout``: a finite number of seconds in (0, :data:`MAX_WORKER_TIMEOUT_S`].

    Raises:
        UsageError: anything else.
    """
    if not math.isfinite(value) or not 0 < value <= MAX_WORKER_TIMEOUT_S:
        raise UsageError(f"--worker-timeout must be a finite number of seconds > 0 and at most "
                         f"{MAX_WORKER_TIMEOUT_S} (a week), got {value}")


def resolve_path(raw: str) -> Path:
    """A path as given, or the folder of the built-in pack of that name.

    Raises:
        UsageError: neither exists.
    """
    path = Path(raw)
    if path.exists():
        return path
    from crashpoint.scenarios import builtin_pack

    if "/" not in raw and not raw.endswith((".yaml", ".yml", ".json")):
        return builtin_pack(raw)
    raise UsageError(f"{raw}: no such file or folder")


def repro_command(case_path: Path, crash_point: str | None, engine: str | None = None,
                  crash_mode: str = "kill", adapter: str | None = None) -> str:
    """:func:`crashpoint.harness.judge.verdict.repro_command` with the engine named by ``engine``
    (``--engine``), ``crash_mode`` and ``adapter`` (``--adapter``): the one-line, shell-quoted command
    that re-runs one case at one crash point."""
    from crashpoint.harness.judge.verdict import Invocation
    from crashpoint.harness.judge.verdict import repro_command as build

    return build(case_path, crash_point, Invocation(engine, adapter, crash_mode))


def _adapter(spec: str | None):
    from crashpoint.engine.engine import Engine
    from crashpoint.engine.worker import load_object
    from crashpoint.harness.adapters.reference import ReferenceAdapter

    if not spec:
        return ReferenceAdapter()
    try:
        cls = load_object(spec)
    except Exception as exc:  # an engine that cannot even be imported is bad input, not a verdict
        raise UsageError(f"--engine {spec}: cannot import it: {type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Engine)):
        raise UsageError(f"--engine {spec}: not a subclass of crashpoint.engine.Engine")
    return ReferenceAdapter(engine=spec, name=spec)


def engine_under_test(engine: str | None, adapter: str | None, call_timeout_s: float, recorded: str | None = None):
    """The adapter a command drives (``run``, ``replay``, ``search``): ``--adapter MODULE:ATTR`` (any engine's
    adapter, each harness-side call limited to ``call_timeout_s`` wall seconds), else the reference adapter on
    ``--engine MODULE:CLASS``'s engine, else ``recorded`` (the adapter spec a trace recorded), else the
    reference engine. Only the one chosen is imported.

    Raises:
        UsageError: both ``engine`` and ``adapter`` (the two name the engine under test); an engine or an
            adapter that cannot be imported, or is not what the option names.
    """
    if engine and adapter:
        raise UsageError(f"--engine {engine} and --adapter {adapter} exclude each other (--engine names an engine "
                         "class for the reference adapter; an adapter brings its own engine)")
    spec = adapter or (None if engine else recorded)
    if spec:
        from crashpoint.harness.run.certification import load_adapter

        return load_adapter(spec, call_timeout_s=call_timeout_s)
    return _adapter(engine)


def add_parallel_options(parser: argparse.ArgumentParser, what: str = "parallel runs",
                         progress: bool = True) -> None:
    """Add the options that say where runs execute: ``--workers N`` (alias ``--jobs N``) and
    ``--executor SPEC``; with ``progress``, also ``--progress/--no-progress``."""
    parser.add_argument("--workers", "--jobs", dest="workers", type=int, default=None, metavar="N",
                        help=f"{what}: size of the local pool (default: CPU count; for a target file: 2, a Temporal "
                             "target 5 per CPU, see harness/run/target_sweep.py default_workers); --jobs is an alias")
    parser.add_argument("--executor", default=None, metavar="processes|threads|dask://HOST:PORT",
                        help="where runs execute: a local process pool (default), a local thread pool, or the "
                             "Dask scheduler at HOST:PORT (pip install 'crashpoint[dask]')")
    if progress:
        parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                            help="a progress bar on standard error (default: on a terminal, for sweeps of more "
                                 "than 50 runs or 3 s; --progress forces it, --no-progress shows no progress at all, not even dots)")


def seconds(text: str) -> float:
    """A ``--budget``: a finite number of seconds > 0, written ``60`` or ``60s`` (``argparse`` type: a bad value exits
    2 naming the option)."""
    raw = text.strip().lower()
    number = raw[:-1] if raw.endswith("s") else raw
    try:
        value = float(number)
    except ValueError:
        value = float("nan")
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 (60 or 60s), got {text!r}")
    return value


def check_sweep_options(args: argparse.Namespace) -> None:
    """Check the options every sweeping command shares: ``--workers`` (``--jobs``), ``--executor``,
    ``--worker-timeout``, ``--workdir``.

    Raises:
        UsageError: ``--workers`` below 1, an executor that is not ``processes``, ``threads`` or
            ``dask://HOST:PORT``, a timeout that is not a finite number of seconds in (0, a week], or a
            ``--workdir`` that exists and is not an empty folder, or where no file can be created
            (:func:`~crashpoint.paths.output_folder`).
    """
    from crashpoint.harness.run.executors import check_spec

    workers = getattr(args, "workers", None)
    if workers is not None and workers < 1:
        raise UsageError(f"--workers (--jobs) must be >= 1, got {workers}")
    check_spec(getattr(args, "executor", None))
    check_worker_timeout(args.worker_timeout)
    if args.workdir:
        from crashpoint.harness.run.sweep import workdir_in_use

        holder = workdir_in_use(args.workdir)
        if holder is not None:
            raise UsageError(f"--workdir {args.workdir}: another sweep (pid {holder}) is running in this folder; "
                             "give each sweep a --workdir of its own")
        output_folder(args.workdir, "--workdir", empty=True)


def _cmd_validate(args: argparse.Namespace) -> int:
    from crashpoint.harness.load.loader import load_target

    from crashpoint.harness.cli.target_run import check_names, is_target_file

    if is_target_file(Path(args.path)):  # the team's own code (issue 12), not a pack
        from crashpoint.harness.load.target import Target

        target = Target.from_file(args.path)
        check_names(target, Path(args.path))
        print(f"ok: target {target.name}: {target.engine} entry {target.entry}, {len(target.inputs)} input(s), "
              f"{len(target.cases)} case(s) valid")
        return ExitCode.OK
    pack, cases = load_target(resolve_path(args.path))
    print(f"ok: pack {pack.name} {pack.version}: {len(pack.workflows)} workflow(s), {len(cases)} case(s) valid")
    return ExitCode.OK


def progress_for(args: argparse.Namespace):
    """The :class:`~crashpoint.harness.run.progress.SweepProgress` of a sweeping command's options
    (``--progress``/``--no-progress``, ``-q``), writing to standard error."""
    from crashpoint.harness.run.progress import SweepProgress

    mode = {None: "auto", True: "on", False: "off"}[getattr(args, "progress", None)]
    return SweepProgress(sys.stderr, mode=mode, quiet=bool(getattr(args, "quiet", False)))


def _cmd_run(args: argparse.Namespace) -> int:
    """``crashpoint run PATH``: sweep a pack (or case files) on an engine, or a target file (the team's own code):
    the same pipeline for both (:func:`_sweep_and_report`)."""
    from crashpoint.harness.run.executors import describe, make_executor
    from crashpoint.harness.cli.target_run import is_target_file, target_subject

    if args.crash_point and args.crash not in ("every", "sampled"):
        raise UsageError("--crash-point needs --crash every or sampled (a schedule 'A >> B' kills twice)")
    if args.pairs is not None and (args.crash != "recovery" or args.pairs < 1):
        raise UsageError("--pairs N (N >= 1) applies to --crash recovery only")
    for spec in args.crash_point or ():
        try:
            crashpoints.parse(spec)
        except ValueError as exc:
            raise UsageError(f"--crash-point {spec!r}: {exc}") from None
    if args.points is not None and args.crash_point:
        raise UsageError("--points picks among the crash points a golden run passed; --crash-point names them: "
                         "give one of the two")
    if args.budget is not None and args.crash == "recovery":  # what --budget N meant before (until 2026-12-03)
        print(f"crashpoint: note: --budget {args.budget:g} is a time budget in seconds; at most N double-kill runs "
              "per case of --crash recovery is --pairs N", file=sys.stderr)
    check_sweep_options(args)
    if args.json is not None:
        output_file(args.json, "--json")
    if args.save_traces:
        output_folder(args.save_traces, "--save-traces", files_only=True)
    fix_paths(args)  # checked as given; from here on absolute: a chdir in the code under test moves nothing
    if is_target_file(Path(args.path)):  # the team's own code, not a pack
        subject = target_subject(args, Path(args.path))
    else:
        if any(crashpoints.parse(spec).faults for spec in args.crash_point or ()):
            raise UsageError("--crash-point 'fault:EFFECT#N=OUTCOME' fails an effect call of a target's run; a pack "
                             "case scripts its tool faults in its faults: ({kind: tool, tool, call, outcome})")
        subject = _pack_subject(args)
    executor, close_executor = make_executor(args.executor or subject.default_executor,
                                             args.workers or subject.default_workers())  # exit 2: Dask unreachable
    try:
        return _sweep_and_report(args, subject, executor, describe(executor))
    finally:
        close_executor()


def fix_paths(args: argparse.Namespace) -> None:
    """Make the output paths of ``args`` absolute, against the working directory at the command's start:
    ``--json``, ``--save-traces``, ``--workdir`` and a SQLite ``--results-db`` (``sqlite:///PATH``, a plain path, or
    the default). Code under test that changes directory in a pool thread (``--executor threads``) otherwise sent
    ``--json out.json`` to ``/out.json``, and a store's later connections to another file."""
    for name in ("json", "save_traces", "workdir"):
        if getattr(args, name, None):
            setattr(args, name, Path(os.path.abspath(getattr(args, name))))
    if getattr(args, "results_db", None) is not None:
        from crashpoint.reports.results_store import normalize_url

        url = normalize_url(args.results_db)
        head = "sqlite:///"
        if url.startswith(head):
            path, sep, query = url[len(head):].partition("?")
            if path and path != ":memory:" and not path.startswith("/"):
                url = f"{head}{os.path.abspath(path)}{sep}{query}"
        args.results_db = url


def _pack_subject(args: argparse.Namespace):
    """The :class:`~crashpoint.harness.run.sweep.PackSubject` of ``crashpoint run PACK`` (``--case`` picks cases).

    Raises:
        UsageError: a target's option (``--durability``, ``--write-latency-ms``), an unknown ``--case``, an engine or
            adapter that cannot be imported.
    """
    from crashpoint.harness.judge.verdict import Invocation
    from crashpoint.harness.load.loader import load_target
    from crashpoint.harness.run.pack_driver import Driver
    from crashpoint.harness.run.sweep import PackSubject

    if args.durability or args.write_latency_ms:
        raise UsageError("--durability and --write-latency-ms are for target files (TARGET.yaml)")
    pack, cases = load_target(resolve_path(args.path))
    if args.case:
        unknown = [c for c in args.case if c not in {x.case_id for x in cases}]
        if unknown:
            raise UsageError(f"--case {unknown[0]}: no such case in pack {pack.name} (its cases: "
                             f"{', '.join(c.case_id for c in cases)[:400]})")
        cases = [c for c in cases if c.case_id in set(args.case)]
    adapter = engine_under_test(args.engine, getattr(args, "adapter", None), args.worker_timeout)
    driver = Driver(adapter, pack, worker_timeout_s=args.worker_timeout, crash_mode=args.crash_mode)
    return PackSubject(pack, cases, driver, Invocation(args.engine, getattr(args, "adapter", None), args.crash_mode))


def _sweep_and_report(args: argparse.Namespace, subject, executor, where: str) -> int:
    """Sweep ``subject`` (a pack's cases or a target's) and report it: the terminal tables, ``--json``,
    ``--results-db`` (``--resume``), ``--save-traces``; exit 0 only when the sweep is green."""
    from crashpoint.harness.cli import report as cli_report
    from crashpoint.harness.judge.document import sweep_data
    from crashpoint.harness.run.sweep import sweep_subject
    from crashpoint.reports import json_report, terminal as text
    from crashpoint.reports.summary import visible

    resumed = None
    units = subject.units()
    if getattr(args, "resume", False):
        if args.results_db is None:
            raise UsageError("--resume needs --results-db [URL]: the store holding the interrupted run")
        from crashpoint.harness.run import resume

        resumed = resume.plan(args.results_db, subject, args.crash, args.crash_point or (), args.crash_mode,
                              points=cli_report.points_of(args))
        if resumed.run_id is None:
            print("crashpoint: --resume: no incomplete run of this exact selection in the store; starting a new one"
                  + (f" ({resumed.mismatch})" if resumed.mismatch else ""))
    if resumed is not None and resumed.run_id is not None:
        recorder = resume.reopen(args.results_db, resumed.run_id, subject)
        print(f"crashpoint: resuming run {resumed.run_id}: {len(resumed.stored)} result(s) already recorded, "
              f"{len(resumed.todo)} unit(s) with runs left")
    else:
        recorder = cli_report.start_recording(args, subject)

    bar = progress_for(args)

    def progress(result) -> None:
        if recorder is not None:
            recorder.on_result(result)
        bar.result(result)

    began = time.perf_counter()
    # with --crash-point the loop runs the named points only: what --crash sampled means there is every
    crash = "every (the --crash-point(s) named)" if args.crash_point and args.crash == "sampled" else args.crash
    print(visible(f"crashpoint: sweeping {subject.describe()}, crash={crash}, crash mode={args.crash_mode}, "
                  f"on {where}"), flush=True)
    for line in subject.preamble():
        print(visible(f"crashpoint: {line}"), flush=True)
    todo = subject.narrowed(resumed.todo) if resumed else subject
    try:
        result = sweep_subject(todo, crash=args.crash, executor=executor, workdir=args.workdir,
                               keep=bool(args.workdir), only=args.crash_point or (), repeat=args.repeat,
                               pairs=args.pairs, points=args.points, time_budget_s=args.budget,
                               on_result=progress, on_plan=bar.plan,
                               skip=resumed.skip if resumed else (), keep_outcomes=bool(args.save_traces))
    except (KeyboardInterrupt, SystemExit):
        bar.close()
        _say_what_was_stored(recorder)
        raise
    finally:
        bar.close()
    if resumed is not None:
        result = resume.merge(result, resumed, units)
    data = sweep_data(result)
    for r in data["results"]:  # restored results, and runs the executor lost, have none yet
        if r["verdict"] != "passed" and not r.get("reproduce") and r["case_id"] in units:
            r["reproduce"] = subject.repro(r["case_id"], None if r["crash_point"] == "none" else r["crash_point"])
    if getattr(args, "verbose", False):
        print(text.case_tables(data))
        print()
    elif not args.quiet:
        print(text.cases_table(data))
        print()
    bad = text.failures(data)
    if bad:
        print(bad)
        print()
    print(text.coverage(data))
    print()
    print(text.summary(data))
    for line in text.unreached_pairs(data):
        print(visible(line))
    for line in text.sampling(data):  # the classes sampled, what a time budget left out
        print(line)
    from crashpoint.harness.engines.effects import unseen_summary

    for line in unseen_summary(result.results):  # processes whose effects no run could see
        print(visible(line))
    if result.kind == "target":
        from crashpoint.harness.judge.target_rules import keyed_summary

        for line in keyed_summary(result.results):  # repeats that passed because their key answered them
            print(visible(line))
        from crashpoint.harness.judge.stable import left_out_summary

        for line in left_out_summary(result.results):  # what the golden comparisons could not look at
            print(visible(line))
        from crashpoint.harness.judge.fault_stops import summary as not_retried

        for line in not_retried(result.results):  # effect faults the team's code did not retry
            print(visible(line))
    if args.json:
        json_report.write(args.json, data)
        print(f"results written to {args.json}")
    if recorder is not None:
        if recorder.finish(data):
            print(f"run {recorder.recorder.run_id} recorded in {recorder.where}")
        else:
            left = len(data["budget"]["left_out"])
            print(visible(f"run {recorder.recorder.run_id} recorded in {recorder.where}, incomplete: the time budget "
                          f"left {left} run(s) out; the same command with --resume (and without --budget, or with "
                          "another) runs them"))
    if args.save_traces:
        from crashpoint.harness.traces.tracefile import save_sweep_traces

        written, skipped = save_sweep_traces(args.save_traces, result, subject)
        print(f"{len(written)} trace file(s) written to {args.save_traces}")
        for line in skipped:
            print(f"no trace for {line}")
    s = data["summary"]
    print(f"{s['passed']} passed, {s['failed']} failed, {s['errors']} errors, {s['unknown']} unknown"
          + (f", {s['unsupported']} unsupported" if s["unsupported"] else "")
          + f" in {time.perf_counter() - began:.1f} s")
    return ExitCode.OK if result.passed else ExitCode.FAILED


#: Set once an interrupted sweep said what it stored (main's Ctrl-C line then says no more).
_STORED_SAID = False


def _say_what_was_stored(recorder: Any) -> None:
    """On Ctrl-C or SIGTERM in a sweep: one line on standard error saying truthfully what the results store holds of
    it (the results stored so far, the run left incomplete for ``--resume``), or that nothing was stored."""
    global _STORED_SAID
    _STORED_SAID = True
    if recorder is None:
        print("crashpoint: interrupted; no result stored (without --results-db a sweep keeps nothing)",
              file=sys.stderr)
        return
    stored, where, run_id = recorder.recorder.count, recorder.where, recorder.recorder.run_id
    recorder.recorder.abandon()  # let go of the run: it stays incomplete, and --resume may take it at once
    print(f"crashpoint: interrupted; {stored} result(s) of this session stored in {where} as run {run_id} "
          "(incomplete: the same command with --resume finishes it)", file=sys.stderr)


def _shown(line: str) -> str:
    """``line`` for the terminal: control and bidi characters escaped, at most 4 x MAX_TEXT characters."""
    from crashpoint.reports.summary import visible
    from crashpoint.text import MAX_TEXT, clip

    return visible(clip(line, 4 * MAX_TEXT))


def _cmd_replay(args: argparse.Namespace) -> int:
    from crashpoint.harness.traces.replay import replay
    from crashpoint.harness.traces.target_trace import is_target_trace
    from crashpoint.harness.traces.tracefile import read_trace

    check_worker_timeout(args.worker_timeout)
    if is_target_trace(args.trace):  # a run of a team's own code: run the same schedule again and compare
        return _replay_target(args)
    trace = read_trace(args.trace)
    # a trace of a ``run --adapter`` run is replayed on that adapter unless told otherwise: on the
    # reference engine it would replay another engine's decisions
    adapter = engine_under_test(args.engine, args.adapter, args.worker_timeout, recorded=trace["engine"].get("adapter"))
    if args.workdir and args.workdir.exists():
        raise UsageError(f"--workdir {args.workdir}: must not exist yet")
    if args.workdir:
        output_folder(args.workdir, "--workdir")
    case, engine = trace["case"]["case_id"], trace["engine"].get("spec") or trace["engine"]["name"]
    shown = _shown  # engine strings reach the terminal escaped and cut (crashpoint.text)
    print(shown(f"crashpoint: replaying {args.trace} (case {case}, crash point {trace['crash_point']}, recorded "
                f"on engine {engine}) on engine {adapter.name} {adapter.version()}"), flush=True)
    result = replay(trace, adapter=adapter, workdir=args.workdir, worker_timeout_s=args.worker_timeout)
    for note in result.notes:
        print(shown(f"note: {note}"))
    if result.divergence is not None and result.divergence.index > 1:
        from crashpoint.harness.traces.replay import decisions, render_decision

        common = decisions(trace["journal"])[result.divergence.index - 2]
        print(shown(f"last common decision #{result.divergence.index - 1}: {render_decision(common)}"))
    print(shown(result.message()))
    return ExitCode.OK if result.ok else ExitCode.FAILED


def _replay_target(args: argparse.Namespace) -> int:
    """``crashpoint replay`` of a target trace (:mod:`crashpoint.harness.traces.target_trace`): exit 0 when the
    replayed run matches the recorded one and gets its verdict, 1 otherwise."""
    from crashpoint.harness.traces import target_trace

    if args.engine or args.adapter:
        raise UsageError("--engine and --adapter are for pack traces: a target trace replays on its target's engine")
    if args.workdir and args.workdir.exists():
        raise UsageError(f"--workdir {args.workdir}: must not exist yet")
    if args.workdir:
        output_folder(args.workdir, "--workdir")
    trace = target_trace.read(args.trace)
    print(_shown(f"crashpoint: replaying {args.trace} (target {trace['target']['data'].get('target')}, case "
                 f"{trace['case']} [{trace['durability']}], crash point {trace['crash_point']}, recorded on "
                 f"{trace['engine']['version']})"), flush=True)
    done = target_trace.replay(trace, args.workdir)
    print(_shown(done.message()))
    return ExitCode.OK if done.ok else ExitCode.FAILED


def _cmd_incident(args: argparse.Namespace) -> int:
    from crashpoint.harness.traces.incident import make_incident, reproduce_command
    from crashpoint.harness.traces.tracefile import read_trace

    path = make_incident(args.trace, args.out)
    print(f"incident case written to {path}")
    print(_shown(f"reproduce: {reproduce_command(read_trace(args.trace), str(path))}"))
    return ExitCode.OK


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for documentation and tests)."""
    from crashpoint import __version__

    parser = argparse.ArgumentParser(prog="crashpoint", description="Chaos and eval harness for durable workflows.")
    parser.add_argument("--version", action="version", version=f"crashpoint {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="sweep a pack or a case: a golden run, then a SIGKILL at every crash point")
    run.add_argument("path", help="pack folder, case file, built-in pack name (refunds), or a target file "
                                  "(TARGET.yaml: the team's own workflow code)")
    run.add_argument("--crash", choices=("sampled", "every", "none", "recovery"), default="sampled",
                     help="sampled (default): a kill at a sample of each crash-point class (--points), plus per "
                          "case 2 kills during a recovery, 1 second live "
                          "worker next to a held one, 1 recovery by 3 workers at once (docs/reference/cli.md); "
                          "every: kill at each crash point of the golden run; none: golden runs only; "
                          "recovery: every, plus a second kill at each crash point of each recovery")
    run.add_argument("--points", choices=("classes", "all"), default=None,
                     help="classes (the default of --crash sampled): kill at a sample of each crash-point class (the "
                          "same code position of interchangeable threads or workflows; racy and recovery classes "
                          "twice); all (the default otherwise): at every crash point")
    run.add_argument("--budget", type=seconds, default=None, metavar="SECONDS",
                     help="a time budget (60 or 60s): the golden runs, then the most informative runs first (each "
                          "class once, racy classes, recovery classes, kills during recovery, the other instances, "
                          "repeats); no run starts that would not end in time; what did not run is listed, neither "
                          "failed nor passed")
    run.add_argument("--pairs", type=int, default=None, metavar="N",
                     help="with --crash recovery: at most N double-kill runs per case (default: all pairs; was --budget N)")
    run.add_argument("--crash-point", action="append", metavar="ID",
                     help="only this crash point (repeatable), e.g. after_checkpoint:refund_draft")
    run.add_argument("--json", metavar="FILE", help="write the result document here (atomically)")
    add_parallel_options(run)
    run.add_argument("--crash-mode", choices=CRASH_MODES, default="kill",
                     help="kill (default): a real SIGKILL, workers forked from a warm parent, crash runs start "
                          "from the golden run's snapshot; kill-cold: a real SIGKILL, a new interpreter per "
                          "worker, every run from the start (the naive baseline); inprocess: simulated crashes "
                          "in this process (fast, approximate: see docs/explanation/speed.md)")
    run.add_argument("--engine", metavar="MODULE:CLASS", help="engine class for the reference adapter")
    run.add_argument("--adapter", metavar="MODULE:CLASS",
                     help="an EngineAdapter class or factory (any engine), e.g. "
                          "crashpoint.harness.adapters.langgraph_adapter:LangGraphSync")
    run.add_argument("--workdir", type=Path, help="keep run folders (databases, ledgers, crash logs) here")
    run.add_argument("--worker-timeout", type=float, default=60.0, metavar="S",
                     help="wall seconds a worker may take before the run is judged unknown (default 60)")
    loud = run.add_mutually_exclusive_group()
    loud.add_argument("-q", "--quiet", action="store_true", help="only the summary and the failures")
    loud.add_argument("-v", "--verbose", action="store_true",
                      help="a table per case with a row per run (golden, then each crash point)")
    run.add_argument("--resume", action="store_true",
                     help="with --results-db: finish the latest incomplete run of this pack and engine in the "
                          "store, skipping the runs it already recorded")
    run.add_argument("--save-traces", type=Path, metavar="DIR",
                     help="write one trace file per run here (<case_id>__<crash point>.trace.json)")
    from crashpoint.harness.cli import report as cli_report

    cli_report.add_run_options(run)
    from crashpoint.harness.cli.target_run import add_target_options

    add_target_options(run)
    run.set_defaults(func=_cmd_run)
    val = sub.add_parser("validate", help="check a pack or case files against their schemas without running")
    val.add_argument("path")
    val.set_defaults(func=_cmd_validate)
    rep = sub.add_parser("replay", help="re-drive a fresh engine through a trace file and compare its decisions")
    rep.add_argument("trace", help="a trace file (crashpoint run --save-traces DIR)")
    on = rep.add_mutually_exclusive_group()
    on.add_argument("--engine", metavar="MODULE:CLASS",
                    help="engine class to replay on (default: the trace's adapter, if it ran on one, else the reference)")
    on.add_argument("--adapter", metavar="MODULE:ATTR",
                    help="adapter to replay on (default: the one the trace recorded, engine.adapter)")
    rep.add_argument("--workdir", type=Path, help="keep the replay's run folder here (must not exist yet)")
    rep.add_argument("--worker-timeout", type=float, default=60.0, metavar="S",
                     help="wall seconds a worker may take (default 60)")
    rep.set_defaults(func=_cmd_replay)
    inc = sub.add_parser("incident", help="turn a failing run's trace file into a YAML regression case")
    inc.add_argument("trace", help="a trace file of a run that did not pass")
    inc.add_argument("--out", type=Path, metavar="FILE",
                     help="where to write the case (default ./<case_id>.yaml; never overwritten)")
    inc.set_defaults(func=_cmd_incident)
    from crashpoint.harness.cli import certify as cli_certify

    cli_certify.add_certify_parser(sub)
    cli_report.add_report_parser(sub)
    from crashpoint.harness.cli import search as cli_search

    cli_search.add_search_parser(sub)
    from crashpoint.harness.cli import list_tools as cli_tools

    cli_tools.add_tools_parser(sub)
    return parser




def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``crashpoint`` console script; returns an :class:`ExitCode`.

    An error ends the command with one line on standard error, ``crashpoint: error: MESSAGE``, and
    the code :func:`exit_code_of` gives; an error that is none of crashpoint's own (a bug) prints
    its traceback first and exits :attr:`ExitCode.INTERNAL`.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on usage errors, 0 on --help
        return int(exc.code or 0)
    global _STORED_SAID
    _STORED_SAID = False  # (a test may call main more than once in one process)
    _closed_streams_to_devnull()
    stdout = sys.stdout
    if stdout is not None and not isinstance(stdout, ReaderSafe):
        sys.stdout = ReaderSafe(stdout)  # type: ignore[assignment]
    previous = _exit_on_sigterm()
    try:
        return int(args.func(args))
    except KeyboardInterrupt:
        if not _STORED_SAID:
            print("crashpoint: interrupted; no result written", file=sys.stderr)
        return ExitCode.INTERRUPTED
    except Terminated as exc:  # SIGTERM: the same cleanup as Ctrl-C has run; say so as for Ctrl-C
        if not _STORED_SAID:
            print("crashpoint: terminated; no result written", file=sys.stderr)
        return int(exc.code or 143)
    except BrokenPipeError:  # a write ReaderSafe does not see (a library's own handle on the output)
        _output_gone()
        print("crashpoint: the reader of the output went away before the command ended", file=sys.stderr)
        return ExitCode.INTERNAL
    except CrashpointError as exc:
        print(f"crashpoint: error: {exc}", file=sys.stderr)
        return exit_code_of(exc)
    except Exception as exc:
        import traceback

        traceback.print_exc(file=sys.stderr)
        print(f"crashpoint: internal error (a bug in crashpoint; please report it with the traceback above): "
              f"{type(exc).__name__}: {printable(str(exc).splitlines()[0] if str(exc) else '')}", file=sys.stderr)
        return ExitCode.INTERNAL
    finally:
        if previous is not None:
            signal.signal(signal.SIGTERM, previous)
        if isinstance(sys.stdout, ReaderSafe) and sys.stdout._inner is stdout:
            sys.stdout = stdout


def _output_gone() -> None:
    """Point standard output's file descriptor at ``/dev/null`` (its reader went away), so that later writes and the
    final flush cannot fail."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, 1)
        os.close(fd)
    except OSError:
        pass


def _closed_streams_to_devnull() -> None:
    """A standard stream the shell closed (``2>&-``, ``>&-``: Python sets ``sys.stderr`` / ``sys.stdout`` to ``None``)
    writes to ``/dev/null`` instead, so the command runs to its end, writes ``--json`` and the results store and exits
    with the sweep's code (before: the first progress dot raised ``AttributeError`` and the command exited 3 with
    nothing written)."""
    for name in ("stdout", "stderr"):
        if getattr(sys, name) is None:
            setattr(sys, name, open(os.devnull, "w", encoding="utf-8"))  # noqa: SIM115 - the process's own stream


class ReaderSafe:
    """Standard output that outlives its reader: when a write or flush finds the pipe closed (``crashpoint run ... |
    head -1``: ``head`` exits after one line), the rest of the output goes to ``/dev/null`` and the command goes on,
    so the sweep ends, ``--json`` and the results store are written and the exit code is the sweep's (1 when it
    failed; before, the ``BrokenPipeError`` ended the command with exit 0 and nothing written). Everything else is
    the wrapped stream's."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._inner.write(text)
            except BrokenPipeError:
                self._gone()
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._inner.flush()
            except BrokenPipeError:
                self._gone()

    def _gone(self) -> None:
        self.reader_gone = True
        _output_gone()
        try:
            self._inner.flush()  # what the wrapper still buffers goes to /dev/null now
        except OSError:
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class Terminated(SystemExit):
    """SIGTERM's exit while a command runs (code 128 + the signal's number): a ``SystemExit``, so every cleanup that
    runs for Ctrl-C runs for it too."""


def _exit_on_sigterm() -> Any:
    """Turn SIGTERM into ``SystemExit(143)`` while a command runs (in the main thread), so that cleanup runs
    as for Ctrl-C: the sweep's pool processes and worker processes are killed and its run folders removed.
    Returns the previous handler (``None`` outside the main thread)."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def terminate(signum: int, _frame: Any) -> None:
        raise Terminated(128 + signum)

    return signal.signal(signal.SIGTERM, terminate)


if __name__ == "__main__":
    sys.exit(main())
