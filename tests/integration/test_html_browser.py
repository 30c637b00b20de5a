"""The HTML report in a real browser: Debian's headless Chromium loads the file and dumps the DOM
after it rendered (``--dump-dom``), so what is checked is what a person sees, not the source text.

Skipped without Chromium on a laptop; a failure in CI (``.ci/run`` installs it).
"""

from __future__ import annotations

import html as htmllib
import re
import subprocess
from pathlib import Path

from crashpoint.reports import html
from needs import chromium
from stored_runs import SCRIPT_NAME, broken_engine_run, hostile_run, load

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--virtual-time-budget=2000"]


def dump_dom(page: Path, profile: Path) -> str:
    """The DOM of ``page`` after Chromium loaded it (and ran any script it would run)."""
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={profile}", "--dump-dom", page.as_uri()],
                          capture_output=True, text=True, timeout=90, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def text_of(dom: str) -> str:
    """The visible text of a DOM dump (tags dropped, entities decoded)."""
    return htmllib.unescape(re.sub(r"<[^>]+>", " ", dom))


def test_the_report_opens_with_its_summary_and_a_failure_timeline(tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(html.render(load(broken_engine_run())), encoding="utf-8")
    dom = dump_dom(page, tmp_path / "profile")
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert title.startswith("crashpoint: FAILED - refunds 1.0.0 on variants.engines:EffectBeforeCheckpointNoKey")
    seen = text_of(dom)
    assert "Summary" in seen and "Runs that did not pass (13)" in seen
    assert "Trace timeline" in seen and "workflow_resumed" in seen and "Deliveries and kills" in seen
    assert re.search(r"kill\s+worker=1, crash_point=after_effect:refunds\.draftRefundRequest", seen)
    assert len(re.findall(r'<img [^>]*src="data:image/png;base64,', dom)) == 2


def test_a_script_in_a_case_name_is_shown_as_text_and_never_runs(tmp_path: Path) -> None:
    page = tmp_path / "hostile.html"
    page.write_text(html.render(load(hostile_run())), encoding="utf-8")
    dom = dump_dom(page, tmp_path / "profile")
    title = re.search(r"<title>(.*?)</title>", dom, re.S).group(1)
    assert "pwned" not in title and "img" != title.strip()  # no injected script or handler ran
    assert "<script" not in dom and "<img src=\"x\"" not in dom  # no element was injected
    assert SCRIPT_NAME in text_of(dom)  # the name is on the page, as text
    assert "&lt;script&gt;document.title='pwned'&lt;/script&gt;" in dom
