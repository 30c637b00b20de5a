"""The crash modes and the stored crash label: a leaf module with no imports, so that the command
line can offer ``--crash-mode`` without importing the driver (``crashpoint --version`` stays fast)."""

from __future__ import annotations

#: How a crash happens and how workers start; see :class:`crashpoint.harness.run.pack_driver.Driver`.
CRASH_MODES = ("kill", "kill-cold", "inprocess")


def crash_label(crash: str, crash_mode: str) -> str:
    """The crash setting a run is stored and resumed under: ``crash`` (``every``...) for real kills of
    forked workers, ``crash+MODE`` otherwise (``every+inprocess``), so that results of simulated
    crashes are never mixed with, nor resumed as, real-kill results."""
    return crash if crash_mode == "kill" else f"{crash}+{crash_mode}"
