"""What the pytest plugin records: results-store rows and pytest's own ``--junitxml`` properties.

The plugin (:mod:`crashpoint.harness.pytest_plugin`) calls :func:`after_call` for each case item
once it ran, and :func:`finish` at the end of the session:

* every item that did not pass gets ``user_properties`` ``crashpoint_verdict``,
  ``crashpoint_oracle`` (the oracles that failed, comma-separated), ``crashpoint_crash_point`` and
  ``crashpoint_reproduce`` (the one-line command), which ``--junitxml`` writes as ``<property>``
  elements of its ``<testcase>``; the failure text itself carries each finding and the command;
* with ``--crashpoint-results-db URL`` (``""``: the default store), the session is one stored run
  (``source`` ``pytest``; the pack of the first item run) and each item one result, committed as it
  finishes; the run is marked complete at the end of the session.
"""

from __future__ import annotations

from typing import Any

import pytest

_STASH_RECORDER = pytest.StashKey[Any]()


def check_store(config: pytest.Config) -> None:
    """Open the ``--crashpoint-results-db`` store once (creating it when new), so a bad URL or a
    foreign file stops the session at once. Raises :class:`pytest.UsageError` naming it."""
    from crashpoint.errors import CrashpointError
    from crashpoint.reports.store import ResultStore

    try:
        ResultStore(config.getoption("crashpoint_results_db") or None).close()
    except CrashpointError as exc:
        raise pytest.UsageError(f"--crashpoint-results-db: {exc}") from None


def _recorder(item: Any) -> Any:
    url = item.config.getoption("crashpoint_results_db", None)
    if url is None:
        return None
    stash = item.config.stash
    if _STASH_RECORDER not in stash:
        from crashpoint.harness.adapters.reference import ReferenceAdapter
        from crashpoint.harness.record import Recorder

        engine = item.config.getoption("crashpoint_engine")
        adapter = ReferenceAdapter(engine=engine, name=engine) if engine else ReferenceAdapter()
        chaos = item.golden is not None
        info = {"engine": adapter.name, "engine_version": adapter.version(), "adapter": type(adapter).__name__,
                "pack": item.pack.name, "pack_version": item.pack.version, "crash": "every" if chaos else "none",
                "seed": None, "source": "pytest"}
        stash[_STASH_RECORDER] = Recorder(url or None, info)
    return stash[_STASH_RECORDER]


def after_call(item: Any, call: pytest.CallInfo[None]) -> None:
    """Judge a finished case item's call phase: properties for ``--junitxml``, and a stored result.

    ``item.crashpoint_result`` is ``(outcome, failures)`` when the run got that far; an item whose
    run raised before (the engine or its adapter broke) is stored as an ``error``."""
    from crashpoint.harness.cli import repro_command
    from crashpoint.harness.record import stored_result
    from crashpoint.harness.sweep import RunResult

    outcome, failures = getattr(item, "crashpoint_result", None) or (None, [])
    error = None
    if outcome is None:
        verdict = "error"
        error = call.excinfo.exconly() if call.excinfo else "the run produced no outcome"
    elif item.crash_point is not None and not outcome.crash_fired:
        verdict, error = "error", f"crash point {item.crash_point} was never reached: nothing was tested"
    else:
        verdict = "failed" if failures else "passed"
    repro = None
    if verdict != "passed":
        repro = repro_command(item.case.path, item.crash_point, item.config.getoption("crashpoint_engine"))
        item.user_properties.extend([
            ("crashpoint_verdict", verdict),
            ("crashpoint_oracle", ",".join(dict.fromkeys(f.oracle for f in failures)) or verdict),
            ("crashpoint_crash_point", item.crash_point or "none"),
            ("crashpoint_reproduce", repro)])
    recorder = _recorder(item)
    if recorder is not None:
        result = RunResult(item.case.case_id, item.crash_point, verdict, list(failures), error=error,
                           outcome=outcome, wall_s=call.duration)
        recorder.add(stored_result(result, tuple(item.case.tags), repro))


def finish(config: pytest.Config) -> None:
    """Mark the session's stored run complete (when one was recorded)."""
    recorder = config.stash.get(_STASH_RECORDER, None)
    if recorder is not None:
        recorder.finish(None)
        del config.stash[_STASH_RECORDER]
