"""``crashpoint run --resume``: finish an interrupted, recorded sweep without repeating finished runs.

A recorded sweep (``--results-db``) commits each result the moment its run finishes and stamps the
run complete at the end (:mod:`crashpoint.reports.results_store`), so a crashpoint process killed at any
point (even by SIGKILL) leaves every finished result in the store and the run ``complete = false``.
``--resume`` then:

1. finds the latest incomplete run of the same pack (name and version), engine, crash setting
   (``--crash`` and ``--crash-mode``) and source ``cli`` in the store whose recorded
   :func:`selection` is exactly this one: the same case files with the same contents (by SHA-256),
   the same ``--crash-point`` list, the same engine version, the same pack version and contents.
   None: the sweep starts a new run, and says which near run differed and how;
2. becomes that run's writer (a lock in the store): a run another live process is still writing is
   refused (exit 2), never written twice;
3. skips every ``(case, crash point)`` pair that run already holds; a case whose runs are all
   recorded is not run at all; a case with runs left re-runs its golden run as their reference
   (not recorded again, unless it does not pass now: then it is a stored result like any other);
4. appends the remaining results to the same run and marks it complete, with the summary of every
   result (restored ones included), so the stored run reads as an uninterrupted sweep would.

Only ``--crash every`` and ``--crash none`` resume (``recovery`` pairs are derived from the outcomes
of the single kills, which the store does not keep).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from crashpoint.errors import UsageError
from crashpoint.harness.run.modes import crash_label
from crashpoint.harness.load.loader import Case, Pack
from crashpoint.harness.model.rules import Finding
from crashpoint.harness.model.results import RunResult, SweepResult

#: Crash modes ``--resume`` supports.
RESUMABLE = ("sampled", "every", "none")

Pair = tuple[str, "str | None"]


class StoredResult(RunResult):
    """A result restored from the store: its verdict, findings and JSON form as recorded.

    ``outcome`` is ``None`` (the engine's files are gone); ``measures`` are the recorded ones, so it
    counts in the metrics as it did when it ran; ``to_dict()`` returns the recorded result document fields.
    """

    def __init__(self, data: dict[str, Any]) -> None:
        point = data.get("crash_point")
        super().__init__(case_id=str(data["case_id"]), crash_point=None if point in (None, "none") else str(point),
                         verdict=str(data["verdict"]),
                         failures=[Finding.from_dict(f) for f in data.get("failures") or []],
                         error=data.get("error"), wall_s=float(data.get("wall_s") or 0.0),
                         vacuity=list(data.get("vacuity") or []),
                         measures=data["measures"] if isinstance(data.get("measures"), dict) else None)
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        """The recorded result dict (without the store's own ``tags``/``measures``/``timeline``)."""
        keep = {k: v for k, v in self.data.items() if k not in ("tags", "measures", "timeline", "reproduce")}
        return super().to_dict() | keep


@dataclass
class ResumePlan:
    """What is left of an interrupted run.

    Attributes:
        run_id: the incomplete run to append to, or ``None`` (nothing to resume: start a new run).
        stored: its recorded results of the selected cases, restored, one per pair, in order of arrival.
        skip: ``(case_id, crash_point)`` pairs already recorded (``None``: the golden run) -> their stored verdict.
        todo: the units (case ids; a target's ``CASE[MODE]``) that still have runs to do, in the selection's order.
        points: crash points of the units with nothing left to do (from their recorded kills).
        mismatch: when ``run_id`` is ``None``: why the latest incomplete run of this pack and engine was
            not taken (its selection differs; see :func:`differences`), else ``None``.
    """

    run_id: str | None
    stored: list[StoredResult] = field(default_factory=list)
    skip: dict[Pair, str] = field(default_factory=dict)
    todo: list[str] = field(default_factory=list)
    points: dict[str, list[str]] = field(default_factory=dict)
    mismatch: str | None = None


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def selection(pack: Pack, cases: Sequence[Case], adapter: Any, crash: str, only: Sequence[str] = (),
              crash_mode: str = "kill") -> dict[str, Any]:
    """What a sweep is asked to do, as recorded with its run: ``{"cases": {case_id: sha256 of the case
    file}, "crash_points": [the --crash-point ids, sorted; [] for all], "crash", "engine",
    "engine_version", "pack", "pack_version", "pack_digest" (sha256 of pack.yaml and the workflows)}``.

    Two sweeps with equal selections do the same runs on the same inputs, so their results may be one run.
    """
    def case_digest(case: Case) -> str:
        try:
            return _digest(Path(case.path).read_bytes())
        except (OSError, TypeError):
            return _digest(json.dumps([case.events, case.expected, case.faults, case.input], sort_keys=True,
                                      default=str).encode())

    try:
        manifest = (Path(pack.root) / "pack.yaml").read_bytes()
    except (OSError, TypeError):
        manifest = b""
    return {"cases": {c.case_id: case_digest(c) for c in cases}, "crash_points": sorted(set(only)),
            "crash": crash_label(crash, crash_mode), "engine": adapter.name, "engine_version": adapter.version(),
            "pack": pack.name, "pack_version": pack.version,
            "pack_digest": _digest(manifest + json.dumps(pack.workflows, sort_keys=True, default=str).encode())}


def differences(recorded: dict[str, Any] | None, wanted: dict[str, Any]) -> list[str]:
    """How a run's recorded selection differs from ``wanted`` (``[]``: the same), in words."""
    if not recorded:
        return ["it has no recorded selection (an older crashpoint recorded it)"]
    out = []
    old, new = recorded.get("cases") or {}, wanted["cases"]
    if set(old) - set(new):
        out.append(f"it has case(s) not selected now: {', '.join(sorted(set(old) - set(new))[:5])}")
    if set(new) - set(old):
        out.append(f"case(s) selected now are not in it: {', '.join(sorted(set(new) - set(old))[:5])}")
    edited = sorted(c for c in set(old) & set(new) if old[c] != new[c])
    if edited:
        out.append(f"case file(s) edited since: {', '.join(edited[:5])}")
    for key, what in (("crash_points", "--crash-point list"), ("crash", "crash setting"),
                      ("engine", "engine"), ("engine_version", "engine version"), ("pack_version", "pack version"),
                      ("pack_digest", "pack contents (pack.yaml or a workflow)"), ("points", "--points setting")):
        if key == "points" and (key not in recorded or key not in wanted):
            continue  # recorded before --points was (a run of the classes default then), or asked without it
        if recorded.get(key) != wanted.get(key):
            out.append(f"{what} {recorded.get(key)!r} then, {wanted.get(key)!r} now" if key != "pack_digest"
                       else f"{what} changed since")
    return out


def find_incomplete(store: Any, info: dict[str, Any], wanted: dict[str, Any] | None = None) -> str | None:
    """The id of the most recently started incomplete run whose ``pack``, ``pack_version``,
    ``engine``, ``crash`` and ``source`` equal ``info``'s and, when ``wanted`` is given, whose recorded
    :func:`selection` equals it; or ``None``."""
    keys = ("pack", "pack_version", "engine", "crash", "source")
    for run in reversed(store.runs()):
        if not run["complete"] and all(str(run.get(k)) == str(info.get(k)) for k in keys):
            if wanted is None:
                return run["run_id"]
            key = store.run_key(run["run_id"])
            if not differences(key["selection"] if key else None, wanted):
                return run["run_id"]
    return None


def _case_done(unit: str, crash: str, only: Sequence[str], recorded: dict[Pair, StoredResult],
               subject: Any) -> bool:
    golden = recorded.get((unit, None))
    if golden is None:
        return False
    if crash == "none":
        return True
    if only:
        return all((unit, p) in recorded for p in only)
    passed = int((golden.data.get("measures") or {}).get("golden_points") or 0)
    mine = [p for (cid, p) in recorded if cid == unit and p is not None]
    if crash != "sampled":
        return len(mine) >= passed
    # sampled: the single kills, then the sampled runs (a shortfall re-runs the unit, which skips what is stored)
    extras = [p for p in mine if " >> " in p or " || " in p]
    return len(mine) - len(extras) >= passed and len(extras) >= subject.sampled_count(passed)


def plan(url: str | None, subject: Any, crash: str, only: Sequence[str] = (), crash_mode: str = "kill",
         points: str | None = None) -> ResumePlan:
    """Read the store at ``url`` and plan the rest of the latest matching incomplete run of ``subject`` (a
    :class:`~crashpoint.harness.run.sweep.Subject`: a pack's cases or a target's): same pack (or target), engine,
    ``--crash`` and ``--crash-mode`` (stored together, see :func:`~crashpoint.harness.run.modes.crash_label`), and
    the same :meth:`~crashpoint.harness.run.sweep.Subject.selection`. ``todo`` holds the units with runs left.

    Raises:
        UsageError: ``crash`` is not in :data:`RESUMABLE`, or no store there. StoreError: the store cannot be read.
    """
    if crash not in RESUMABLE:
        raise UsageError(f"--resume works with --crash sampled, every or none, not {crash!r} (recovery pairs come from "
                         "the single kills' outcomes, which the store does not keep)")
    from crashpoint.reports.results_store import ResultStore

    store = ResultStore(url or None)
    wanted = subject.selection(crash, only, crash_mode, points)
    mine = subject.store_info()
    info = {"pack": mine["pack"], "pack_version": mine["pack_version"], "engine": mine["engine"],
            "crash": crash_label(crash, crash_mode), "source": "cli"}
    try:
        run_id = find_incomplete(store, info, wanted)
        rows = store.results([run_id]) if run_id else []
        near = find_incomplete(store, info) if run_id is None else None
        mismatch = None
        if near is not None:
            key = store.run_key(near)
            mismatch = f"run {near} differs: " + "; ".join(differences(key["selection"] if key else None, wanted))
    finally:
        store.close()
    units = subject.units()
    if run_id is None:
        return ResumePlan(None, todo=list(units), mismatch=mismatch)
    recorded: dict[Pair, StoredResult] = {}
    for row in rows:
        restored = StoredResult(row["data"])
        pair = (restored.case_id, restored.crash_point)
        if restored.case_id in units and pair not in recorded:
            recorded[pair] = restored
    todo = [u for u in units if not _case_done(u, crash, only, recorded, subject)]
    points = {u: [p for (cid, p) in recorded if cid == u and p is not None] for u in units if u not in todo}
    return ResumePlan(run_id, list(recorded.values()), {k: r.verdict for k, r in recorded.items()}, todo, points)


def merge(result: SweepResult, resume: ResumePlan, units: Sequence[str]) -> SweepResult:
    """``result`` (the runs done now) plus the restored ones, ordered as an uninterrupted sweep orders
    them: every golden run in unit order, then the kills of each unit in crash point order. ``units``: every unit
    of the selection, in order (the subject's, before :meth:`~crashpoint.harness.run.sweep.Subject.narrowed`)."""
    points = {**resume.points, **result.crash_points}
    index = {u: i for i, u in enumerate(units)}

    def order(r: RunResult) -> tuple[int, int, int]:
        where = points.get(r.case_id, [])
        rank = where.index(r.crash_point) if r.crash_point in where else len(where)
        return (r.crash_point is not None, index.get(r.case_id, len(index)), rank)

    merged = sorted(list(resume.stored) + list(result.results), key=order)
    return dataclasses.replace(result, results=merged, crash_points={u: points.get(u, []) for u in units})


def reopen(url: str | None, run_id: str, subject: Any) -> Any:
    """A :class:`~crashpoint.harness.run.store_recorder.SweepRecorder` appending to ``run_id`` of ``subject``, as its
    writer.

    Raises:
        UsageError: the store cannot be opened, or another live process is writing the run.
    """
    from crashpoint.harness.run.store_recorder import SweepRecorder

    return SweepRecorder(url or "", subject, "", run_id=run_id)
