"""Progress of a sweep on standard error: a dot per run, or a progress bar on long sweeps.

``crashpoint run`` and ``crashpoint certify`` print a dot per passed run (``F`` otherwise). On a
terminal, once the sweep turns out long (more than :data:`MIN_RUNS` runs planned, or
:data:`MIN_SECONDS` seconds gone), the dots give way to one line redrawn in place::

    [##########..............]  45/120  37%  5.2 runs/s  ETA 0:14  2 not passed

``--progress`` forces the bar from the first run (even when standard error is not a terminal or
with ``-q``); ``--no-progress`` never shows it. ``-q`` shows neither dots nor an automatic bar.
The bar is only ever written to standard error, never to standard output or a ``--json`` file.
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


def format_duration(seconds: float) -> str:
    """``M:SS`` below an hour, ``H:MM:SS`` above (seconds rounded up): ``75.2`` -> ``"1:16"``."""
    s = int(-(-max(0.0, seconds) // 1))
    h, rest = divmod(s, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def render_bar(done: int, total: int, elapsed_s: float, *, width: int = 80, not_passed: int = 0) -> str:
    """One line of progress, at most ``width - 1`` characters (so it never wraps), no newline.

    Args:
        done: runs finished (count); ``total``: runs planned (count; raised to ``done`` if below).
        elapsed_s: wall seconds since the sweep began.
        width: the terminal's width in columns.
        not_passed: runs done that did not pass (shown when > 0).

    Returns:
        ``"[####......]  45/120  37%  5.2 runs/s  ETA 0:14"``: the bar, runs done / planned, percent
        (floored, so 100% only when all are done), runs per second, estimated time left at that
        rate (``ETA --:--`` before the first run ends), then ``N not passed``. When the line would
        not fit, the bar shrinks (to 10 cells), then the trailing fields are dropped.
    """
    total = max(total, done)
    percent = 100 * done // total if total else 100
    rate = done / elapsed_s if elapsed_s > 0 and done else 0.0
    eta = format_duration((total - done) / rate) if rate > 0 else "--:--"
    if done == total and total:
        eta = format_duration(0)
    fields = [f"{done}/{total}", f"{percent}%", f"{rate:.1f} runs/s", f"ETA {eta}"]
    if not_passed:
        fields.append(f"{not_passed} not passed")
    limit = max(20, width - 1)
    while True:
        text = "  ".join(fields)
        cells = min(40, limit - len(text) - 4)  # "[" + cells + "]" + two spaces
        if cells >= 10 or len(fields) <= 2:
            break
        fields.pop()
    cells = max(cells, 10)
    filled = cells * done // total if total else cells
    line = f"[{'#' * filled}{'.' * (cells - filled)}]  {text}"
    return line[:limit]


class SweepProgress:
    """The progress output of one sweep: pass :meth:`plan` as ``on_plan`` and :meth:`result` as
    ``on_result`` (both from the calling thread), then call :meth:`close`.

    Args:
        stream: where to write (standard error by default).
        mode: ``auto`` (dots; a bar on a terminal once the sweep is long), ``on`` (a bar from the
            start, wherever ``stream`` goes), ``off`` (dots only).
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
        self.mode, self.quiet, self.clock = mode, quiet, clock
        self.began = clock()
        self.planned = self.done = self.not_passed = 0
        self.bar = mode == "on"
        self._dots = 0  # dots on the current line
        self._drawn = 0.0
        self._width = 0  # length of the last line drawn

    def _tty(self) -> bool:
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError):  # a closed or odd stream: no terminal
            return False

    def _maybe_start_bar(self) -> None:
        if self.bar or self.mode != "auto" or self.quiet or not self._tty():
            return
        if self.planned > MIN_RUNS or self.clock() - self.began >= MIN_SECONDS:
            self.bar = True
            if self._dots:
                self.stream.write("\n")
                self._dots = 0

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
            self.stream.write("." if result.verdict == "passed" else "F")
            self._dots += 1
            self.stream.flush()

    def _draw(self, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self._drawn < REDRAW_S:
            return
        self._drawn = now
        width = shutil.get_terminal_size((80, 24)).columns
        line = render_bar(self.done, self.planned, now - self.began, width=width, not_passed=self.not_passed)
        self.stream.write("\r" + line + " " * max(0, self._width - len(line)))
        self._width = len(line)
        self.stream.flush()

    def close(self) -> None:
        """Draw the final bar and end the line (or end the line of dots)."""
        if self.bar:
            self._draw(force=True)
            self.stream.write("\n")
        elif not self.quiet:
            self.stream.write("\n")
        self.stream.flush()
