"""Fake worlds for tests that need tools with a delay (test code only)."""

from __future__ import annotations

import time
from typing import Any, Mapping

from crashpoint.fakes.world import build as build_world
from crashpoint.protocols import Probe, no_probe


class _Slow:
    def __init__(self, inner: Any, delay_s: float) -> None:
        self.inner, self.delay_s = inner, delay_s

    def call(self, tool: str, args: Mapping[str, Any], idempotency_key: str) -> dict[str, Any]:
        time.sleep(self.delay_s)
        return self.inner.call(tool, args, idempotency_key)


def slow(run_dir: str, probe: Probe = no_probe) -> tuple[Any, Any]:
    """The standard fake world with every tool call 50 ms slower, so two workers overlap."""
    tools, clock = build_world(run_dir, probe)
    return _Slow(tools, 0.05), clock
