"""A kill at a crash point stops the worker's other threads at their next crash point: between the probe's decision to
kill and the SIGKILL (the probe records the kill first, in syscalls that let other threads run), another thread
of the process must not pass (and act on) a crash point the recovery is meant to meet."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import sys, threading
    from crashpoint.harness.process.crashpoints import CrashProbe

    probe = CrashProbe(sys.argv[1], targets=["kill_here"])
    ready = threading.Event()

    def busy():  # a parallel branch of the worker: it passes crash points all the time
        n = 0
        while True:
            n += 1
            probe(f"other:{n}")
            if n == 50:
                ready.set()

    threading.Thread(target=busy, daemon=True).start()
    ready.wait()
    probe("kill_here")
    print("not killed")
''')


def test_no_other_thread_passes_a_crash_point_after_the_kill_was_decided(tmp_path: Path) -> None:
    """Before, the other thread logged crash points (here ``other:N``) after ``kill_here`` in each try, the way a
    LangGraph worker killed at ``before_writes:order-1001@notify_received`` went on to write the checkpoint of step
    2 (``before_put:order-1001@2``) before it died, so the recovery never met that point and the sampled pair
    ``... >> before_put:order-1001@2`` of examples/langgraph_refund was never reached (an ``error``)."""
    after = []
    for n in range(5):
        run_dir = tmp_path / str(n)
        run_dir.mkdir()
        done = subprocess.run([sys.executable, "-c", SCRIPT, str(run_dir)], capture_output=True, text=True,
                              timeout=60)
        assert done.returncode == -signal.SIGKILL, (done.stdout, done.stderr)
        log = (run_dir / "crashpoints.log").read_text().splitlines()
        after.append(len(log) - log.index("kill_here") - 1)
    assert after == [0] * 5, after
