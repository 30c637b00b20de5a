"""What every target worker process does the same way, whatever its engine: take the target driver's
arguments (:func:`worker_parser`), read ``target.json`` and put the target's ``pythonpath`` first
(:func:`open_run`), build the crash probe (:func:`worker_probe`), import the team's objects, patch effects
named by dotted path, append to the run's logs across a SIGKILL, meet at a barrier.

Imports no engine (each engine's worker, ``harness/engines/NAME_worker.py``, imports its own; see
:mod:`crashpoint.harness.engines.base` for what a worker module provides).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import importlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import crashpoint.api as effect_api

SUBMITTED_FILE = "submitted.log"
PIDS_FILE = "pids.log"
TARGET_FILE = "target.json"
THREADS_FILE = "threads.json"
#: Appended (one JSON line ``{"module", "name", "effect", "path"}``) by a worker for each global of the team's code
#: that still holds an ``effects:`` entry's original function once it is wrapped (:func:`patch_effects`).
UNWRAPPED_FILE = "unwrapped-effects.log"
#: Appended (``PID``) by a process that left a rendezvous alone: its duplicate never overlapped with the other.
RENDEZVOUS_MISSED_FILE = "rendezvous.missed"
#: Appended (one JSON line ``{"pid", "thread", "error"}``) by a worker each time an invoke raises: ``threads.json``,
#: replaced by each process of a duplicated request, keeps only the last one's report.
INVOKE_ERRORS_FILE = "invoke-errors.log"
#: Wall seconds a worker waits at a barrier for the others before it goes on alone.
BARRIER_LIMIT_S = 30.0
#: Exit code of a worker asked for something the installed engine release does not have (a durability mode).
UNSUPPORTED_RC = 4
#: The probe spec the target driver passes for crashpoint's own probe (else ``module:factory`` of another).
OWN_PROBE = ":probe"


def worker_parser(prog: str, durability: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The command line every target worker takes from the target driver (an engine's worker adds its own
    options to it): ``--run-dir`` (the run folder), ``--probe`` / ``--probe-arg`` (see :func:`worker_probe`),
    ``--durability`` (one of ``durability``; any word when ``None``, the worker judging it), ``--phase``
    (``start``, ``recover`` or ``answer``), ``--duplicate`` (a second delivery of the start request),
    ``--barrier N`` (wait for N workers first), ``--entry`` (the target's entry point, read from
    ``target.json``; named so that a warm zygote imports its module before forking), ``--resubmit``
    (repeatable: a workflow or thread whose start was lost), ``--version`` (a deployed version of the code: the
    engine's worker runs the target's ``versions[NAME]`` entry, or the version where its engine keeps them:
    :meth:`~crashpoint.harness.engines.base.Engine.versions`)."""
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--probe", required=True)
    parser.add_argument("--probe-arg", default="")
    parser.add_argument("--durability", choices=durability, default="sync")
    parser.add_argument("--phase", choices=("start", "recover", "answer"), required=True)
    parser.add_argument("--duplicate", action="store_true",
                        help="this process is a second delivery of the start request (it ignores submitted.log)")
    parser.add_argument("--barrier", type=int, default=0, metavar="N",
                        help="wait until N workers of this run reach the barrier before starting (a race)")
    parser.add_argument("--entry", help="the target's entry point (read from target.json; named here so that a warm "
                                        "zygote imports its module before forking)")
    parser.add_argument("--resubmit", action="append", default=[],
                        help="a workflow or thread whose start was lost: the caller submits it again")
    parser.add_argument("--version", default=None,
                        help="run this deployed version of the code (the target's versions, or its engine's)")
    parser.add_argument("--answers-to-come", action="append", default=[], metavar="THREAD",
                        help="a thread whose humans still have answers to give (repeatable): a deadline it waits on "
                             "runs in real time with time compressed (see compressed_s)")
    return parser


#: With time compressed (an engine's ``time_scale`` option), a durable timer's or sleep's first second runs as written
#: and the rest :data:`TIME_SCALE` times faster: 40 s, 10 min and 3 days of the team's time take about 1 s, 1 s and
#: 1.26 s of the run's, a timer of a second or less (a retry's backoff) is left alone, and longer timers still fire in
#: the order of their lengths.
REAL_FIRST_S = 1.0
#: The default ``time_scale`` of an engine that compresses time (``1``: time runs as written).
TIME_SCALE = 1_000_000.0


def compressed_s(seconds: float, scale: float) -> float:
    """The real seconds a durable timer or sleep of ``seconds`` (the team's time) takes with time compressed
    ``scale`` times (:data:`REAL_FIRST_S` as written, the rest ``scale`` times faster); ``seconds`` itself when
    ``scale`` is 1 or less."""
    if scale <= 1 or seconds <= REAL_FIRST_S:
        return seconds
    return REAL_FIRST_S + (seconds - REAL_FIRST_S) / scale


def deployed(target: dict[str, Any], version: str | None) -> dict[str, Any]:
    """``target`` with its ``entry`` replaced by ``versions[version]`` (the code a deploy put in place); as it is
    when ``version`` is ``None``.

    Raises:
        KeyError: the target has no such version.
    """
    return target if not version else {**target, "entry": target["versions"][version]}


def worker_probe(spec: str, arg: str) -> Callable[[str], None]:
    """The crash probe of a worker: crashpoint's own (:func:`crashpoint.harness.process.crashpoints.probe`) for a
    ``spec`` ending in ``:probe``, else ``spec``'s factory (``module:attr``) called with ``arg``.

    Raises:
        ImportError / AttributeError: ``spec`` names nothing.
    """
    from crashpoint.harness.process.crashpoints import probe

    return probe(arg) if spec.endswith(OWN_PROBE) else load_object(spec)(arg)


def load_object(spec: str) -> Any:
    """Import ``module:attr`` (``attr`` may be dotted).

    Raises:
        ImportError / AttributeError: it names nothing.
    """
    module, _, attr = spec.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def patch_effects(effects: list[dict[str, Any]], team: Sequence[str] | None = None,
                  run_dir: Path | None = None) -> list[dict[str, str]]:
    """Wrap each ``{"path": "module:attr", "name"?, "key"?, "key_reuse"?}`` as a crashpoint effect, in its module
    (callers that imported the function by name before this ran keep the original: name it where it is used).

    Args:
        team: the team's folders (a target's ``pythonpath``; the working directory is added): when given, the team's
            modules whose globals still hold an original are looked for (:func:`held_originals`). ``None``: not.
        run_dir: the run's folder: what is found is appended to ``RUN_DIR/``:data:`UNWRAPPED_FILE`, for the run's
            verdict (:func:`unwrapped_effects`).

    Returns:
        ``[{"module", "name", "effect", "path"}]``: each global of the team's code that holds an entry's original.
    """
    originals: dict[int, tuple[Any, str, str]] = {}
    for spec in effects:
        module, _, attr = spec["path"].partition(":")
        owner: Any = importlib.import_module(module)
        *parents, leaf = attr.split(".")
        for part in parents:
            owner = getattr(owner, part)
        original, name = getattr(owner, leaf), spec.get("name") or leaf
        setattr(owner, leaf, effect_api.wrap(original, name, spec.get("key"), spec.get("key_reuse") or "conflict"))
        originals[id(original)] = (original, name, spec["path"])
    found = held_originals(originals, [*team, os.getcwd()]) if team is not None else []
    if found and run_dir is not None:
        append(run_dir / UNWRAPPED_FILE, "".join(json.dumps(f) + "\n" for f in found))
    return found


def held_originals(originals: dict[int, tuple[Any, str, str]], folders: Sequence[str]) -> list[dict[str, str]]:
    """The globals of the team's modules that hold one of ``originals`` (``id -> (function, effect, path)``, what
    :func:`patch_effects` wrapped): ``[{"module", "name", "effect", "path"}]``. A team module is one loaded from under
    one of ``folders``, not an installed package's (``site-packages``) nor crashpoint's; the function's own
    definition in its own module is no copy (an entry that names it where a node looks it up leaves it there). Reads
    only the globals of the team's modules: once per worker start."""
    roots = tuple(os.path.join(os.path.abspath(f), "") for f in folders)
    found = []
    for module_name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        spec = getattr(module, "__spec__", None)
        if not isinstance(file, str) or str(getattr(spec, "name", None) or module_name).partition(".")[0] == "crashpoint":
            continue
        if not (file if os.path.isabs(file) else os.path.abspath(file)).startswith(roots) or "site-packages" in file \
                or "dist-packages" in file:
            continue
        for name, value in list(vars(module).items()):
            held = originals.get(id(value))
            if held is None or held[0] is not value:
                continue
            if getattr(value, "__module__", None) == module_name and name == getattr(value, "__name__", None):
                continue  # its definition, in its own module
            found.append({"module": module_name, "name": name, "effect": held[1], "path": held[2]})
    return found


def unwrapped_effects(run_dir: Path) -> list[str]:
    """Why the run cannot see some calls of its ``effects:`` entries: one text per global of the team's code that its
    workers found holding an original (:func:`patch_effects`), ``[]`` when none did."""
    rows = json_lines(run_dir / UNWRAPPED_FILE)
    return list({(r["module"], r["name"], r["path"]): unwrapped_text(r) for r in rows}.values())


def unwrapped_text(found: dict[str, str]) -> str:
    """What one global holding an ``effects:`` entry's original (``{"module", "name", "effect", "path"}``) means."""
    return (f"{found['module']}.{found['name']} holds the effects: entry {found['effect']} ({found['path']}) unwrapped: "
            "calls through it are not observed: look it up through its module, or mark the function with "
            f"crashpoint.effect ({found['module']} imported it by name before crashpoint wrapped it)")


def json_lines(path: str | os.PathLike[str]) -> list[Any]:
    """The JSON lines of a run folder's log that workers append to (:func:`append`), in order; ``[]`` when there is
    no such file. A line that does not parse (the last one, torn when its writer was killed) is left out."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except OSError:
        return []
    rows = []
    for text in lines:
        try:
            rows.append(json.loads(text))
        except ValueError:
            continue
    return rows


def append(path: Path, text: str) -> None:
    """Append with one unbuffered ``write`` (kept across a SIGKILL)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, text.encode())
    os.close(fd)


@contextlib.contextmanager
def held_lock(path: str | os.PathLike[str]) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created if missing) for the ``with`` block: processes of one run
    take turns. The kernel drops it when the holder dies (a SIGKILL leaves no stale lock)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing drops the lock


def submitted(run_dir: Path) -> list[str]:
    """Threads (workflow ids) submitted so far in the run, in order (``RUN_DIR/submitted.log``)."""
    path = run_dir / SUBMITTED_FILE
    return path.read_text().splitlines() if path.exists() else []


def mark_submitted(run_dir: Path, thread: str) -> None:
    """Record that ``thread`` is being submitted (before the engine is asked, so a start is never repeated)."""
    append(run_dir / SUBMITTED_FILE, thread + "\n")


def log_invoke_error(run_dir: Path, thread: str, error: str) -> None:
    """Record that this process's invoke of ``thread`` raised ``error`` (:data:`INVOKE_ERRORS_FILE`)."""
    append(run_dir / INVOKE_ERRORS_FILE, json.dumps({"pid": os.getpid(), "thread": thread, "error": error}) + "\n")


def invoke_errors(run_dir: Path, pids: set[int | None]) -> list[dict[str, Any]]:
    """The invoke errors processes ``pids`` recorded (:func:`log_invoke_error`), in order."""
    return [r for r in json_lines(run_dir / INVOKE_ERRORS_FILE) if r["pid"] in pids]


def barrier(run_dir: Path, n: int) -> None:
    """Announce this process at ``RUN_DIR/barrier.PID`` and wait until ``n`` have (so workers race), at most
    :data:`BARRIER_LIMIT_S` seconds."""
    (run_dir / f"barrier.{os.getpid()}").touch()
    deadline = time.monotonic() + BARRIER_LIMIT_S
    while len(list(run_dir.glob("barrier.*"))) < n and time.monotonic() < deadline:
        time.sleep(0.002)


def open_run(run_dir: Path, *identity: str) -> dict[str, Any]:
    """What a worker does first: append ``PID IDENTITY...`` (its phase, an executor id) to ``pids.log``, read
    ``target.json``, and put the target's ``pythonpath`` first on ``sys.path``. Returns the target's data."""
    append(run_dir / PIDS_FILE, " ".join([str(os.getpid()), *identity]) + "\n")
    target = json.loads((run_dir / TARGET_FILE).read_text())
    for folder in reversed(target["pythonpath"]):
        if folder not in sys.path:
            sys.path.insert(0, folder)
    return target


def replace_json(path: Path, data: Any) -> None:
    """Replace the JSON file ``path`` atomically (through ``PATH.PID.tmp``: two processes of a duplicated
    request may write it at once; a reader sees one whole file or the other)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True))
    os.replace(tmp, path)


def write_threads(run_dir: Path, threads: dict[str, Any]) -> None:
    """Replace ``threads.json`` atomically (two processes of a duplicated request write it too)."""
    replace_json(run_dir / THREADS_FILE, threads)


def exit_after(main: Callable[[], int]) -> None:
    """Run a worker's ``main()``, flush its output and leave with ``os._exit``: no interpreter shutdown, where
    engines' background threads have been seen to crash a worker after its work (Temporal, DBOS)."""
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def to_submit(run_dir: Path, target: dict[str, Any], done: set[str], resubmit: list[str], duplicate: bool
              ) -> list[dict[str, Any]]:
    """The inputs a ``start`` worker submits now, each marked submitted (and added to ``done``) before it is
    returned: those not submitted yet, those the harness resubmits, or all of them for a duplicated start."""
    items = []
    for item in target["inputs"]:
        thread = item["thread"]
        if thread in done and thread not in resubmit and not duplicate:
            continue
        mark_submitted(run_dir, thread)
        done.add(thread)
        items.append(item)
    return items


def alive(pid: int) -> bool:
    """``True`` while process ``pid`` exists and is not a zombie (Linux ``/proc``; elsewhere ``kill(pid, 0)``)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except FileNotFoundError:
        return False
    except OSError:
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def kill_group(proc: Any, what: str) -> None:
    """SIGKILL the process group of ``proc`` (a :class:`subprocess.Popen` started in a session of its own, as the
    engines' servers are) and reap it; a group already gone is fine.

    Raises:
        RuntimeError: ``proc``'s pid still runs afterwards (``what`` names the server in the message).
    """
    import signal

    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)
    if alive(proc.pid):
        raise RuntimeError(f"{what} pid {proc.pid} still runs after SIGKILL")


def worker_pids(run_dir: Path) -> set[int]:
    """Pids of the run's worker processes so far (``RUN_DIR/pids.log``, one ``PID PHASE ...`` line each)."""
    path = run_dir / PIDS_FILE
    try:
        return {int(line.split()[0]) for line in path.read_text().splitlines() if line.strip()}
    except OSError:
        return set()


def _passed_with(run_dir: Path, pid: int) -> set[int]:
    """The pids process ``pid`` verified at its rendezvous (``RUN_DIR/rendezvous-ok.PID``; empty if none): a
    partner that met this one and has since exited still counts as met."""
    try:
        return {int(x) for x in (run_dir / f"rendezvous-ok.{pid}").read_text().split()}
    except (OSError, ValueError):
        return set()


def rendezvous(run_dir: Path, n: int, limit_s: float = BARRIER_LIMIT_S) -> list[int]:
    """Meet ``n - 1`` other worker processes *inside* a step: announce this process (``RUN_DIR/rendezvous.PID``,
    holding the pid, written whole with ``os.replace``) and wait until ``n - 1`` other announcements name pids
    that are workers of this run (``pids.log``) and alive now (or that met this one and have exited since:
    ``RUN_DIR/rendezvous-ok.PID`` names the pids each verified). Called at a process's first effect call, so each
    process that returns is provably inside a node with the others inside theirs, none having called an
    effect yet (what :func:`barrier` before ``invoke`` cannot promise: one process may finish before the
    other starts).

    Returns:
        The verified other pids (sorted). Fewer than ``n - 1`` after ``limit_s`` wall seconds: the process goes
        on alone and appends its pid to :data:`RENDEZVOUS_MISSED_FILE` (the harness then calls the run an
        ``error``: it did not test processes that overlap).
    """
    me = os.getpid()
    tmp = run_dir / f".rendezvous.{me}.tmp"
    tmp.write_text(str(me))
    os.replace(tmp, run_dir / f"rendezvous.{me}")
    deadline = time.monotonic() + limit_s
    while True:
        workers = worker_pids(run_dir)
        others = []
        for path in run_dir.glob("rendezvous.*"):
            try:
                pid = int(path.read_text())
            except (OSError, ValueError):
                continue
            if pid != me and pid in workers and (alive(pid) or me in _passed_with(run_dir, pid)):
                others.append(pid)
        if len(others) >= n - 1:
            ok = run_dir / f".rendezvous-ok.{me}.tmp"
            ok.write_text(" ".join(map(str, others)))
            os.replace(ok, run_dir / f"rendezvous-ok.{me}")
            return sorted(others)
        if time.monotonic() >= deadline:
            append(run_dir / RENDEZVOUS_MISSED_FILE, f"{me}\n")
            return sorted(others)
        time.sleep(0.002)


def barrier_exit(run_dir: Path) -> None:
    """Announce this process at ``RUN_DIR/exiting.PID`` and wait until every process of the phase's
    :func:`barrier` has too or is dead (so none exits while another still works), at most
    :data:`BARRIER_LIMIT_S` seconds."""
    (run_dir / f"exiting.{os.getpid()}").touch()
    deadline = time.monotonic() + BARRIER_LIMIT_S
    while time.monotonic() < deadline:
        peers = [int(p.name.split(".", 1)[1]) for p in run_dir.glob("barrier.*")]
        if all((run_dir / f"exiting.{pid}").exists() or not _alive(pid) for pid in peers):
            return
        time.sleep(0.005)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) is dead
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return True
