"""Progress of a sweep on standard error: a dot per run, or a progress bar (rich) on long sweeps.

``crashpoint run`` and ``crashpoint certify`` print a dot per passed run (``F`` otherwise). On a
terminal, once the sweep turns out long (more than :data:`MIN_RUNS` runs planned, or
:data:`MIN_SECONDS` seconds gone), the dots give way to a :mod:`rich.progress` bar redrawn in place::

    ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━╺━━━━━━  45/120  37%  5.2 runs/s  ETA 0:00:14  2 not passed

``--progress`` forces the bar from the first run (even when standard error is not a terminal or
with ``-q``); ``--no-progress`` shows no progress at all (no bar, no dots). ``-q`` shows neither dots
nor an automatic bar.
The bar is only ever written to standard error, never to standard output or a ``--json`` file.
It is redrawn from the calling thread at most every :data:`REDRAW_S` seconds (no refresh thread),
with colours only on a terminal.
"""

from __future__ import annotations

import shutil
import sys
import time
from typing import Any, Callable, TextIO

#: Runs planned above which an automatic bar appears (count).
MIN_RUNS = 50
#: Seconds after which an automatic bar appears, whatever the plan.
MIN_SECONDS = 3.0
#: Seconds between two redraws of the bar (the last one is always drawn).
REDRAW_S = 0.1
MODES = ("auto", "on", "off")

#: The character a finished run prints without a bar, as pytest's: passed, failed, error, unknown, unsupported.
DOTS = {"passed": ".", "failed": "F", "error": "E", "unknown": "?", "unsupported": "s"}


def progress_bar(stream: TextIO, clock: Callable[[], float], *, terminal: bool) -> Any:
    """A :class:`rich.progress.Progress` writing to ``stream``: bar, ``done/total``, then the
    ``percent``, ``rate`` and ``not_passed`` fields of its task (text), and the estimated time left
    (rich's, from ``clock``, monotonic seconds). Redrawn only by its ``refresh()``; colours only on a
    ``terminal`` (elsewhere, with ``--progress``, the redraws are plain text and ``\\r``)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    console = Console(file=stream, force_terminal=True, color_system="auto" if terminal else None,
                      width=shutil.get_terminal_size((80, 24)).columns, highlight=False, soft_wrap=False)
    return Progress(BarColumn(bar_width=None), MofNCompleteColumn(), TextColumn("{task.fields[percent]}"),
                    TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(),
                    TextColumn("{task.fields[not_passed]}"), console=console, auto_refresh=False,
                    get_time=clock, expand=True, redirect_stdout=False, redirect_stderr=False)  # stdout stays ours


class SweepProgress:
    """The progress output of one sweep: pass :meth:`plan` as ``on_plan`` and :meth:`result` as
    ``on_result`` (both from the calling thread), then call :meth:`close`.

    Args:
        stream: where to write (standard error by default).
        mode: ``auto`` (dots; a bar on a terminal once the sweep is long), ``on`` (a bar from the
            start, wherever ``stream`` goes), ``off`` (nothing: no bar and no dots).
        quiet: no dots, and no automatic bar (``on`` still shows one).
        clock: monotonic seconds (tests pass a fake).

    Raises:
        ValueError: an unknown ``mode``.
    """

    def __init__(self, stream: TextIO | None = None, *, mode: str = "auto", quiet: bool = False,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if mode not in MODES:
            raise ValueError(f"progress mode must be one of {MODES}, got {mode!r}")
        self.stream = stream if stream is not None else sys.stderr
        self.mode, self.quiet, self.clock = mode, quiet or mode == "off", clock
        self.began = clock()
        self.planned = self.done = self.not_passed = 0
        self.bar = False
        self._dots = 0  # dots on the current line
        self._drawn = 0.0
        self._progress: Any = None  # the rich Progress, once the bar is on
        self._task: Any = None
        if mode == "on":
            self._start_bar()

    def _tty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError):  # a closed or odd stream: no terminal
            return False

    def _maybe_start_bar(self) -> None:
        if self.bar or self.mode != "auto" or self.quiet or not self._tty():
            return
        if self.planned > MIN_RUNS or self.clock() - self.began >= MIN_SECONDS:
            if self._dots:
                self.stream.write("\n")
                self._dots = 0
            self._start_bar()

    def _start_bar(self) -> None:
        self.bar = True
        self._progress = progress_bar(self.stream, self.clock, terminal=self._tty())
        self._task = self._progress.add_task("sweep", total=max(self.planned, self.done), completed=self.done,
                                             percent="", rate="", not_passed="")
        self._progress.start()

    def plan(self, total: int) -> None:
        """The sweep plans ``total`` runs so far (count; see ``sweep(on_plan=...)``)."""
        self.planned = total
        self._maybe_start_bar()
        if self.bar:
            self._draw(force=True)

    def result(self, result: Any) -> None:
        """One run finished (a :class:`~crashpoint.harness.run.sweep.RunResult`)."""
        self.done += 1
        self.not_passed += result.verdict != "passed"
        self._maybe_start_bar()
        if self.bar:
            self._draw(force=self.done >= self.planned)
        elif not self.quiet:
            self.stream.write(DOTS.get(str(result.verdict), "?"))
            self._dots += 1
            self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        elapsed = now - self.began
        rate = self.done / elapsed if elapsed > 0 and self.done else 0.0
        total = max(self.planned, self.done)
        self._progress.update(self._task, total=total, completed=self.done,
                              percent=f"{100 * self.done // total if total else 100}%",  # 100% only when done
                              rate=f"{rate:.1f} runs/s",
                              not_passed=f"{self.not_passed} not passed" if self.not_passed else "")
        self._progress.refresh()

    def close(self) -> None:
        """Draw the final bar and end the line (or end the line of dots)."""
        if self.bar:
            self._draw(force=True)
            self._progress.stop()
        elif not self.quiet:
            self.stream.write("\n")
        self.stream.flush()
