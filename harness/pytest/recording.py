"""What the pytest plugin records: results-store rows and pytest's own ``--junitxml`` properties.

The plugin (:mod:`crashpoint.harness.pytest.plugin`) calls :func:`after_call` for each case item
once it ran, and :func:`finish` at the end of the session:

* every item that did not pass gets ``user_properties`` ``crashpoint_verdict``,
  ``crashpoint_oracle`` (the oracle families that failed, comma-separated), ``crashpoint_rule`` (the
  rule ids of the findings, comma-separated), ``crashpoint_crash_point`` and
  ``crashpoint_reproduce`` (the one-line command), which ``--junitxml`` writes as ``<property>``
  elements of its ``<testcase>``; the failure text itself carries each finding and the command;
* with ``--crashpoint-results-db URL`` (``""``: the default store), the session is one stored run
  (``source`` ``pytest``; the pack of the first item run) and each item one result, committed as it
  finishes; the run is marked complete at the end of the session.

Under ``pytest-xdist`` (``-n N``) the store is written by the controller only: a worker judges its
item and attaches the stored row to the item's report (``report.crashpoint_record``, plain data,
carried to the controller with the report); :func:`record_report` runs on the process that is not an
xdist worker (the controller, or the only process without xdist) and stores it. So the session is
one stored run, and each item's result is stored once.
"""

from __future__ import annotations

from typing import Any

import pytest

_STASH_RECORDER = pytest.StashKey[Any]()


def is_xdist_worker(config: pytest.Config) -> bool:
    """``True`` in a ``pytest-xdist`` worker process (it has ``config.workerinput``)."""
    return hasattr(config, "workerinput")


def check_store(config: pytest.Config) -> None:
    """Open the ``--crashpoint-results-db`` store once (creating it when new), so a bad URL or a
    foreign file stops the session at once (on an xdist worker: nothing, the controller did).
    Raises :class:`pytest.UsageError` naming it."""
    if is_xdist_worker(config):
        return
    from crashpoint.errors import CrashpointError
    from crashpoint.reports.results_store import ResultStore

    try:
        ResultStore(config.getoption("crashpoint_results_db") or None).close()
    except CrashpointError as exc:
        raise pytest.UsageError(f"--crashpoint-results-db: {exc}") from None


def _run_info(item: Any) -> dict[str, Any]:
    """The stored run's info, from the first item recorded."""
    from crashpoint.harness.adapters.reference import ReferenceAdapter
    from crashpoint.harness.adapters.protocol import adapter_class

    engine = item.config.getoption("crashpoint_engine")
    adapter = ReferenceAdapter(engine=engine, name=engine) if engine else ReferenceAdapter()
    chaos = item.golden is not None
    return {"engine": adapter.name, "engine_version": adapter.version(), "adapter": adapter_class(adapter),
            "pack": item.pack.name, "pack_version": item.pack.version, "crash": "every" if chaos else "none",
            "seed": None, "source": "pytest"}


def _recorder(config: pytest.Config, info: dict[str, Any]) -> Any:
    stash = config.stash
    if _STASH_RECORDER not in stash:
        from crashpoint.harness.judge.record import Recorder

        stash[_STASH_RECORDER] = Recorder(config.getoption("crashpoint_results_db") or None, info)
    return stash[_STASH_RECORDER]


def after_call(item: Any, call: pytest.CallInfo[None]) -> None:
    """Record a finished case item's call phase: properties for ``--junitxml``, and a stored result.

    ``item.crashpoint_result`` is the item's :class:`~crashpoint.harness.judge.verdict.RunResult` (the
    one verdict every front end gives); an item whose call raised before it was judged (a bug in the
    plugin) is stored as an ``error`` naming the exception."""
    from crashpoint.harness.judge.record import stored_result
    from crashpoint.harness.judge.verdict import Invocation, RunResult, repro_command

    result = getattr(item, "crashpoint_result", None)
    if result is None:
        error = call.excinfo.exconly() if call.excinfo else "the run produced no outcome"
        result = RunResult(item.case.case_id, item.crash_point, "error", error=error, wall_s=call.duration)
        result.reproduce = repro_command(item.case.path, item.crash_point,
                                         Invocation(item.config.getoption("crashpoint_engine")))
    if result.verdict != "passed":
        failures = result.failures
        item.user_properties.extend([
            ("crashpoint_verdict", result.verdict),
            ("crashpoint_oracle", ",".join(dict.fromkeys(f.oracle for f in failures)) or result.verdict),
            ("crashpoint_rule", ",".join(result.rules) or result.verdict),
            ("crashpoint_crash_point", item.crash_point or "none"),
            ("crashpoint_reproduce", result.reproduce)])
    if item.config.getoption("crashpoint_results_db", None) is not None:
        item.crashpoint_record = {"info": _run_info(item),
                                  "result": stored_result(result, tuple(item.case.tags))}


def record_report(config: pytest.Config, report: pytest.TestReport) -> None:
    """Store the row a case item attached to its call-phase report (``report.crashpoint_record``),
    unless this process is an xdist worker (its controller stores it when the report arrives)."""
    record = getattr(report, "crashpoint_record", None)
    if record is None or is_xdist_worker(config) or config.getoption("crashpoint_results_db", None) is None:
        return
    _recorder(config, record["info"]).add(record["result"])


def finish(config: pytest.Config, complete: bool = True) -> None:
    """Mark the session's stored run complete (when one was recorded), or, when the session did not run
    every item (``complete=False``: interrupted), leave it incomplete and let go of it."""
    recorder = config.stash.get(_STASH_RECORDER, None)
    if recorder is not None:
        if complete:
            recorder.finish(None)
        else:
            recorder.abandon()
        del config.stash[_STASH_RECORDER]
