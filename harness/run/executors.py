"""Where a sweep's runs execute: a :class:`concurrent.futures.Executor` made from a spec string.

Specs (``crashpoint run --executor SPEC``, ``sweep(executor=SPEC)``):

* ``processes`` (the default): a local process pool of ``workers`` processes (default: the CPU
  count), started with the ``spawn`` method, so each pool process is a fresh interpreter that
  inherits no thread, lock, open database or warm-worker zygote of the caller. Pool processes
  ignore ``SIGINT``: a Ctrl-C stops the caller, which cancels the runs not yet started and waits
  for the running ones (each ends its worker processes). A pool process exits within
  :data:`PARENT_POLL_S` seconds of its caller's death (a SIGKILLed ``crashpoint run``).
* ``threads``: a local thread pool of ``workers`` threads (each run waits on its own worker
  processes, so threads overlap the workers; the harness's own Python work shares one GIL).
* ``dask://HOST:PORT``: the executor of a :class:`distributed.Client` connected to the Dask
  scheduler at ``tcp://HOST:PORT`` (``dask://tls://HOST:PORT`` and other Dask addresses pass as
  they are). The cluster's workers and their threads decide the parallelism; ``workers`` is
  ignored. Needs the ``dask`` extra (``pip install 'crashpoint[dask]'``).

A run is a call of a module-level function on picklable arguments (the driver, the case, the
pack, the golden outcome) that returns a picklable :class:`~crashpoint.harness.run.sweep.RunResult`;
each run is self-contained in its own folder, so it can execute on any machine.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, Executor, Future, ProcessPoolExecutor, ThreadPoolExecutor, wait
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from typing import Any, Callable, Collection, Iterator

from crashpoint.errors import UsageError

#: The local executor kinds; a Dask scheduler is ``dask://HOST:PORT``.
LOCAL_KINDS = ("processes", "threads")
DEFAULT_KIND = "processes"
#: Seconds allowed to reach a Dask scheduler before the command stops (exit 2).
CONNECT_TIMEOUT_S = 5.0


#: Seconds the caller's thread blocks at most in one wait for runs, so that a Ctrl-C is seen at once.
WAIT_SLICE_S = 0.25


def wait_first(futures: Collection[Future]) -> set[Future]:
    """Block until at least one of ``futures`` is done and return the done ones (like
    ``wait(..., return_when=FIRST_COMPLETED)``), waiting in slices of :data:`WAIT_SLICE_S` seconds.

    Why slices: a process-directed SIGINT may be delivered to any thread that does not block it (the
    executor's manager or queue-feeder thread, say). CPython then only sets a flag for the main thread,
    and a main thread blocked in a lock acquire without a timeout never wakes up to raise
    KeyboardInterrupt: Ctrl-C was ignored for as long as a run hung (seen in CI under load). Each slice runs
    with SIGINT and SIGTERM held (:func:`signals_held`): they take effect between slices."""
    while True:
        with signals_held():
            finished, _ = wait(futures, timeout=WAIT_SLICE_S, return_when=FIRST_COMPLETED)
        if finished:
            return finished


def result_of(future: Future) -> Any:
    """``future.result()``, waiting in slices (see :func:`wait_first`); raises what the call raised."""
    while True:
        try:
            with signals_held():
                return future.result(timeout=WAIT_SLICE_S)
        except FutureTimeout:
            if future.done():  # the call itself raised a TimeoutError
                raise
            continue


#: The signals :func:`signals_held` holds back: Ctrl-C and a CI runner's stop.
HELD_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextmanager
def signals_held() -> Iterator[None]:
    """Hold SIGINT and SIGTERM back while the block runs, then act on them as their handlers would have.

    Why: ``concurrent.futures.wait`` takes the lock of every future it waits on, one after the other, and a
    KeyboardInterrupt raised between two of those acquires leaves the acquired ones locked for ever (the with
    statement never started); the pool's manager thread then blocks setting a result on such a future, and the
    interpreter's exit joins that thread: ``crashpoint run refunds --workers 2`` hung after a Ctrl-C, 1 time in
    12 here. Only a Python handler of the main thread is held back (``SIG_IGN`` stays ignored, other threads
    cannot set handlers); a held signal is handed to that handler as soon as the block is left, so the
    ``KeyboardInterrupt`` (or the CLI's SIGTERM exit) is raised there."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    got: list[int] = []

    def hold(signum: int, _frame: Any) -> None:
        got.append(signum)

    previous: dict[int, Any] = {}
    try:
        for sig in HELD_SIGNALS:
            handler = signal.getsignal(sig)
            if callable(handler):
                previous[sig] = signal.signal(sig, hold)
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        for sig in dict.fromkeys(got):  # once each, in the order they came
            previous[sig](sig, None)


def default_workers() -> int:
    """The CPU count (at least 1): the default size of a local pool."""
    return os.cpu_count() or 1


#: Seconds allowed, per pool process, to be gone after its SIGKILL on an interrupted sweep.
KILL_WAIT_S = 5.0
#: Seconds between two checks, in a pool process, that the process that made the pool is alive.
PARENT_POLL_S = 0.5


def _init_pool_process(parent: int) -> None:
    """In each pool process, before its first run: ignore ``SIGINT`` (the caller handles Ctrl-C), become
    the subreaper of what its runs start, and exit once ``parent`` is gone (a pool process otherwise
    outlives a SIGKILLed caller forever, blocked on its call queue), killing what its runs started and
    removing the sweep's temporary folder first (:func:`crashpoint.harness.run.sweep.abandon`)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    from crashpoint.harness.process.forkserver import become_subreaper

    become_subreaper()  # one run at a time here: what its harness-side code leaves is this process's to kill

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        try:
            from crashpoint.harness.run.sweep import abandon

            abandon()  # its zygotes, its runs' processes, and the sweep's own folder go with it
        finally:
            os._exit(1)

    threading.Thread(target=watch, name="crashpoint-parent-watch", daemon=True).start()


def dask_address(spec: str) -> str:
    """The scheduler address of a ``dask://`` spec: ``dask://h:8786`` -> ``tcp://h:8786``;
    ``dask://tls://h:8786`` -> ``tls://h:8786``.

    Raises:
        UsageError: no host or no port.
    """
    rest = spec[len("dask://"):]
    if "://" in rest:
        scheme, _, hostport = rest.partition("://")
    else:
        scheme, hostport = "tcp", rest
    host, sep, port = hostport.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise UsageError(f"--executor {spec}: expected dask://HOST:PORT (a Dask scheduler's address), "
                         "e.g. dask://127.0.0.1:8786")
    return f"{scheme}://{hostport}"


def check_spec(spec: str | None) -> None:
    """Check an executor spec without starting anything.

    Raises:
        UsageError: not ``processes``, ``threads`` or ``dask://HOST:PORT``.
    """
    if spec is None or spec in LOCAL_KINDS:
        return
    if spec.startswith("dask://"):
        dask_address(spec)
        return
    raise UsageError(f"--executor {spec!r}: expected processes, threads or dask://HOST:PORT")


def make_executor(spec: str | None = None, workers: int | None = None, *,
                  connect_timeout_s: float = CONNECT_TIMEOUT_S) -> tuple[Executor, Callable[[], None]]:
    """Build the executor named by ``spec`` (see the module docstring; ``None``: ``processes``).

    Args:
        spec: ``processes`` | ``threads`` | ``dask://HOST:PORT``.
        workers: pool size for the local kinds, count >= 1 (default: :func:`default_workers`);
            ignored for Dask.
        connect_timeout_s: seconds to reach a Dask scheduler.

    Returns:
        ``(executor, close)``: call ``close()`` once done; it waits for the running calls, cancels
        the queued ones and, for Dask, disconnects the client. Called while a Ctrl-C propagates, the
        process pool's close kills its processes instead of waiting.

    Raises:
        UsageError: a bad spec or ``workers`` < 1; the ``distributed`` package is missing; no Dask
            scheduler answers at the address within ``connect_timeout_s`` (the message names it).
    """
    check_spec(spec)
    if workers is not None and workers < 1:
        raise UsageError(f"--workers must be >= 1, got {workers}")
    kind = spec or DEFAULT_KIND
    size = workers or default_workers()
    if kind == "threads":
        threads = ThreadPoolExecutor(max_workers=size, thread_name_prefix="crashpoint-run")
        return threads, lambda: _close_threads(threads)
    if kind == "processes":
        _quiet_broken_pool()
        procs = ProcessPoolExecutor(max_workers=size, mp_context=multiprocessing.get_context("spawn"),
                                    initializer=_init_pool_process, initargs=(os.getpid(),))
        return procs, lambda: _close_processes(procs)
    return _dask_executor(spec, connect_timeout_s)


def _close_threads(threads: ThreadPoolExecutor) -> None:
    """Wait for the running calls, cancel the queued ones; when called while a Ctrl-C (or SIGTERM's exit)
    propagates, this process's zygotes are killed again and again while it waits (their workers die with them:
    :func:`~crashpoint.harness.process.launch.reaping`), so that a run waiting for a hung worker ends at once rather
    than after ``--worker-timeout``."""
    if isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit)):
        halt(threads)
        return
    threads.shutdown(wait=True, cancel_futures=True)


def _close_processes(procs: ProcessPoolExecutor) -> None:
    """Wait for the running calls, cancel the queued ones; when called while a Ctrl-C (or SIGTERM's exit)
    propagates, kill the pool processes instead of waiting (:func:`halt`)."""
    if isinstance(sys.exc_info()[1], (KeyboardInterrupt, SystemExit)):
        halt(procs)
        return
    procs.shutdown(wait=True, cancel_futures=True)


def halt(executor: Executor) -> None:
    """Stop ``executor``'s runs now, for an interrupted sweep, before it removes its run folders (a run still going
    would create them again: mkdir parents=True, a worker's SQLite files): a process pool's processes are killed
    and joined (a run stuck in a hung adapter call would hold the command forever; their warm-worker zygotes and
    forked workers die with them, ``PR_SET_PDEATHSIG``, and the caller reaps what carries its runs' marker); a
    thread pool's queued calls are cancelled and its running ones awaited while this process's zygotes are killed
    again and again (their workers die with them, so each run ends at once). Another executor (Dask) is left to
    its closer. Calling it again, or closing the executor afterwards, does nothing more."""
    if isinstance(executor, ThreadPoolExecutor):
        from crashpoint.harness.process.launch import reaping

        with reaping(None):
            executor.shutdown(wait=True, cancel_futures=True)
        return
    if not isinstance(executor, ProcessPoolExecutor):
        return
    killed = list((getattr(executor, "_processes", None) or {}).values())
    for proc in killed:
        try:
            proc.kill()
        except (OSError, ValueError):
            pass
    for proc in killed:  # dead before the caller removes the run folders
        try:
            proc.join(KILL_WAIT_S)
        except (OSError, ValueError, AssertionError):
            pass
    # The pool's call queue may hold calls its feeder thread is writing into a pipe no process reads any more (this
    # process keeps the reading end open): a full pipe blocks that write for ever, and multiprocessing's exit
    # handler joins the feeder thread, so the command hung after saying what it stored (1 of 3 Ctrl-Cs of
    # `crashpoint run refunds --workers 2` here; CPython 3.12 closes the reader itself, gh-94777). The calls are
    # cancelled: nothing is lost by not flushing them.
    queue = getattr(executor, "_call_queue", None)
    if queue is not None:
        try:
            queue.cancel_join_thread()
        except (AttributeError, OSError, ValueError):
            pass
    executor.shutdown(wait=False, cancel_futures=True)


_QUIET: list[bool] = []


def _quiet_broken_pool() -> None:
    """Silence the one traceback a broken process pool makes after a Ctrl-C: its manager thread, finding a pool
    process dead (killed by :func:`_close_processes`, or by the SIGINT itself while it was still starting, before
    it could ignore SIGINT), sets an exception on every call it still holds, the ones the sweep cancelled
    included, and CPython (3.11) raises ``InvalidStateError: CANCELLED`` there (``Exception in thread Thread-1``
    after a Ctrl-C of ``crashpoint run refunds --workers 2``). Only a pool manager thread's ``InvalidStateError`` is
    dropped; anything else still prints. Installed once per process."""
    if _QUIET:
        return
    _QUIET.append(True)
    from concurrent.futures import InvalidStateError, process

    managers = tuple(t for t in [getattr(process, "_ExecutorManagerThread", None)] if isinstance(t, type))
    previous = threading.excepthook

    def hook(args: Any) -> None:
        if managers and isinstance(args.thread, managers) and args.exc_type is not None \
                and issubclass(args.exc_type, InvalidStateError):
            return
        previous(args)

    threading.excepthook = hook


def _dask_executor(spec: str, connect_timeout_s: float) -> tuple[Executor, Callable[[], None]]:
    address = dask_address(spec)
    try:
        import dask
        from distributed import Client
    except ImportError as exc:
        raise UsageError(f"--executor {spec}: needs Dask's distributed package: pip install 'crashpoint[dask]' "
                         f"({exc})") from None
    try:
        with dask.config.set({"distributed.comm.timeouts.connect": f"{connect_timeout_s}s"}):
            client = Client(address, timeout=connect_timeout_s, set_as_default=False)
    except Exception as exc:  # OSError / TimeoutError from the comm layer, or a bad address
        detail = (str(exc).splitlines() or [""])[0][:200]
        raise UsageError(f"--executor {spec}: cannot reach the Dask scheduler at {address} within "
                         f"{connect_timeout_s:g} s ({type(exc).__name__}: {detail}); start one with "
                         f"`dask scheduler` and workers with `dask worker {address}`") from None
    executor = client.get_executor(pure=False)  # every run is new work, never deduplicated by its arguments

    def close() -> None:
        try:
            executor.shutdown(wait=True)
        finally:
            client.close()

    return executor, close


def is_local(executor: Executor) -> bool:
    """``True`` for the local pools (threads, processes): they share this machine's file system, so
    run folders can go under one root made here; any other executor (Dask) runs each run in a
    temporary folder of the machine that executes it (see :func:`crashpoint.harness.run.sweep.sweep`)."""
    return isinstance(executor, (ThreadPoolExecutor, ProcessPoolExecutor))


def describe(executor: Executor, workers: int | None = None) -> str:
    """A few words for the command's banner: ``"2 processes"``, ``"4 threads"``, ``"dask tcp://h:8786"``."""
    if isinstance(executor, ProcessPoolExecutor):
        return f"{executor._max_workers} process(es)"  # noqa: SLF001 - no public accessor
    if isinstance(executor, ThreadPoolExecutor):
        return f"{executor._max_workers} thread(s)"  # noqa: SLF001
    client = getattr(executor, "_client", None)
    if client is not None:
        try:
            n = sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values())
        except Exception:  # the description is cosmetic
            n = None
        return f"dask {client.scheduler.address}" + (f" ({n} worker thread(s))" if n else "")
    return type(executor).__name__


def capacity(executor: Executor) -> int:
    """How many runs ``executor`` executes at once (at least 1): a local pool's size, a Dask cluster's worker threads
    (what a sweep on a time budget keeps in flight, so that the most informative runs start first); an executor it
    cannot ask: 2."""
    workers = getattr(executor, "_max_workers", None)  # noqa: SLF001 - no public accessor
    if isinstance(workers, int) and workers > 0:
        return workers
    client = getattr(executor, "_client", None)
    if client is not None:
        try:
            return max(1, sum(w.get("nthreads", 1) for w in client.scheduler_info().get("workers", {}).values()))
        except Exception:  # noqa: BLE001 - a cluster that cannot say: the default
            return 2
    return 2
