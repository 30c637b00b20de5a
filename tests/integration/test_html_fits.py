"""Every table of the HTML reports fits the page (issue 24 item 5), measured in a real browser.

Before, the "same in N other run(s)" table of a failure group ran off the right edge (its reproduce commands, paths
and crash point ids have no break opportunity), and so did a timeline row with a long event text. Debian's headless
Chromium lays each report out in a window of :data:`WIDTH_PX` (a laptop's half screen; an A4 page prints about
720 px); a script added to a copy of the page (the report itself forbids scripts) writes each table's right edge
into the DOM, which ``--dump-dom`` returns. One test per table, each naming the table by the heading above it.

Skipped without Chromium on a laptop; a failure in CI (``.ci/run`` installs it).
"""

from __future__ import annotations

import functools
import json
import re
import subprocess
import tempfile
from datetime import date, timedelta
from pathlib import Path

import pytest

from crashpoint.reports import html, weekly
from crashpoint.reports.results_store import ResultStore
from needs import chromium
from stored_runs import broken_engine_run, load

pytestmark = pytest.mark.slow  # a sweep on a broken engine, a store, and Chromium per report (30 s in all, idle)

WIDTH_PX = 800
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--virtual-time-budget=2000", f"--window-size={WIDTH_PX},1000"]

#: Added before ``</body>`` of a copy: each table's label (the nearest heading or paragraph before it) and right
#: edge, and the page's width, as JSON in ``<pre id="fit">``.
MEASURE = """<script>
const view = document.documentElement.clientWidth, tables = [];
for (const t of document.querySelectorAll('table')) {
  let label = '', n = t;
  while (n && !label) {
    let p = n.previousElementSibling;
    while (p && !/^(H1|H2|H3|H4|P)$/.test(p.tagName)) p = p.previousElementSibling;
    if (p) label = p.textContent.trim(); else n = n.parentElement;
  }
  tables.push({label: label.slice(0, 60), right: t.getBoundingClientRect().right});
}
const out = {view: view, scroll: document.documentElement.scrollWidth, tables: tables};
const pre = document.createElement('pre'); pre.id = 'fit'; pre.textContent = JSON.stringify(out);
document.body.appendChild(pre);
</script>"""


def _measure(page_html: str) -> dict:
    """The layout of ``page_html`` in Chromium: ``{"view", "scroll", "tables": [{"label", "right"}]}`` (px)."""
    folder = Path(tempfile.mkdtemp(prefix="crashpoint-fit-"))
    page = folder / "page.html"
    measured = re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page_html)
    page.write_text(measured.replace("</body>", MEASURE + "</body>"), encoding="utf-8")
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={folder / 'profile'}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'<pre id="fit">(.*?)</pre>', done.stdout, re.S)
    assert found, "the measuring script did not run: " + done.stderr[-2000:]
    import html as htmllib

    return json.loads(htmllib.unescape(found.group(1)))


@functools.cache
def run_report() -> dict:
    """The layout of the HTML report of a real sweep on a broken engine (13 failed runs in groups)."""
    return _measure(html.render(load(broken_engine_run())))


LONG = "after_effect:" + "refunds.issueRefundWithAVeryLongToolNameThatHasNoSpaces" * 2


@functools.cache
def weekly_report() -> dict:
    """The layout of a 12-week weekly report whose alerts carry long unbroken ids."""
    url = f"sqlite:///{Path(tempfile.mkdtemp(prefix='crashpoint-fit-weekly-')) / 'results.db'}"
    store = ResultStore(url)
    run_id = store.begin_run({"engine": "reference", "pack": "refunds", "git_commit": "c" * 40})
    store.add_result(run_id, {"case_id": "retry_storm_case_with_a_long_identifier_" * 2, "crash_point": LONG,
                              "verdict": "passed", "failures": [], "wall_s": 0.1, "measures": {"retries": 9}})
    store.finish_run(run_id)
    today = date.today()
    report = weekly.weekly(store, today - timedelta(days=7 * 12 - 1), today)
    store.close()
    assert report["alerts"], "the seeded retry storm makes an alert"
    return _measure(weekly.render_html(report))


#: (report, label prefix of the table, how many tables carry it at least)
TABLES = [
    ("run", "Summary", 2), ("run", "Metrics", 1), ("run", "Cases", 1), ("run", "Durability coverage", 1),
    ("run", "Deliveries and kills", 1), ("run", "Trace timeline", 1), ("run", "The same in", 1),
    ("weekly", "Metrics by week", 1), ("weekly", "Alerts", 1),
]


@pytest.mark.parametrize("report, label, at_least", TABLES, ids=[f"{r}-{t}" for r, t, _ in TABLES])
def test_the_table_fits_the_page(report: str, label: str, at_least: int) -> None:
    layout = run_report() if report == "run" else weekly_report()
    tables = [t for t in layout["tables"] if t["label"].startswith(label)]
    assert len(tables) >= at_least, f"no table under {label!r}: {[t['label'] for t in layout['tables']]}"
    over = [t for t in tables if t["right"] > layout["view"] + 0.5]
    assert over == [], f"{len(over)} table(s) under {label!r} end at {max(t['right'] for t in over):.0f} px, " \
                       f"past the {layout['view']} px page"


@pytest.mark.parametrize("report", ["run", "weekly"])
def test_the_page_has_no_horizontal_scroll(report: str) -> None:
    layout = run_report() if report == "run" else weekly_report()
    assert layout["scroll"] <= layout["view"], (layout["scroll"], layout["view"])
