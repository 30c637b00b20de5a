"""Charts as embedded images: matplotlib (Agg backend, no display) rendered to base64 PNG.

Each function returns a ``data:image/png;base64,...`` URI, ready for ``<img src=...>``, so an HTML
report stays one self-contained file. matplotlib is imported only here and only when a chart is
drawn (a worker process never pays for it).
"""

from __future__ import annotations

import base64
import io
from typing import Any, Sequence

COLORS = {"passed": "#2e7d32", "failed": "#c62828", "error": "#ef6c00", "unknown": "#6a1b9a", "unsupported": "#757575"}


def _pyplot():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80, bbox_inches="tight")
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def verdicts_by_case(per_case: dict[str, dict[str, int]]) -> str:
    """A horizontal stacked bar per case: its runs by verdict (``{case_id: counts}``)."""
    plt = _pyplot()
    names = list(per_case)
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(names) + 1.0))
    left = [0] * len(names)
    for verdict, color in COLORS.items():
        values = [per_case[n].get(verdict, 0) for n in names]
        ax.barh(names, values, left=left, color=color, label=verdict)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("runs")
    ax.tick_params(axis="y", labelsize=7)
    ax.legend(loc="lower right", fontsize=7)
    return _uri(fig)


def ratios(values: dict[str, float | None], labels: dict[str, str]) -> str:
    """A bar per ratio metric (0-100 %); metrics that are ``None`` are left out."""
    plt = _pyplot()
    shown = [(labels[k], 100 * v) for k, v in values.items() if v is not None and k in labels]
    fig, ax = plt.subplots(figsize=(7, 2.4))
    ax.barh([n for n, _ in shown], [v for _, v in shown], color="#1565c0")
    ax.set_xlim(0, 100)
    ax.set_xlabel("%")
    ax.invert_yaxis()
    return _uri(fig)


def trends(weeks: Sequence[str], series: dict[str, Sequence[float | None]]) -> str:
    """One line per series over the weeks (``None`` is a gap)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3))
    for name, values in series.items():
        ax.plot(list(weeks), [float("nan") if v is None else v for v in values], marker="o", label=name)
    ax.legend(fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    return _uri(fig)
