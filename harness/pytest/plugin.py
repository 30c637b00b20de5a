"""The pytest plugin: scenario cases as test items, expanded into the crash matrix with ``--chaos``.

* ``pytest scenarios/refunds`` collects every case file of the pack and runs each once,
  fault-free (the golden run), judged by every oracle.
* ``pytest --chaos scenarios/refunds`` (or ``--crashpoint-chaos``) also runs the golden run
  at collection time, then makes one item per (case, crash point) with ids like
  ``approval_timeout_after_refund_draft[kill@after_checkpoint:refund_draft]``.
  Each item SIGKILLs a real worker process at its crash point and resumes on the same files.

Other plugins (ordeal, agentchaos-core) register ``--chaos`` too, and pytest refuses to
start when two plugins add one option. So this plugin always registers the unambiguous
``--crashpoint-*`` options, and adds the ``--chaos`` alias only after every plugin has
registered its options, and only when no other plugin owns it (likewise ``--chaos-seed``).
Where another plugin owns ``--chaos`` as a flag, the user's ``--chaos`` switches crashpoint's
chaos on as well (read from that plugin's option), and a header line says so; the header
advertises only the spellings that work here. A session that ran crashpoint's cases golden
only, or skipped its target sweeps, says in the terminal summary that no crash run happened.

crashpoint's items depend on no other plugin's markers or flags: another plugin may skip the
items it believes are its own (ordeal skips every item with a ``chaos`` keyword, which an item
gets from a folder named ``chaos`` on its path), so after every plugin has modified the items,
the ``skip``/``skipif``/``xfail`` markers on crashpoint's items are taken off again (select or
deselect cases with ``-k``, ``-m`` or ``--deselect``, which stay in force).
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
import time
from pathlib import Path
from typing import Any, Iterator

import pytest

from crashpoint.harness.pytest.targets import crashpoint_sweep  # noqa: F401 - the fixture of target sweeps

CASE_SUFFIXES = (".yaml", ".yml", ".json")
_STASH_PACKS = pytest.StashKey[dict]()
_STASH_ALIAS = pytest.StashKey[str]()
_STASH_SEED_ALIAS = pytest.StashKey[bool]()
#: Golden-only case items run and target sweeps skipped, counted where the reports arrive.
_STASH_GOLDEN_ONLY = pytest.StashKey[dict]()


@dataclass(frozen=True)
class ForeignChaos:
    """Another plugin's ``--chaos``: its ``dest`` on ``config.option``, the option group it was added to
    (``ordeal``), and whether it is a plain on/off flag (only then does crashpoint read it as its own)."""

    dest: str
    group: str
    flag: bool


_STASH_FOREIGN = pytest.StashKey[ForeignChaos]()
#: Markers another plugin may put on items to skip them; never honoured on crashpoint's items.
FOREIGN_SKIPS = ("skip", "skipif", "xfail")


def pytest_addoption(parser: pytest.Parser) -> None:
    """Register ``--crashpoint-chaos``, ``--crashpoint-engine``, ``--crashpoint-worker-timeout``, ``--crashpoint-seed``,
    ``--crashpoint-schedules``, ``--crashpoint-budget``, ``--crashpoint-results-db``."""
    group = parser.getgroup("crashpoint", "crashpoint: crash-test durable workflows")
    group.addoption("--crashpoint-chaos", action="store_true", default=False, dest="crashpoint_chaos",
                    help="expand scenario cases into one test per (case, crash point) with a real SIGKILL")
    group.addoption("--crashpoint-engine", default=None, metavar="MODULE:CLASS", dest="crashpoint_engine",
                    help="engine class driven by the reference adapter (default: crashpoint's engine)")
    group.addoption("--crashpoint-worker-timeout", type=float, default=60.0, metavar="S",
                    dest="crashpoint_worker_timeout", help="wall seconds per worker process (default 60)")
    group.addoption("--crashpoint-seed", default=None, metavar="N|last", dest="crashpoint_seed",
                    help="seed of the generated fault schedules under chaos; 'last' reuses the previous session's")
    group.addoption("--crashpoint-schedules", type=int, default=10, metavar="N", dest="crashpoint_schedules",
                    help="generated fault schedules per case under chaos (default 10; 0 turns them off)")
    from crashpoint.harness.cli.main import seconds

    group.addoption("--crashpoint-budget", type=seconds, default=None, metavar="SECONDS", dest="crashpoint_budget",
                    help="a time budget for each crashpoint_sweep (60 or 60s), as crashpoint run --budget: the most "
                         "informative runs first, what did not fit is left out (neither failed nor passed)")
    group.addoption("--crashpoint-results-db", nargs="?", const="", default=None, metavar="URL",
                    dest="crashpoint_results_db",
                    help="record this session's case runs in a results store (SQLite path or database URL; "
                         "without URL: $CRASHPOINT_RESULTS_DB or .crashpoint/results.db)")


def _find_option(parser: pytest.Parser, name: str) -> tuple[Any, Any] | None:
    """``(group, option)`` of the registered option spelled ``name``, or ``None``."""
    groups = [parser._anonymous, *parser._groups]  # pytest exposes no public lookup of registered names
    for group in groups:
        for opt in group.options:
            if name in opt.names():
                return group, opt
    return None


def _option_owned(parser: pytest.Parser, name: str) -> bool:
    return _find_option(parser, name) is not None


def _is_flag(opt: Any) -> bool:
    """``True`` for an on/off option (argparse ``store_true``): pytest 9 wraps an argparse action, pytest 8 keeps
    the keyword arguments."""
    action = getattr(opt, "_action", None)
    if action is not None:
        return getattr(action, "nargs", None) == 0 and getattr(action, "const", None) is True
    return getattr(opt, "_attrs", {}).get("action") == "store_true"


@pytest.hookimpl(trylast=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    """Add the ``--chaos`` alias now that every installed plugin has added its options; where another plugin
    owns ``--chaos``, remember its option so that the user's ``--chaos`` switches crashpoint's chaos on too."""
    early_config.stash[_STASH_SEED_ALIAS] = False
    found = _find_option(parser, "--chaos")
    if found is not None:
        group, opt = found
        early_config.stash[_STASH_ALIAS] = "taken"
        early_config.stash[_STASH_FOREIGN] = ForeignChaos(dest=opt.dest, group=getattr(group, "name", "") or "?",
                                                          flag=_is_flag(opt))
        return
    parser.getgroup("crashpoint").addoption("--chaos", action="store_true", default=False,
                                            dest="crashpoint_chaos_alias",
                                            help="alias of --crashpoint-chaos (when no other plugin owns --chaos)")
    if not _option_owned(parser, "--chaos-seed"):
        parser.getgroup("crashpoint").addoption("--chaos-seed", default=None, metavar="N|last",
                                                dest="crashpoint_seed_alias", help="alias of --crashpoint-seed")
        early_config.stash[_STASH_SEED_ALIAS] = True
    early_config.stash[_STASH_ALIAS] = "ours"


def _foreign_chaos(config: pytest.Config) -> ForeignChaos | None:
    """The other plugin's ``--chaos`` when one owns it, else ``None``."""
    return config.stash.get(_STASH_FOREIGN, None)


def _chaos_through_foreign(config: pytest.Config) -> bool:
    """``True`` when the user gave ``--chaos`` and another plugin owns it as a flag."""
    foreign = _foreign_chaos(config)
    return foreign is not None and foreign.flag and getattr(config.option, foreign.dest, None) is True


def chaos_enabled(config: pytest.Config) -> bool:
    """``True`` when ``--crashpoint-chaos`` or ``--chaos`` was given: our alias, or another plugin's ``--chaos``
    flag (ordeal's), which switches crashpoint's chaos on as well."""
    alias = getattr(config.option, "crashpoint_chaos_alias", False)
    return bool(config.getoption("crashpoint_chaos") or alias) or _chaos_through_foreign(config)


def pytest_report_header(config: pytest.Config) -> list[str]:
    """The mode, and which chaos spelling works here; one more line when another plugin's ``--chaos`` turned
    crashpoint's chaos on."""
    alias = config.stash.get(_STASH_ALIAS, "ours")
    foreign = _foreign_chaos(config)
    if alias == "ours":
        spelling = "--chaos or --crashpoint-chaos"
    elif foreign is not None and foreign.flag:
        spelling = f"--chaos (shared with plugin {foreign.group}) or --crashpoint-chaos"
    else:
        spelling = "--crashpoint-chaos (--chaos belongs to another plugin)"
    if chaos_enabled(config):
        from crashpoint.harness.pytest.schedules import resolve  # via sys.modules, like the items' own import

        seed = resolve(config)
        flag = "--chaos-seed" if config.stash.get(_STASH_SEED_ALIAS, False) else "--crashpoint-seed"
        lines = ["crashpoint: chaos on: one item per (case, crash point), each a real SIGKILL and resume",
                 f"crashpoint: chaos seed {seed}, {config.getoption('crashpoint_schedules')} generated fault "
                 f"schedule(s) per case (same schedules: {flag} {seed} or {flag} last)"]
        if not config.getoption("crashpoint_chaos") and _chaos_through_foreign(config):
            lines.insert(0, f"crashpoint: --chaos is shared with plugin {foreign.group}: crashpoint honours it too "
                            f"(both plugins' chaos runs; --crashpoint-chaos alone runs crashpoint's only)")
        return lines
    return [f"crashpoint: golden runs only; enable chaos with {spelling}"]


def pytest_configure(config: pytest.Config) -> None:
    """Set up the per-session pack cache; check ``--crashpoint-results-db`` and ``--chaos-seed`` before
    anything runs."""
    config.stash[_STASH_PACKS] = {}
    config.stash[_STASH_GOLDEN_ONLY] = {"cases": 0, "sweeps": 0}
    config.pluginmanager.register(ReportSink(config), "crashpoint-report-sink")
    timeout = config.getoption("crashpoint_worker_timeout", None)
    if timeout is not None:
        from crashpoint.errors import UsageError
        from crashpoint.harness.cli.main import check_worker_timeout

        try:
            check_worker_timeout(timeout)
        except UsageError as exc:  # 1e10 overflowed time_t in every run
            raise pytest.UsageError(f"crashpoint: {str(exc).replace('--worker-timeout', '--crashpoint-worker-timeout')}")
    if config.getoption("crashpoint_results_db", None) is not None:
        from crashpoint.harness.pytest import recording as pytest_results

        pytest_results.check_store(config)
    if chaos_enabled(config) and config.getoption("crashpoint_schedules") > 0:
        from crashpoint.harness.pytest.schedules import resolve

        resolve(config)  # a bad --chaos-seed stops the session here, as a usage error


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]):
    """After every plugin has modified the items: take other plugins' skip markers off crashpoint's items."""
    result = yield
    from crashpoint.harness.pytest.schedules import ScheduleItem

    for item in items:
        if isinstance(item, (CaseItem, ScheduleItem)):
            item.own_markers[:] = [m for m in item.own_markers if m.name not in FOREIGN_SKIPS]
    return result


def pytest_collect_file(file_path: Path, parent: pytest.Collector) -> pytest.Collector | None:
    """Collect YAML/JSON files that sit in a pack's cases folder."""
    if file_path.suffix not in CASE_SUFFIXES:
        return None
    for folder in file_path.parents:
        if (folder / "pack.yaml").is_file():
            from crashpoint.harness.load.loader import load_pack

            packs = parent.config.stash[_STASH_PACKS]
            if folder not in packs:
                try:
                    packs[folder] = load_pack(folder)
                except Exception as exc:
                    raise pytest.UsageError(f"crashpoint: {exc}") from None
            if file_path.parent.resolve() == packs[folder].cases_dir.resolve():
                return CaseFile.from_parent(parent, path=file_path)
            return None
    return None


class CaseFile(pytest.File):
    """One case file; yields the golden item and, under chaos, one item per crash point."""

    def collect(self) -> Iterator[pytest.Item]:
        from crashpoint.errors import CaseError
        from crashpoint.harness.load.loader import find_pack_dir, load_case

        pack = self.config.stash[_STASH_PACKS][find_pack_dir(self.path)]
        try:
            case = load_case(self.path, pack)
        except CaseError as exc:  # shown as a collection error with the message, never skipped
            raise self.CollectError(str(exc)) from None
        if not chaos_enabled(self.config):
            yield CaseItem.from_parent(self, name=case.case_id, case=case, pack=pack, crash_point=None)
            return
        golden = _run(self.config, case, pack, None)
        yield CaseItem.from_parent(self, name=f"{case.case_id}[golden]", case=case, pack=pack, crash_point=None,
                                   golden=golden)
        for point in golden.crash_points:
            yield CaseItem.from_parent(self, name=f"{case.case_id}[kill@{point}]", case=case, pack=pack,
                                       crash_point=point, golden=golden)
        budget = self.config.getoption("crashpoint_schedules")
        if budget > 0 and golden.crash_points:
            from crashpoint.harness.pytest.schedules import ScheduleItem

            yield ScheduleItem.from_parent(self, name=f"{case.case_id}[schedules]",
                                           case=case, pack=pack, golden=golden, budget=budget)


def _adapter(config: pytest.Config):
    from crashpoint.harness.adapters.reference import ReferenceAdapter

    engine = config.getoption("crashpoint_engine")
    return ReferenceAdapter(engine=engine) if engine else ReferenceAdapter()


def _run(config: pytest.Config, case, pack, crash_point, golden=None):
    from crashpoint.harness.run.pack_driver import Driver

    root = Path(tempfile.mkdtemp(prefix="crashpoint-pytest-"))
    try:
        driver = Driver(_adapter(config), pack, worker_timeout_s=config.getoption("crashpoint_worker_timeout"))
        return driver.run(case, root / "run", crash_point, golden)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _attempt(config: pytest.Config, case, pack, crash_point, golden=None):
    """:func:`_run`, or the exception it raised (judged like any other front end judges it)."""
    try:
        return _run(config, case, pack, crash_point, golden)
    except (Exception, SystemExit) as exc:
        return exc


def needs_fault_free(case) -> bool:
    """See :func:`crashpoint.harness.judge.verdict.needs_fault_free` (imported when called)."""
    from crashpoint.harness.judge.verdict import needs_fault_free as needs

    return needs(case)


def fault_free(case):
    """See :func:`crashpoint.harness.run.sweep.fault_free` (imported when called)."""
    from crashpoint.harness.run.sweep import fault_free as clean

    return clean(case)


class CaseFailed(Exception):
    """Raised by a case item whose oracles found problems; carries the report text."""


class CaseItem(pytest.Item):
    """One run of one case: golden (``crash_point=None``) or killed at ``crash_point``."""

    def __init__(self, *, case: Any, pack: Any, crash_point: str | None, golden: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.case, self.pack, self.crash_point, self.golden = case, pack, crash_point, golden

    def runtest(self) -> None:
        from crashpoint.harness.judge.pack_rules import trace_line
        from crashpoint.harness.judge.verdict import Invocation, judge
        from crashpoint.text import clip

        began = time.perf_counter()
        if self.crash_point is None and self.golden is not None:
            outcome, clean = self.golden, None
            if needs_fault_free(self.case):
                clean = _attempt(self.config, fault_free(self.case), self.pack, None)
        else:
            outcome = _attempt(self.config, self.case, self.pack, self.crash_point, self.golden)
            clean = _attempt(self.config, fault_free(self.case), self.pack, None) \
                if needs_fault_free(self.case) and not isinstance(outcome, BaseException) else None
        result = judge(self.case, self.pack, outcome, crash_point=self.crash_point, golden=self.golden,
                       fault_free=clean, how=Invocation(self.config.getoption("crashpoint_engine")), began=began)
        self.crashpoint_result = result  # read by pytest_results.after_call
        if result.verdict == "passed":
            return
        run = result.outcome
        lines = [f"{self.case.case_id}: {result.verdict}" + (
            f", final status {clip(str(run.status))} ({clip(str(run.stop_reason))})" if run is not None else "")]
        if result.error:
            lines.append(f"{result.verdict}: {clip(result.error)}")
        for f in result.failures:
            lines.append(f"[{f.rule}] {clip(f.message)}")
            lines.extend(f"    {clip(e)}" for e in f.evidence[:6])
        if run is not None and result.failures:
            lines.append("last trace events:")
            lines.extend(f"    {clip(trace_line(e))}" for e in run.trace[-8:])
        lines.append(f"reproduce: {result.reproduce}")
        raise CaseFailed("\n".join(lines))

    crashpoint_result: Any = None

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        """The oracle report instead of a Python traceback."""
        if isinstance(excinfo.value, CaseFailed):
            return str(excinfo.value)
        return super().repr_failure(excinfo, style=style)

    def reportinfo(self) -> tuple[Path, int | None, str]:
        """Location shown by pytest: the case file and the crash point."""
        return self.path, 0, f"case {self.name}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """Around the call phase's report: ``--junitxml`` properties and the results-store row (before it
    is made), then the row and the schedules drawn go on the report itself (``crashpoint_record``,
    ``crashpoint_schedules``: plain data, which pytest-xdist carries from a worker to the controller)."""
    if isinstance(item, CaseItem) and call.when == "call":
        from crashpoint.harness.pytest import recording as pytest_results

        pytest_results.after_call(item, call)
    outcome = yield
    if call.when == "call":
        report = outcome.get_result()
        for attr in ("crashpoint_record", "crashpoint_schedules"):
            value = getattr(item, attr, None)
            if value is not None:
                setattr(report, attr, value)
        if isinstance(item, CaseItem) and item.crash_point is None and item.golden is None:
            report.crashpoint_golden_only = True  # a case run without chaos: counted for the terminal summary


class ReportSink:
    """Registered per session (``pytest_runtest_logreport`` gets no config): stores an item's result
    and caches its drawn schedules, once, in the process that is not an xdist worker (the controller
    receives every worker's reports through this hook)."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """See the class docstring; also counts golden-only case runs and skipped target sweeps."""
        from crashpoint.harness.pytest.targets import SWEEP_SKIP

        counts = self.config.stash[_STASH_GOLDEN_ONLY]
        if getattr(report, "crashpoint_golden_only", False):
            counts["cases"] += 1
        elif report.skipped and isinstance(report.longrepr, tuple) and SWEEP_SKIP in str(report.longrepr[-1]):
            counts["sweeps"] += 1
        if getattr(report, "crashpoint_record", None) is None and \
                getattr(report, "crashpoint_schedules", None) is None:
            return
        from crashpoint.harness.pytest import schedules as pytest_schedules
        from crashpoint.harness.pytest import recording as pytest_results

        pytest_results.record_report(self.config, report)
        pytest_schedules.cache_report(self.config, report)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """pytest-xdist, on the controller, for each worker: hand it the session's chaos seed, so every
    worker draws the schedules of the seed shown in the header."""
    if chaos_enabled(node.config) and node.config.getoption("crashpoint_schedules") > 0:
        from crashpoint.harness.pytest.schedules import WORKERINPUT_SEED, resolve

        node.workerinput[WORKERINPUT_SEED] = resolve(node.config)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """Say that no crash run happened when crashpoint's cases ran golden only or its target sweeps were skipped
    (never a silent golden-only run: another plugin may own ``--chaos``)."""
    counts = config.stash.get(_STASH_GOLDEN_ONLY, None)
    if not counts or not (counts["cases"] or counts["sweeps"]) or chaos_enabled(config):
        return
    ran = [f"{counts['cases']} case(s) ran their golden run only"] if counts["cases"] else []
    if counts["sweeps"]:
        ran.append(f"{counts['sweeps']} crashpoint_sweep test(s) skipped")
    spelling = "--chaos or --crashpoint-chaos" if config.stash.get(_STASH_ALIAS, "ours") == "ours" or \
        (_foreign_chaos(config) is not None and _foreign_chaos(config).flag) else "--crashpoint-chaos"
    terminalreporter.write_line(f"crashpoint: no crash run happened ({', '.join(ran)}); crash runs need {spelling}")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Mark the stored run complete (``--crashpoint-results-db``) when the session ran every item it
    collected; an interrupted one (Ctrl-C, ``-x``, ``--maxfail``, an internal error) stays incomplete."""
    from crashpoint.harness.pytest import recording as pytest_results

    ran_all = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED) and \
        not session.shouldstop and not session.shouldfail
    pytest_results.finish(session.config, complete=ran_all)
