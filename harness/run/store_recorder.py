"""Recording a sweep into the results store as its runs finish (``crashpoint run --results-db``, ``--resume``).

The stored form of one result is :func:`crashpoint.harness.judge.record.stored_result`; the store itself is
:mod:`crashpoint.reports.results_store`.
"""

from __future__ import annotations

from typing import Any, Sequence


class SweepRecorder:
    """Records a CLI sweep: one stored result per finished run, the run marked complete at the end.

    Args:
        url: the ``--results-db`` value (``""``: the default store).
        pack, cases, adapter: the sweep's pack, cases and engine adapter.
        crash: the stored crash setting (:func:`~crashpoint.harness.run.pack_driver.crash_label`); ``engine_spec``,
            ``crash_mode`` and ``adapter_spec``: the ``--engine``, ``--crash-mode`` and ``--adapter``
            values (for the reproduce commands of results that carry none).
            ``only``: the ``--crash-point`` ids (part of the recorded selection, see
            :func:`crashpoint.harness.run.resume.selection`).

    Raises:
        UsageError: no store there, or a malformed URL. StoreError: the store cannot be read (both named
            in the message).
    """

    def __init__(self, url: str, pack: Any, cases: list[Any], adapter: Any, crash: str,
                 engine_spec: str | None, crash_mode: str = "kill", adapter_spec: str | None = None,
                 only: Sequence[str] = ()) -> None:
        from crashpoint.harness.adapters.protocol import adapter_class
        from crashpoint.harness.judge.record import Recorder

        self.cases = {c.case_id: c for c in cases}
        self.engine_spec = engine_spec
        self.adapter_spec = adapter_spec
        self.crash_mode = crash_mode
        info = {"engine": adapter.name, "engine_version": adapter.version(), "adapter": adapter_class(adapter),
                "pack": pack.name, "pack_version": pack.version, "crash": crash, "seed": None, "source": "cli"}
        from crashpoint.harness.run.resume import selection

        self.recorder = Recorder(url or None, info, selection=selection(pack, cases, adapter, crash.split("+")[0], only,
                                                                        crash_mode))

    @property
    def where(self) -> str:
        """The store's file or URL (password hidden)."""
        return self.recorder.store.where

    def on_result(self, result: Any) -> None:
        """Store one :class:`~crashpoint.harness.run.sweep.RunResult` (called as each run finishes)."""
        from crashpoint.harness.judge.record import stored_result
        from crashpoint.harness.judge.verdict import Invocation, repro_command

        case = self.cases.get(result.case_id)
        repro = result.reproduce or (repro_command(case.path, result.crash_point,
                                                   Invocation(self.engine_spec, self.adapter_spec, self.crash_mode))
                                     if case is not None and result.verdict != "passed" else None)
        self.recorder.add(stored_result(result, tuple(case.tags) if case is not None else (), repro))

    def finish(self, document: dict[str, Any]) -> None:
        """Mark the run complete and keep the document's summary and coverage."""
        self.recorder.finish(document)


__all__ = ["SweepRecorder"]
