"""Trace files of target runs (a team's own code), and their replay.

``crashpoint run TARGET.yaml --save-traces DIR`` writes one file per run (``<unit>__<crash point>.trace.json``),
format ``crashpoint.target-trace/1``::

    {"format", "crashpoint_version", "target": {"file", "data"} (the target file as data, so the trace replays even
     where the file changed), "case", "durability", "crash_point" ("none" for a golden run), "engine": {"name",
     "version"}, "verdict", "failures", "error",
     "outcome": {"threads", "calls" (each effect call, in ledger order), "decisions", "crash_points", "fired",
                 "deliveries", "notes", "kills", "kill_log", "workers"}}

``crashpoint replay FILE`` runs the same case of the same target in the same durability mode again, killed at the
same crash point(s), judges it as a sweep would, and compares it with the recorded run: how each thread ended
(status and state values), the effects applied (effect, key, thread, as a multiset: parallel branches may apply
them in another order) and where the kills fired. A replay that differs says where: a racy point (one whose
outcome depends on thread timing) shows here as a divergence, never as a silent pass.
"""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from crashpoint import __version__
from crashpoint.errors import CaseError

FORMAT = "crashpoint.target-trace/1"


def trace_data(result: Any, target: Any) -> dict[str, Any]:
    """The trace document of one target run (``result``: its :class:`~crashpoint.harness.model.results.RunResult`,
    with its outcome) of ``target``."""
    from crashpoint.harness.engines.base import engine_for

    out = result.outcome
    return {"format": FORMAT, "crashpoint_version": __version__,
            "target": {"file": str(target.file) if target.file else None, "data": target.to_data()},
            "case": result.case, "durability": result.variant, "crash_point": result.crash_point or "none",
            "engine": {"name": target.engine, "version": engine_for(target.engine).version()},
            "verdict": str(result.verdict), "failures": [f.to_dict() for f in result.failures], "error": result.error,
            "outcome": {"threads": out.threads, "calls": [dataclasses.asdict(c) for c in out.calls],
                        "decisions": out.decisions, "crash_points": out.crash_points, "fired": out.fired,
                        "deliveries": out.deliveries, "notes": out.notes, "kills": out.kills,
                        "kill_log": out.kill_log, "workers": out.workers}}


def read(path: str | Path) -> dict[str, Any]:
    """A target trace file's document.

    Raises:
        CaseError: not JSON, or not a ``crashpoint.target-trace/1`` document (named with the file).
    """
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CaseError(f"not a readable trace file: {exc}", file=str(path)) from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CaseError(f"not a target trace (format {FORMAT!r} expected)", file=str(path), field="format")
    return data


def is_target_trace(path: str | Path) -> bool:
    """``True`` when ``path`` holds a target trace (its ``format``); ``False`` for anything else, unreadable included
    (the pack trace reader then names what is wrong)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("format") == FORMAT


@dataclass
class TargetReplay:
    """What a replay of a target trace found.

    Attributes:
        verdict: the replayed run's verdict (judged as a sweep judges it). ``recorded``: the trace's.
        differences: how the replayed run differs from the recorded one (empty: the same), each a sentence.
        result: the replayed run's :class:`~crashpoint.harness.model.results.RunResult`.
    """

    verdict: str
    recorded: str
    differences: list[str] = field(default_factory=list)
    result: Any = None

    @property
    def ok(self) -> bool:
        """``True`` when the replay ran as recorded (same ends, effects, crash points) with the same verdict."""
        return not self.differences and self.verdict == self.recorded

    def message(self) -> str:
        """One paragraph for the terminal."""
        if self.ok:
            return f"replay matches the recorded run: verdict {self.verdict}, same ends and effects, kills at the same points"
        lines = [f"replay differs from the recorded run (recorded {self.recorded}, replayed {self.verdict}):"]
        lines += [f"  - {d}" for d in self.differences] or ["  - (only the verdict)"]
        return "\n".join(lines)


def _effects(calls: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    return [(c["effect"], c["key"], c["thread"]) for c in calls if c["outcome"] == "applied"]


def replay(trace: dict[str, Any], workdir: Path | None = None) -> TargetReplay:
    """Run the trace's case again (same target data, durability mode and crash point) and compare (see the module
    docstring).

    Raises:
        CaseError: the trace's target data is not a valid target any more (the engine or an option changed).
    """
    from crashpoint.harness.load.target import Target
    from crashpoint.harness.run.target_sweep import run_one

    target = Target.from_data(trace["target"]["data"], file=trace["target"].get("file"))
    case = target.case(trace["case"])
    point = None if trace["crash_point"] == "none" else trace["crash_point"]
    golden = None
    root = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="crashpoint-replay-"))
    if point is not None:  # a crash run is judged against its golden run, as in the sweep
        golden_result = run_one(target, case, trace["durability"], root / "golden", None, None)
        golden = golden_result.outcome
    result = run_one(target, case, trace["durability"], root / "replay", point, golden)
    recorded = trace["outcome"]
    diffs: list[str] = []
    out = result.outcome
    if out is None:
        diffs.append(f"the replay produced no outcome: {result.error}")
    else:
        mine = {t: (s.get("status"), s.get("values")) for t, s in out.threads.items()}
        theirs = {t: (s.get("status"), s.get("values")) for t, s in recorded["threads"].items()}
        for thread in sorted(set(mine) | set(theirs)):
            if mine.get(thread) != theirs.get(thread):
                diffs.append(f"thread {thread} ended {mine.get(thread, ('missing',))[0]} "
                             f"where the recorded run ended {theirs.get(thread, ('missing',))[0]}"
                             + ("" if (mine.get(thread) or (None,))[0] != (theirs.get(thread) or (None,))[0]
                                else " (its state values differ)"))
        got, want = Counter(_effects([dataclasses.asdict(c) for c in out.calls])), Counter(_effects(recorded["calls"]))
        if got != want:
            diffs.append(f"effects applied differ: recorded {sorted(want.elements(), key=str)}, replayed "
                         f"{sorted(got.elements(), key=str)}")
        if out.fired != recorded["fired"]:
            diffs.append(f"the kills fired at {out.fired}, recorded at {recorded['fired']}")
    return TargetReplay(str(result.verdict), trace["verdict"], diffs, result)


__all__ = ["FORMAT", "trace_data", "read", "is_target_trace", "replay", "TargetReplay"]
