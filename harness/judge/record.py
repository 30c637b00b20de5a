"""Recording runs into the results store (:mod:`crashpoint.reports.results_store`) as they finish.

The harness turns each live :class:`~crashpoint.harness.run.sweep.RunResult` into plain result data
here, so the reports never see a live object. A stored result is the result document's result dict
plus:

* ``tags``: the case's tags (``incident`` marks a regression case made from an incident).
* ``measures``: what the weekly report aggregates, per run: the booleans of
  :mod:`crashpoint.harness.judge.metrics` (``crashed``, ``dup``, ``dup_safe``, ``retry``, ``retry_ok``,
  ``comp``, ``comp_ok``, ``golden_points``), and ``cancel`` (a cancellation was delivered),
  ``cancel_ok`` (... and the run passed every oracle), ``approval_wait_s`` (virtual seconds from the
  approval request to the decision, or ``None``), ``retries`` (retry_scheduled events),
  ``dup_effect`` (an effect applied more than once), ``approval_overdue`` (a decision after the
  deadline, or a run left waiting past it), ``replay_failed`` (the differential oracle failed: the
  resumed run did not end as the golden run did).
* ``timeline`` (runs that did not pass): the trace as ``{"seq", "at" (virtual epoch s), "kind",
  "text" (the event's other fields, as ``key=value``)}`` (at most :data:`TIMELINE_MAX` events) and ``deliveries``: the external deliveries and
  kills, each ``{"step", "kind", ...}``.
* ``reproduce``: the one-line command that re-runs it (runs that did not pass).
"""

from __future__ import annotations

import subprocess
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from crashpoint.harness.judge.metrics import run_row
from crashpoint.harness.judge.pack_rules import DUPLICATE_RULES, trace_line
from crashpoint.text import bounded

if TYPE_CHECKING:
    from crashpoint.harness.model.results import RunResult

#: Most trace events kept in a stored timeline (the refund pack's longest run has about 60).
TIMELINE_MAX = 400


def _approval(trace: list[dict[str, Any]], status: str | None) -> tuple[float | None, bool]:
    requested = [e for e in trace if e.get("kind") == "approval_requested"]
    decided = [e for e in trace if e.get("kind") in ("approval_granted", "approval_denied")]
    wait = None
    overdue = False
    if decided and decided[-1].get("waited_s") is not None:
        wait = float(decided[-1]["waited_s"])
    for req in requested:
        timeout = req.get("timeout_s")
        if wait is not None and timeout is not None and wait > float(timeout):
            overdue = True
    if status == "waiting_approval" and requested and trace:
        deadline = requested[-1].get("deadline")
        last_at = max((e.get("at") or 0) for e in trace)
        overdue = overdue or (deadline is not None and last_at > float(deadline))
    return wait, overdue


def measures(r: "RunResult") -> dict[str, Any]:
    """The per-run measures stored with a result (see the module docstring), computed from its
    outcome (:func:`crashpoint.harness.judge.verdict.judge` keeps them on the result)."""
    out = r.outcome
    trace = getattr(out, "trace", None) or []  # a target's run has no engine trace
    base = run_row(r)
    cancel = bool(out and any(d.get("kind") == "cancel" for d in getattr(out, "deliveries_log", ())))
    wait, overdue = _approval(trace, r.final_status)
    return {
        "crashed": bool(base["crashed"]), "dup": bool(base["dup"]), "dup_safe": bool(base["dup_safe"]),
        "retry": bool(base["retry"]), "retry_ok": bool(base["retry_ok"]), "comp": bool(base["comp"]),
        "comp_ok": bool(base["comp_ok"]), "golden_points": int(base["golden_points"]),
        "cancel": cancel, "cancel_ok": cancel and r.verdict == "passed",
        "approval_wait_s": wait, "approval_overdue": overdue,
        "retries": sum(1 for e in trace if e.get("kind") == "retry_scheduled"),
        "dup_effect": any(f.rule in DUPLICATE_RULES for f in r.failures),
        "replay_failed": any(f.oracle == "differential" for f in r.failures),
    }


def timeline(r: "RunResult") -> dict[str, Any]:
    """The trace timeline and deliveries of a run (see the module docstring)."""
    out = r.outcome
    if out is None:
        return {"events": [], "deliveries": [], "truncated": 0}
    if not hasattr(out, "trace"):  # a target's run: its deliveries (answers, kills, deploys), its effect calls
        calls = [{"seq": c.seq, "at": None, "kind": "effect",
                  "text": f"{c.effect} key={c.key} {c.outcome} pid={c.pid} {c.thread}@{c.node}"} for c in out.calls]
        cut = max(0, len(calls) - TIMELINE_MAX)
        return {"events": calls[cut:], "deliveries": [dict(d) for d in out.deliveries], "truncated": cut}
    events = [{"seq": e.get("seq"), "at": e.get("at"), "kind": e.get("kind"),
               "text": trace_line(e).split(" ", 2)[2] if trace_line(e).count(" ") >= 2 else ""}
              for e in out.trace]
    cut = max(0, len(events) - TIMELINE_MAX)
    deliveries = [{k: v for k, v in d.items() if k not in ("input", "definition")} for d in out.deliveries_log]
    return {"events": events[cut:], "deliveries": deliveries, "truncated": cut}


def stored_result(r: "RunResult", tags: list[str] | tuple[str, ...] = (), reproduce: str | None = None) -> dict[str, Any]:
    """The result dict to store for ``r``: ``r.to_dict()`` plus ``tags``, ``measures`` and, for a
    run that did not pass, ``timeline`` and ``reproduce``."""
    data = r.to_dict()
    data["tags"] = list(tags)
    data["measures"] = dict(r.measures) if r.measures is not None else measures(r)
    if r.verdict != "passed":
        data["timeline"] = timeline(r)
        if reproduce or r.reproduce:
            data["reproduce"] = reproduce or r.reproduce
    return bounded(data)


def git_commit(folder: Path | str = ".") -> str | None:
    """The commit checked out in ``folder`` (40 hex), or ``None`` outside a git work tree."""
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True, text=True,
                              timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    value = done.stdout.strip()
    return value if done.returncode == 0 and len(value) == 40 else None


class Recorder:
    """Appends one run to a results store as its results arrive.

    Args:
        url: the store's database URL (see :func:`crashpoint.reports.results_store.normalize_url`).
        info: run info, the keys of :data:`crashpoint.reports.results_store.RUN_FIELDS`; ``host`` and
            ``git_commit`` are filled in when missing.
        started_at: the run's start (UTC; default now).
        selection: what the run was asked to do (:func:`crashpoint.harness.run.resume.selection`), kept so
            that ``--resume`` appends only to a run of the same selection.

    This process is the run's writer until :meth:`finish` or :meth:`abandon` (a lock in the store).

    Raises:
        UsageError, StoreError: the store cannot be opened (see :class:`~crashpoint.reports.results_store.ResultStore`).
    """

    def __init__(self, url: str | None, info: dict[str, Any], started_at: datetime | None = None,
                 selection: dict[str, Any] | None = None) -> None:
        from crashpoint.reports.results_store import ResultStore, host_name

        self.store = ResultStore(url)
        info = dict(info)
        info.setdefault("host", host_name())
        if "git_commit" not in info:
            info["git_commit"] = git_commit()
        self.run_id = self.store.begin_run(info, started_at, selection)
        self.count = 0

    @classmethod
    def reopen(cls, url: str | None, run_id: str) -> "Recorder":
        """A recorder that appends to the existing run ``run_id`` (``crashpoint run --resume``), as its writer.

        Raises:
            UsageError, StoreError: the store cannot be opened, or another live process is writing the run.
        """
        from crashpoint.reports.results_store import ResultStore

        self = cls.__new__(cls)
        self.store, self.run_id, self.count = ResultStore(url), run_id, 0
        try:
            self.store.claim_run(run_id)
        except BaseException:
            self.store.close()
            raise
        return self

    def add(self, data: dict[str, Any]) -> None:
        """Store one result dict (see :func:`stored_result`), committed at once."""
        self.store.add_result(self.run_id, data)
        self.count += 1

    def finish(self, document: dict[str, Any] | None = None, complete: bool = True) -> None:
        """Mark the run ended (``complete`` false: runs of its selection were left out, for ``--resume`` to finish);
        keep ``summary``, ``per_case``, ``coverage``, ``vacuity`` and ``wall_s`` of the result ``document`` when
        given."""
        keep = ("summary", "per_case", "coverage", "vacuity", "wall_s", "crashpoint_version")
        self.store.finish_run(self.run_id, {k: document[k] for k in keep if k in document} if document else None,
                              complete=complete)
        self.abandon()

    def abandon(self) -> None:
        """Let go of the run without marking it complete (an interrupted session): it stays incomplete."""
        self.store.release_run(self.run_id)
        self.store.close()
