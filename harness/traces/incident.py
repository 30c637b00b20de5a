"""Incidents: turn a recorded failing run (a trace file) into a YAML regression case.

The case keeps what made the run what it was: the workflow, the initial step, the input
actually used (a generated input is written out), the same events and faults (kills, holds,
tool faults: the case model's round trip, :meth:`~crashpoint.harness.load.loader.Case.to_data`,
so nothing the case held is lost); its ``expected`` is the original case's own (the golden expectation, which the failing run broke). It is tagged
``incident``, its ``case_id`` is ``incident_<original>_<short hash of the trace file>``, and its
description names the trace file, the failure, and the one-line command that re-runs it at
the recorded crash point (the case format has no crash point field).

Dropped into a pack's cases folder (the pack that holds its workflow), the file passes
``crashpoint validate``; it fails on the engine that produced the trace and passes on a fixed one.
"""

from __future__ import annotations

import dataclasses
import hashlib
import shlex
import tempfile
from pathlib import Path
from typing import Any, Mapping

import yaml

from crashpoint.errors import CaseError, UsageError
from crashpoint.harness.load.loader import CASE_KEYS, Case
from crashpoint.harness.traces.tracefile import read_trace
from crashpoint.reports.json_report import write_atomic
from crashpoint.text import clip

TAG = "incident"
#: Characters of the failure message (and engine name) kept in the description (the schema allows
#: 10000 for the whole description).
MAX_WHY = 1000


class _Dumper(yaml.SafeDumper):
    """Plain YAML: no anchors or aliases (the loader refuses them), block style, keys in order."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def incident_case(trace: Mapping[str, Any], trace_file: str, digest: str, out: str | None = None) -> dict[str, Any]:
    """The regression case (a mapping in the case format) made from ``trace``.

    Args:
        trace: the trace document (:func:`~crashpoint.harness.traces.tracefile.read_trace`).
        trace_file: the trace file's name as shown in the description.
        digest: hex digest of the trace file (its first 8 characters go into the ``case_id``).
        out: the path the case will be written to (for the command in the description).
    """
    case, run = trace["case"], trace["run"]
    case_id = f"incident_{case['case_id'][:110]}_{digest[:8]}"
    point = trace["crash_point"]
    spec = trace["engine"].get("adapter") or trace["engine"].get("spec")
    engine = spec or f"{trace['engine']['name']} {trace['engine']['version']}"
    why = (run.get("failures") or [{}])[0].get("message") or run.get("error") or f"final status {run.get('status')}"
    why, engine = clip(str(why), MAX_WHY), clip(engine, MAX_WHY)  # an engine's 5 MB message fits no case file
    cmd = reproduce_command(trace, out or case_id + ".yaml")
    where = "in the golden run (no crash)" if point == "none" else f"at crash point {point}"
    verdict = {"failed": "failed", "error": "ended in an error", "unknown": "did not finish (unknown)"}.get(
        run.get("verdict") or "", "was recorded")
    description = (f"Incident from trace {trace_file}: case {case['case_id']} on engine {engine} {verdict} "
                   f"{where}: {why}. Reproduce: {cmd}")
    model = Case.from_data({k: v for k, v in case.items() if k in CASE_KEYS}, path=trace_file)
    return dataclasses.replace(model, case_id=case_id, description=description,
                               tags=(TAG, *(t for t in model.tags if t != TAG))).to_data()


def reproduce_command(trace: Mapping[str, Any], out: str) -> str:
    """The shell command that re-runs the incident case written to ``out`` as the trace's run ran: at
    its crash point, on its engine (``--adapter`` when the trace records one, else ``--engine``); when
    ``out`` is not inside a pack, it first copies the case into the recorded pack's cases folder (a case
    runs with its pack's workflows). Words quoted for a POSIX shell; the ``crashpoint run`` part is
    :func:`crashpoint.harness.judge.verdict.repro_command`'s, the one place a reproduce line is built."""
    from crashpoint.harness.judge.verdict import Invocation, repro_command

    target, point, spec = _in_pack(trace, out), trace["crash_point"], trace["engine"].get("spec")
    adapter = trace["engine"].get("adapter")
    command = repro_command(target, None if point == "none" else point,
                            Invocation(engine=None if adapter else spec, adapter=adapter))
    copy = f"{shlex.join(['cp', out, target])} && " if target != out else ""
    return copy + command


def _in_pack(trace: Mapping[str, Any], out: str) -> str:
    """Where the case runs from: ``out`` when it lies in a pack, else the recorded pack's cases folder."""
    from crashpoint.harness.load.loader import find_pack_dir

    try:
        find_pack_dir(Path(out).absolute().parent)
        return out
    except CaseError:
        pass
    pack_path = (trace.get("pack") or {}).get("path")
    cases = Path(trace["case"].get("file") or "cases/x").parent
    return str(Path(pack_path) / cases / Path(out).name) if pack_path else out


def render(data: Mapping[str, Any], trace_file: str) -> str:
    """The case as YAML text, with a header comment naming the trace file."""
    body = yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100,
                     default_flow_style=False)
    return f"# Regression case made by `crashpoint incident {trace_file}`.\n{body}"


def _check(text: str, trace: Mapping[str, Any]) -> None:
    """Load the produced case like ``crashpoint validate`` would (with the recorded pack when it is there)."""
    from crashpoint.harness.load.loader import _load_checked, load_case, load_pack

    with tempfile.TemporaryDirectory(prefix="crashpoint-incident-") as tmp:
        path = Path(tmp) / "case.yaml"
        path.write_text(text, encoding="utf-8")
        pack_path = (trace.get("pack") or {}).get("path")
        if pack_path and (Path(pack_path) / "pack.yaml").is_file():
            pack = load_pack(Path(pack_path))
            if pack.name == trace["pack"]["name"] and trace["case"]["workflow"] in pack.workflows:
                load_case(path, pack)
                return
        _load_checked(path, "case", "case")


def make_incident(trace_path: str | Path, out: str | Path | None = None, *, allow_passed: bool = False) -> Path:
    """Write the regression case of the trace file ``trace_path``; returns the path written.

    ``out`` defaults to ``./<case_id>.yaml``. An existing file is never overwritten.

    Raises:
        CaseError: the trace file is malformed.
        UsageError: the recorded run passed (unless ``allow_passed``); ``out`` exists, or its folder does not.
    """
    trace_path = Path(trace_path)
    trace = read_trace(trace_path)
    verdict = trace["run"].get("verdict")
    if verdict == "passed" and not allow_passed:
        raise UsageError(f"{trace_path}: the recorded run passed; an incident case is made from a failing run")
    digest = hashlib.sha256(trace_path.read_bytes()).hexdigest()
    case_id = incident_case(trace, trace_path.name, digest)["case_id"]
    target = Path(out) if out is not None else Path(f"{case_id}.yaml")
    if target.exists() or target.is_symlink():
        raise UsageError(f"{target}: already exists; not overwritten (give another --out FILE)")
    from crashpoint.paths import output_file

    output_file(target, "--out")  # a new file in a folder where one can be made, else exit 2 now
    data = incident_case(trace, trace_path.name, digest, str(target))
    text = render(data, trace_path.name)
    try:
        _check(text, trace)
    except CaseError as exc:  # a bug of this module, not of the input: say so
        raise CaseError(f"the incident case made from this trace does not validate: {exc}",
                        file=str(trace_path)) from exc
    write_atomic(target, text)
    return target
