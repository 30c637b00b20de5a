"""Trace files: one run kept as a self-contained JSON file (format ``crashpoint.trace/1``).

A trace file holds everything needed to look at a run again without its folder, and to
re-drive an engine through it (:mod:`crashpoint.harness.traces.replay`) or turn it into a
regression case (:mod:`crashpoint.harness.traces.incident`)::

    {"format": "crashpoint.trace/1", "crashpoint_version", "created_at",
     "case": {"case_id", "file", "description", "workflow", "initial_step", "input" (as used),
              "input_generated", "tags", "events", "faults", "expected"},   # Case.to_data() + file, input
     "pack": {"name", "version", "path"}, "workflow": {...definition data...},
     "engine": {"name", "version", "spec", "adapter"}, "crash_point": "none" | ID | "A >> B",
     "run": {"workflow_id", "status", "stop_reason", "crash_fired", "kills", "workers",
             "verdict", "failures", "error", "notes"},
     "deliveries": [{"step", "kind", ...}],   # RunOutcome.deliveries_log
     "calls": [{"seq", "tool", "args", "idempotency_key", "outcome", "retryable", "result", "error", "at", ...}],
     "human_decisions": [...], "journal": [{"seq", "at", "kind", ...}]}

The schema is ``scenarios/schemas/trace.schema.json``. :func:`read_trace` checks a file
against it and raises :class:`~crashpoint.errors.CaseError` naming the file, the line and
the field of the first problem.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import re
from datetime import datetime, timezone
from json.decoder import scanstring
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from crashpoint import __version__
from crashpoint.errors import CaseError
from crashpoint.harness.model.outcomes import RunOutcome
from crashpoint.harness.load.loader import MAX_DEPTH, Case, Locator, Pack, validate
from crashpoint.reports.json_report import render, write_atomic

FORMAT = "crashpoint.trace/1"
#: Suffix of trace file names.
SUFFIX = ".trace.json"
#: Largest trace file read, bytes (64 MiB): a trace is data the harness wrote, but not unbounded.
MAX_TRACE_BYTES = 64 << 20


def _display(path: Path | None) -> str | None:
    """``path`` relative to the working directory when inside it (portable in a repository), else as is."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def trace_data(outcome: RunOutcome, case: Case, pack: Pack, engine: Any, *, verdict: str | None = None,
               failures: Iterable[Any] = (), error: str | None = None) -> dict[str, Any]:
    """The trace document of one run (see the module docstring).

    Args:
        outcome: the run's :class:`~crashpoint.harness.run.pack_driver.RunOutcome`.
        case, pack: what was run.
        engine: the adapter (``name``, ``version()``, ``engine``, its ``MODULE:CLASS``, when it has
            one, and ``adapter_spec``, the ``--adapter MODULE:ATTR`` it was loaded from, when it was) or a
            mapping ``{"name", "version", "spec", "adapter"?}``.
        verdict, failures, error: the run's verdict and oracle findings, when judged
            (:class:`~crashpoint.harness.judge.pack_rules.Failure` objects or their dicts).
    """
    if isinstance(engine, Mapping):
        eng = {"name": str(engine["name"]), "version": str(engine["version"]), "spec": engine.get("spec"),
               "adapter": engine.get("adapter")}
    else:
        spec = getattr(engine, "engine", None)
        default = spec in (None, "crashpoint.engine.engine:Engine")
        eng = {"name": engine.name, "version": engine.version(), "spec": None if default else spec,
               "adapter": getattr(engine, "adapter_spec", None)}
    start = next((d for d in outcome.deliveries_log if d["kind"] == "start"), None)
    used_input = start["input"] if start else case.input
    try:
        case_file = str(case.path.resolve().relative_to(pack.root.resolve()))
    except ValueError:
        case_file = _display(case.path)
    return {
        "format": FORMAT,
        "crashpoint_version": __version__,
        "created_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "case": case.to_data() | {"file": case_file, "input": used_input, "input_generated": not case.input},
        "pack": {"name": pack.name, "version": pack.version, "path": _display(pack.root)},
        "workflow": pack.workflows[case.workflow],
        "engine": eng,
        "crash_point": outcome.crash_point or "none",
        "run": {"workflow_id": outcome.workflow_id, "status": outcome.status, "stop_reason": outcome.stop_reason,
                "crash_fired": outcome.crash_fired, "kills": outcome.kills, "workers": outcome.workers,
                "verdict": verdict,
                "failures": [f if isinstance(f, Mapping) else f.to_dict() for f in failures],
                "error": error, "notes": list(outcome.notes)},
        "deliveries": outcome.deliveries_log,
        "calls": [c | {"duration_s": d} if d else c
                  for c, d in zip(outcome.calls, call_durations(case.events, outcome.calls, case.faults))],
        "human_decisions": outcome.decisions,
        "journal": outcome.trace,
    }


def call_durations(events: Iterable[Mapping[str, Any]], calls: Sequence[Mapping[str, Any]],
                   faults: Iterable[Mapping[str, Any]] = ()) -> list[float | None]:
    """Virtual seconds each recorded call took (``None``: no time), from the case's tool script.

    The fake world gives each tool's scripted outcomes (the case's tool events, with its faults on tool
    calls placed at their call: ``driver.tool_script``) to its calls in order, one per call that is not
    answered from an earlier call with its key (``duplicate``); an entry with ``seconds`` (a slow call)
    moves the clock by that much during the call. The ledger does not keep that duration, and a replay
    needs it (a slow call can run a phase out of time).
    """
    from crashpoint.harness.faults.kinds import injection
    from crashpoint.harness.run.pack_driver import tool_script

    scripts: dict[str, list[float | None]] = {}
    for entry in tool_script(list(events), injection(faults).tool_faults):
        scripts.setdefault(entry["tool"], []).append(entry.get("seconds"))
    out: list[float | None] = []
    for call in calls:
        queue = scripts.get(call["tool"])
        out.append(queue.pop(0) if queue and call["outcome"] != "duplicate" else None)
    return out


def write_trace(path: str | Path, outcome: RunOutcome, case: Case, pack: Pack, engine: Any, *,
                verdict: str | None = None, failures: Iterable[Any] = (), error: str | None = None) -> Path:
    """Write the trace file of one run to ``path``, atomically (see :func:`trace_data` for the arguments).

    Returns ``path``. Raises ``OSError`` when the folder is not writable.
    """
    path = Path(path)
    write_atomic(path, render(trace_data(outcome, case, pack, engine, verdict=verdict, failures=failures,
                                         error=error)))
    return path


def trace_name(case_id: str, crash_point: str | None) -> str:
    """``<case_id>__<crash point sanitized>.trace.json`` (``none`` for a golden run).

    Characters other than letters, digits, ``_``, ``.`` and ``-`` become ``_``; a long point is cut
    and suffixed with a short hash of the point so names stay unique and under 255 bytes.
    """
    point = crash_point or "none"
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", point)
    if len(safe) > 100:
        safe = safe[:90] + "-" + hashlib.sha1(point.encode()).hexdigest()[:8]
    return f"{case_id}__{safe}{SUFFIX}"


def save_traces(folder: str | Path, results: Sequence[Any], cases: Sequence[Case], pack: Pack,
                engine: Any) -> tuple[list[Path], list[str]]:
    """Write one trace file per run of ``results`` (:class:`~crashpoint.harness.run.sweep.RunResult`) into ``folder``.

    Returns ``(written paths, skipped runs as "CASE @ POINT: why")``: a run that ended before the
    harness could read it back (an ``error`` raised by the engine, a worker timeout) has no outcome
    to keep. Two points whose sanitized names collide get the second name suffixed with a hash.

    Raises:
        UsageError: a trace's name in ``folder`` is taken by a FIFO, device, socket or folder (never
            written through or replaced; ``crashpoint run`` refuses such a folder before it sweeps).
    """
    from crashpoint.paths import check_written

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    by_id = {c.case_id: c for c in cases}
    written: list[Path] = []
    skipped: list[str] = []
    used: set[str] = set()
    for r in results:
        if r.outcome is None:
            skipped.append(f"{r.case_id} @ {r.crash_point or 'none'}: no outcome to keep ({r.verdict}: {r.error})")
            continue
        name = trace_name(r.case_id, r.crash_point)
        if name in used:
            name = name.removesuffix(SUFFIX) + "-" + hashlib.sha1(str(r.crash_point).encode()).hexdigest()[:8] + SUFFIX
        used.add(name)
        check_written(folder / name, "--save-traces")
        written.append(write_trace(folder / name, r.outcome, by_id[r.case_id], pack, engine, verdict=r.verdict,
                                   failures=r.failures, error=r.error))
    return written, skipped


def save_sweep_traces(folder: str | Path, result: Any, subject: Any) -> tuple[list[Path], list[str]]:
    """``--save-traces``: one trace file per run of a sweep's ``result``, a pack's (:func:`save_traces`, replayed
    decision by decision) or a target's (:func:`crashpoint.harness.traces.target_trace.trace_data`, replayed by
    running the same schedule again); ``subject`` is the sweep's
    :class:`~crashpoint.harness.run.sweep.Subject`. Returns and raises as :func:`save_traces`."""
    if result.kind == "pack":
        return save_traces(folder, result.results, result.cases, result.pack, subject.driver.adapter)
    from crashpoint.harness.traces.target_trace import trace_data
    from crashpoint.paths import check_written

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    skipped: list[str] = []
    used: set[str] = set()
    for r in result.results:
        if r.outcome is None:
            skipped.append(f"{r.case_id} @ {r.crash_point or 'none'}: no outcome to keep ({r.verdict}: {r.error})")
            continue
        name = trace_name(r.case_id + (f"-try{r.repeat}" if r.repeat > 1 else ""), r.crash_point)
        if name in used:
            name = name.removesuffix(SUFFIX) + "-" + hashlib.sha1(str(r.crash_point).encode()).hexdigest()[:8] + SUFFIX
        used.add(name)
        path = folder / name
        check_written(path, "--save-traces")
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(trace_data(r, result.target), indent=1, default=str))
        tmp.replace(path)
        written.append(path)
    return written, skipped


# --------------------------------------------------------------------------- reading

def _json_locator(text: str) -> Locator:
    """Line numbers of every value of the (valid) JSON document ``text``: a mapping entry's line is
    its key's line, a list item's line is where it starts (the shape of the loader's ``Locator``)."""
    newlines = [m.start() for m in re.finditer("\n", text)]
    ws = re.compile(r"[ \t\n\r]*")
    scalar = re.compile(r'-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?|true|false|null')
    lines: dict[tuple[str | int, ...], int] = {}

    def line(pos: int) -> int:
        return bisect.bisect_right(newlines, pos - 1) + 1

    def value(i: int, path: tuple[str | int, ...]) -> int:
        i = ws.match(text, i).end()
        lines.setdefault(path, line(i))
        c = text[i]
        if c == '"':
            return scanstring(text, i + 1)[1]
        if c in "{[":
            close, n = ("}" if c == "{" else "]"), 0
            i = ws.match(text, i + 1).end()
            while text[i] != close:
                if c == "{":
                    key, j = scanstring(text, i + 1)
                    lines[path + (key,)] = line(i)
                    j = ws.match(text, j).end() + 1  # the ':'
                    i = value(j, path + (key,))
                else:
                    i = value(i, path + (n,))
                    n += 1
                i = ws.match(text, i).end()
                if text[i] == ",":
                    i = ws.match(text, i + 1).end()
            return i + 1
        return scalar.match(text, i).end()

    try:
        value(0, ())
    except (IndexError, AttributeError, ValueError, RecursionError):  # only valid JSON gets here; be safe
        pass
    return Locator(lines)


def _depth(value: Any, limit: int) -> int:
    stack, deepest = [(value, 1)], 0
    while stack:
        node, d = stack.pop()
        if isinstance(node, (dict, list)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((v, d + 1) for v in (node.values() if isinstance(node, dict) else node))
    return deepest


def read_trace(path: str | Path) -> dict[str, Any]:
    """Read and check one trace file; returns the document.

    Raises:
        CaseError: naming the file, the line and the field: the file is missing, not a regular
            file, larger than :data:`MAX_TRACE_BYTES` or not UTF-8; not JSON (the line of the JSON
            syntax error); not an object; the ``format`` tag is missing or not ``crashpoint.trace/1``;
            a field is missing or has the wrong type (``scenarios/schemas/trace.schema.json``); the
            deliveries do not begin with the start request (step 0) or go back in steps; the
            workflow definition is not one the engine can load.
    """
    path = Path(path)
    file = str(path)
    if not path.exists():
        raise CaseError("trace file not found", file=file)
    if not path.is_file():
        raise CaseError("not a regular file", file=file)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_TRACE_BYTES + 1)
    except OSError as exc:
        raise CaseError(f"cannot read file: {exc.strerror or exc}", file=file) from exc
    if len(raw) > MAX_TRACE_BYTES:
        raise CaseError(f"file is larger than {MAX_TRACE_BYTES} bytes; not a trace file", file=file, line=1)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CaseError(f"not UTF-8 (byte 0x{raw[exc.start]:02x}); not a trace file", file=file,
                        line=raw.count(b"\n", 0, exc.start) + 1) from exc
    try:
        data = json.loads(text, parse_constant=lambda name: _reject_constant(name))
    except json.JSONDecodeError as exc:
        raise CaseError(f"not JSON: {exc.msg} (column {exc.colno})", file=file, line=exc.lineno) from exc
    except ValueError as exc:
        raise CaseError(f"not JSON: {exc}", file=file) from exc
    except RecursionError:
        raise CaseError(f"not a trace file: nesting deeper than {MAX_DEPTH} levels", file=file) from None
    if not isinstance(data, dict):
        raise CaseError(f"not a trace file: the top level is a JSON {type(data).__name__}, not an object",
                        file=file, line=1)
    locator = _json_locator(text)
    if "format" not in data:
        raise CaseError(f"missing required field 'format'; a trace file starts with "
                        f'{{"format": "{FORMAT}", ...}}', file=file, line=1, field="format")
    if data["format"] != FORMAT:
        raise CaseError(f"format is {data['format']!r}, expected {FORMAT!r} (not a crashpoint trace file, or "
                        "one of another version)", file=file, line=locator.line(("format",)), field="format")
    if _depth(data, MAX_DEPTH * 2) > MAX_DEPTH * 2:
        raise CaseError(f"nesting deeper than {MAX_DEPTH * 2} levels", file=file, line=1)
    validate(data, "trace", path, locator)

    def fail(message: str, at: tuple[str | int, ...]) -> None:
        from crashpoint.harness.load.loader import dotted

        raise CaseError(message, file=file, line=locator.line(at), field=dotted(at))

    deliveries = data["deliveries"]
    if not deliveries or deliveries[0]["kind"] != "start" or deliveries[0]["step"] != 0:
        fail("the deliveries must begin with the start request (kind start, step 0)", ("deliveries",))
    for i, (a, b) in enumerate(zip(deliveries, deliveries[1:])):
        if b["step"] < a["step"]:
            fail(f"step {b['step']} comes after step {a['step']}; deliveries are in order",
                 ("deliveries", i + 1, "step"))
    if data["workflow"]["workflow"] != data["case"]["workflow"]:
        fail(f"the workflow definition is {data['workflow']['workflow']!r} but the case ran "
             f"{data['case']['workflow']!r}", ("workflow", "workflow"))
    from crashpoint.engine.definition import WorkflowDefinition

    try:
        WorkflowDefinition.from_dict(data["workflow"])
    except Exception as exc:  # the engine's own message, whatever it raises
        fail(f"the workflow definition cannot be loaded: {type(exc).__name__}: {exc}", ("workflow",))
    return data


def _reject_constant(name: str) -> None:
    raise ValueError(f"{name} is not a JSON number")
