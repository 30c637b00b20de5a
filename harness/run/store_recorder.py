"""Recording a sweep into the results store as its runs finish (``crashpoint run --results-db``, ``--resume``), for a
pack's sweep and a target's alike.

The stored form of one result is :func:`crashpoint.harness.judge.record.stored_result`; the store itself is
:mod:`crashpoint.reports.results_store`.
"""

from __future__ import annotations

from typing import Any, Sequence


class SweepRecorder:
    """Records a CLI sweep: one stored result per finished run, the run marked complete at the end.

    Args:
        url: the ``--results-db`` value (``""``: the default store).
        subject: what is swept (a :class:`~crashpoint.harness.run.sweep.Subject`: a pack's cases on an adapter, or a
            target's cases on its engine); it names the run's engine, pack (or target) and their versions.
        crash: the stored crash setting (:func:`~crashpoint.harness.run.modes.crash_label`). ``only``: the
            ``--crash-point`` ids; ``crash_mode``: ``--crash-mode`` (both part of the recorded selection, see
            :func:`crashpoint.harness.run.resume.selection`).
        run_id: append to this stored run (``--resume``, as its writer) instead of starting a new one.

    Raises:
        UsageError: no store there, a malformed URL, or (``run_id``) another live process writing that run.
        StoreError: the store cannot be read (both named in the message).
    """

    def __init__(self, url: str, subject: Any, crash: str, only: Sequence[str] = (), crash_mode: str = "kill",
                 run_id: str | None = None, points: str | None = None) -> None:
        from crashpoint.harness.judge.record import Recorder

        self.subject = subject
        if run_id is not None:
            self.recorder = Recorder.reopen(url or None, run_id)
            return
        info = subject.store_info() | {"crash": crash, "seed": None, "source": "cli"}
        self.recorder = Recorder(url or None, info,
                                 selection=subject.selection(crash.split("+")[0], only, crash_mode, points))

    @property
    def where(self) -> str:
        """The store's file or URL (password hidden)."""
        return self.recorder.store.where

    def on_result(self, result: Any) -> None:
        """Store one :class:`~crashpoint.harness.model.results.RunResult` (called as each run finishes)."""
        from crashpoint.harness.judge.record import stored_result

        repro = result.reproduce or (self.subject.repro(result.case_id, result.crash_point)
                                     if result.verdict != "passed" and result.case_id in self.subject.units()
                                     else None)
        self.recorder.add(stored_result(result, tuple(self.subject.tags(result.case_id)), repro))

    def finish(self, document: dict[str, Any]) -> bool:
        """Keep the document's summary and coverage and mark the run complete, unless a time budget left runs out
        (``document["budget"]["left_out"]``): the run then stays incomplete, for ``--resume`` to finish. Returns
        whether it was marked complete."""
        complete = not (document.get("budget") or {}).get("left_out")
        self.recorder.finish(document, complete=complete)
        return complete


__all__ = ["SweepRecorder"]
