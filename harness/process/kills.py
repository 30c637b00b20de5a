"""Verified kills: a crash point counts only when the harness's kill landed and a new process resumed.

A crash run tests something only if (1) the worker process the harness started died there, by the
probe's SIGKILL, and (2) a **new** worker process, started by the harness with nothing but the run's
files, took over. Neither is taken on the engine's word: the facts are the pid of each worker the
harness started, that process's exit status (``-9``: killed by SIGKILL), and the probe's witness
records beside the run folder (:func:`crashpoint.harness.process.crashpoints.witness_events`): which
process built a probe (``start PID``) and which process the probe was about to kill where
(``kill PID POINT``). What they catch:

- a probe that records a kill and does not die (the worker exits 0): the kill did not land;
- a kill that lands on a child of the worker (a supervisor) while the worker itself lives on;
- a worker killed by SIGKILL that no probe of ours sent (an engine's own ``os.kill``): not ours;
- a "resume" by no new process (nothing started a probe after the kill);
- an engine that rewrites the crash point log in its run folder (it differs from the witness).

In simulated-crash mode (``--crash-mode inprocess``) no process dies: the kill is recorded as
``simulated`` (honestly: in this process), and the resume is the same process.

:func:`check_worker` is called by the driver after each worker; :func:`unverified` turns a run
outcome into the ``error`` text of a run whose kill did not land (``None``: every kill verified).
"""

from __future__ import annotations

import signal
from typing import Any, Sequence

from crashpoint.harness.process.crashpoints import ProbeEvent, schedule

#: The prefix of every ``error`` text of a run whose kill could not be verified.
NOT_LANDED = "the kill did not land"


def check_worker(kill_log: list[dict[str, Any]], problems: list[str], worker: int, pid: int | None, rc: int,
                 events: Sequence[ProbeEvent], simulated: bool = False) -> bool:
    """Judge one finished worker from what the harness saw and append the facts.

    Args:
        kill_log: the run's verified kills so far, each ``{"worker", "pid", "signal" ("SIGKILL" |
            "simulated"), "crash_point", "resumed_by" (pid | None)}``; a verified kill is appended, and
            the previous kill's ``resumed_by`` is set when this worker is the new process that took over.
        problems: the run's reasons why a kill or a resume is not verified (appended to).
        worker: the worker's number in the run (1-based). ``pid``: the pid the harness started
            (``None`` if the launcher did not report one). ``rc``: its exit status as
            :attr:`subprocess.Popen.returncode` (``-9`` after a SIGKILL).
        events: the witness events written while this worker ran.
        simulated: the worker ran in this process with a simulated-crash probe.

    Returns:
        ``True`` when this worker was killed by the harness's probe (verified): the driver starts the next.
    """
    kills = [e for e in events if e.kind in ("kill", "simulate")]
    starts = {e.pid for e in events if e.kind == "start"}
    if kill_log and kill_log[-1]["resumed_by"] is None and kill_log[-1]["worker"] != worker:  # the next worker
        dead = kill_log[-1]["pid"]
        if pid is not None and pid in starts and (pid != dead or simulated):
            kill_log[-1]["resumed_by"] = pid
        else:
            problems.append(f"worker {worker} (pid {pid}) did not resume after the kill at "
                            f"{kill_log[-1]['crash_point']}: it is not a new process that started the probe")
    if not kills:
        return False
    point = kills[-1].point
    where = ", ".join(f"{e.point} in pid {e.pid}" for e in kills)
    if len(kills) > 1:
        problems.append(f"worker {worker} (pid {pid}): the probe fired {len(kills)} times ({where}); a probe "
                        "kills its own process, so at most one kill lands per worker")
        return rc == -signal.SIGKILL
    kill = kills[0]
    if kill.pid != pid:
        problems.append(f"worker {worker}: crash point {point} fired in pid {kill.pid}, not in the worker process "
                        f"the harness started (pid {pid}), which exited with {rc}: the kill landed elsewhere")
        return rc == -signal.SIGKILL
    expected = "simulate" if simulated else "kill"
    if kill.kind != expected or rc != -signal.SIGKILL:
        problems.append(f"worker {worker} (pid {pid}): the probe recorded a kill at {point}, but the process "
                        f"exited with {rc}, not by SIGKILL{' (simulated)' if simulated else ''}")
        return False
    kill_log.append({"worker": worker, "pid": pid, "signal": "simulated" if simulated else "SIGKILL",
                     "crash_point": point, "resumed_by": None})
    return True


def landed(kill_log: Sequence[dict[str, Any]], targets: str | None) -> bool:
    """``True`` when the verified kills are exactly the kills of the crash spec ``targets`` (``"A >> B"``; none
    for ``"P || worker"``), each resumed by a new process."""
    return [k["crash_point"] for k in kill_log] == schedule(targets) and \
        all(k["resumed_by"] is not None for k in kill_log)


def unverified(outcome: Any) -> str | None:
    """The ``error`` text of a run whose kills are not all verified, or ``None``.

    ``outcome`` is a :class:`crashpoint.harness.run.pack_driver.RunOutcome` (``kill_problems`` read).
    """
    problems = list(getattr(outcome, "kill_problems", None) or ())
    if not problems:
        return None
    return f"{NOT_LANDED}: " + "; ".join(problems[:5]) + (f" (and {len(problems) - 5} more)" if len(problems) > 5 else "")


def no_crash_points(outcome: Any) -> str | None:
    """The ``error`` text of a golden run that passed no crash point (its worker never called the probe, or
    its log was lost), so no crash run can test anything; ``None`` otherwise."""
    if outcome is None or outcome.crash_points:
        return None
    return ("the golden run passed no crash point (the worker never called the probe, or its record was "
            "lost): a crash sweep of this case would test nothing")
