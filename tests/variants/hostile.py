"""An adapter whose engine strings are hostile (test code only): the stop reason carries HTML, table
breakers, control characters, a lone surrogate, Markdown mentions and links, bidi controls, and is
megabytes long. Every renderer must escape it for its format and truncate it, and nothing may raise."""

from __future__ import annotations

from typing import Any

from crashpoint.harness.adapters.protocol import RunContext
from crashpoint.harness.adapters.reference import ReferenceAdapter

#: One copy of every hazard; the stop reason is this, then :data:`PAD` characters of padding.
HAZARDS = ("<script>alert(1)</script><b>bold</b> | cell | \n## heading\r\n\x00NUL \x1b[31mESC red \x07 "
           "\ud800 lone surrogate @here @everyone https://evil.example/x [link](https://evil.example) "
           "\u202eevil\u202c \u2066iso\u2069 ]]> &amp; `tick` ```fence")
PAD = 5_000_000


class HostileStopReason(ReferenceAdapter):
    """The reference engine, with the hostile stop reason on every terminal status."""

    def __init__(self) -> None:
        super().__init__(name="hostile\x1b[31m-stop-reason\u202e")  # its name reaches the terminal too

    def status(self, run: RunContext, workflow_id: str) -> dict[str, Any]:
        out = super().status(run, workflow_id)
        if out.get("stop_reason"):
            out["stop_reason"] = HAZARDS + "A" * PAD
        return out
