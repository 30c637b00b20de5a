"""A harness-side adapter call that hangs (issue 17, item 6): the run is ``unknown`` after the call timeout,
and Ctrl-C stops the command at once. Before, ``status`` hanging hung the command, and Ctrl-C did not stop
it (the pool's shutdown waited for the hung call)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from crashpoint.harness.run.certification import load_adapter
from crashpoint.harness.load.loader import load_target
from crashpoint.harness.run.sweep import sweep
from crashpoint.scenarios import builtin_pack
from variants.adapters import HangsInStatus

TESTS = Path(__file__).resolve().parents[1]
CASE = builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml"


def test_a_hanging_status_call_is_unknown_after_the_call_timeout(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(TESTS))
    pack, cases = load_target(CASE)
    began = time.monotonic()
    result = sweep(pack, cases, load_adapter("variants.adapters:HangsInStatus", call_timeout_s=2.0), crash="none",
                   executor="threads", jobs=1, workdir=tmp_path)
    assert [r.verdict for r in result.results] == ["unknown"]
    assert "status() did not return within 2 s" in result.results[0].error
    assert time.monotonic() - began < 30


def _has_file(root: Path, name: str) -> bool:
    """Whether a file ``name`` is under ``root`` now; the run creates and removes folders (a golden
    snapshot) while this looks, and a folder gone mid-walk is "not yet", not an error."""
    try:
        return any(root.rglob(name))
    except FileNotFoundError:
        return False


def _as_from_a_terminal() -> None:
    """In the child, before exec: SIGINT and SIGQUIT at their defaults, as a shell gives a foreground command.
    A process started with them ignored keeps them ignored (POSIX; CPython then installs no KeyboardInterrupt
    handler), and a test run launched in the background (``nohup ... &``: a non-interactive shell ignores
    SIGINT for its background jobs) would otherwise hand that to ``crashpoint``: each Ctrl-C test then failed
    in a backgrounded CI run, and crashpoint was right to ignore a Ctrl-C its caller had asked it to ignore."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGQUIT, signal.SIG_DFL)


def _ctrl_c_once_inside(tmp_path: Path, args: list[str], marker: str, settle_s: float) -> int:
    """Run ``crashpoint ARGS --worker-timeout 600 --workdir RUNS`` in its own process group, press Ctrl-C
    (SIGINT to the group, as a terminal does) ``settle_s`` seconds after a file ``marker`` appeared under RUNS,
    and return its exit code (it must come within 30 s)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-c", "import sys; from crashpoint.harness.cli.main import main; "
                             "sys.exit(main(sys.argv[1:]))", *args, "--worker-timeout", "600",
                             "--workdir", str(tmp_path / "runs")],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True,  # a terminal's Ctrl-C goes to the whole foreground group
                            preexec_fn=_as_from_a_terminal)
    try:
        deadline = time.monotonic() + 120
        while not _has_file(tmp_path / "runs", marker) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert proc.poll() is None and _has_file(tmp_path / "runs", marker), f"the harness never wrote {marker}"
        time.sleep(settle_s)  # it is inside the hanging call or worker pass now
        os.killpg(proc.pid, signal.SIGINT)
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 130, proc.stdout.read().decode(errors="replace")[-2000:]
    return rc


def test_ctrl_c_stops_a_command_whose_adapter_hangs(tmp_path: Path) -> None:
    _ctrl_c_once_inside(tmp_path, ["run", str(CASE), "--crash", "none", "--adapter", "variants.adapters:HangsInStatus"],
                        HangsInStatus.MARKER, 0.5)


@pytest.mark.parametrize("command", [["search", "--schedules", "5", "--executor", "threads"],
                                     ["run", "--crash", "none", "--executor", "threads"]])
def test_ctrl_c_stops_a_command_whose_runs_are_on_threads_and_whose_worker_hangs(tmp_path: Path, command) -> None:
    # issue 17: on --executor threads, `search` and `run` closed their thread pool with shutdown(wait=True) on
    # Ctrl-C: it waited for the running run, whose forked worker hangs, for --worker-timeout (no marker scan
    # finds a forked worker: its /proc environ is its zygote's); now the zygotes die while the pool closes
    _ctrl_c_once_inside(tmp_path, [command[0], str(CASE), *command[1:], "--engine", "variants.misbehaving:HangsInWorker"],
                        "worker-001.log", 1.0)


#: Runs ``crashpoint run`` in its main thread while another thread of the same process takes the SIGINT
#: (``pthread_kill``): what the kernel may do with a Ctrl-C sent to a process with several threads.
_SIGINT_ON_ANOTHER_THREAD = """
import signal, sys, threading, time
from pathlib import Path
from crashpoint.harness.cli.main import main
marker, argv = sys.argv[1], sys.argv[2:]
def press():
    while not list(Path(marker).rglob("status.entered")):
        time.sleep(0.1)
    time.sleep(0.5)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
threading.Thread(target=press, daemon=True).start()
sys.exit(main(argv))
"""


def test_ctrl_c_taken_by_another_thread_still_stops_the_command(tmp_path: Path) -> None:
    # CI hung twice (30 s, then killed): the sweep's main thread waited for its runs without a timeout, and a
    # SIGINT the kernel gave to another thread only set a flag that the blocked main thread never looked at.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])}
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-c", _SIGINT_ON_ANOTHER_THREAD, str(runs), "run", str(CASE),
                             "--crash", "none", "--adapter", "variants.adapters:HangsInStatus",
                             "--worker-timeout", "600", "--workdir", str(runs)],
                            cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True, preexec_fn=_as_from_a_terminal)
    try:
        rc = proc.wait(timeout=120)  # the golden run reaches status() in seconds; then at once
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc == 130, proc.stdout.read().decode(errors="replace")[-2000:]
