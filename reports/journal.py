"""The JSON journal of a stored run: run info, counts, metrics and every result in order of arrival.

Shape (format ``crashpoint.journal/1``)::

    {"format", "run": {run columns; started_at/ended_at ISO 8601 UTC; complete},
     "counts": {"runs", "passed", "failed", "error", "unknown", "cases"},
     "metrics": {metric: value|null}, "results": [stored result dicts]}
"""

from __future__ import annotations

import json
from typing import Any

from crashpoint.reports.summary import counts, metrics

FORMAT = "crashpoint.journal/1"


def document(stored: dict[str, Any]) -> dict[str, Any]:
    """The journal as a dict (see the module docstring)."""
    results = stored["results"]
    return {"format": FORMAT, "run": stored["run"], "counts": counts(results), "metrics": metrics(results),
            "results": results}


def render(stored: dict[str, Any]) -> str:
    """The journal as indented JSON text."""
    return json.dumps(document(stored), indent=2, ensure_ascii=False, default=str) + "\n"
