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


#: Pixels per inch of the images; with :data:`LABEL_PT`, case labels are set on a 14 px em (7.8 px before,
#: about 6 px of capital height).
DPI = 100
#: Font size of tick labels and the legend, in points (1/72 inch).
LABEL_PT = 10


def _uri(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    _pyplot().close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def verdicts_figure(per_case: dict[str, dict[str, int]]) -> Any:
    """The figure of :func:`verdicts_by_case`: a horizontal stacked bar per case, its runs by verdict.
    The legend sits above the axes, outside them, so it can hide no bar (inside, at the lower right,
    it covered the last bar's failed part)."""
    plt = _pyplot()
    names = list(per_case)
    fig, ax = plt.subplots(figsize=(8, 0.32 * len(names) + 1.2))
    left = [0] * len(names)
    for verdict, color in COLORS.items():
        values = [per_case[n].get(verdict, 0) for n in names]
        ax.barh(names, values, left=left, color=color, label=verdict)
        left = [a + b for a, b in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("runs", fontsize=LABEL_PT)
    ax.tick_params(axis="both", labelsize=LABEL_PT)
    ax.legend(loc="lower left", bbox_to_anchor=(0, 1.01), ncol=len(COLORS), fontsize=LABEL_PT, frameon=False,
              borderaxespad=0)
    return fig


def verdicts_by_case(per_case: dict[str, dict[str, int]]) -> str:
    """A horizontal stacked bar per case: its runs by verdict (``{case_id: counts}``), as a data URI."""
    return _uri(verdicts_figure(per_case))


def ratios(values: dict[str, float | None], labels: dict[str, str]) -> str:
    """A bar per ratio metric (0-100 %); metrics that are ``None`` are left out."""
    plt = _pyplot()
    shown = [(labels[k], 100 * v) for k, v in values.items() if v is not None and k in labels]
    fig, ax = plt.subplots(figsize=(8, 2.6))
    ax.barh([n for n, _ in shown], [v for _, v in shown], color="#1565c0")
    ax.set_xlim(0, 100)
    ax.set_xlabel("%", fontsize=LABEL_PT)
    ax.tick_params(axis="both", labelsize=LABEL_PT)
    ax.invert_yaxis()
    return _uri(fig)


def trends(weeks: Sequence[str], series: dict[str, Sequence[float | None]]) -> str:
    """One line per series over the weeks (``None`` is a gap)."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3))
    for name, values in series.items():
        ax.plot(list(weeks), [float("nan") if v is None else v for v in values], marker="o", label=name)
    ax.legend(fontsize=LABEL_PT)
    ax.tick_params(axis="both", labelsize=LABEL_PT)
    return _uri(fig)
