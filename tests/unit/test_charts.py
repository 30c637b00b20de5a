"""The HTML report's charts are readable (issue 17, "in the HTML report the chart legend hides the last
bar's failed part and case labels are about 6 px")."""

from __future__ import annotations

import pytest
from installed import needs

from crashpoint.reports import charts

pytestmark = needs("matplotlib")

#: A pack whose last case has failures: the bar the old in-axes legend (lower right) covered.
PER_CASE = {f"case_{i:02d}_with_a_realistic_name": {"passed": 20, "failed": 0} for i in range(12)}
PER_CASE["case_99_last_with_failures"] = {"passed": 14, "failed": 6, "error": 1}


def test_legend_hides_no_bar() -> None:
    fig = charts.verdicts_figure(PER_CASE)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches if p.get_width() > 0]
    assert bars and not [b for b in bars if b.overlaps(legend)], "the legend covers a bar"
    charts._pyplot().close(fig)


def test_case_labels_are_big_enough_to_read() -> None:
    fig = charts.verdicts_figure(PER_CASE)
    labels = fig.axes[0].get_yticklabels()
    px = min(label.get_fontsize() for label in labels) * charts.DPI / 72
    assert px >= 12, f"case labels are {px:.1f} px"
    charts._pyplot().close(fig)
