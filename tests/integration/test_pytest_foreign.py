"""crashpoint's pytest items depend on no other plugin's markers or flags (issue 17 item 3).

With ordeal installed (it owns ``--chaos`` and ``--chaos-seed``, and skips every item whose keywords
hold ``chaos``: any item under a folder named ``chaos``), ``pytest --crashpoint-chaos`` gave
"7 skipped", exit 0, plain ``pytest`` skipped the golden case, and the header advertised
``--chaos-seed last``, which ordeal owns. Skipped without ordeal on a laptop; failed in CI, whose
``test`` extra installs it.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest

from needs import need

pytest_plugins = ("pytester",)

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
CASE = "draft_fatal_failure.yaml"  # 6 crash points


@pytest.fixture()
def project(pytester: pytest.Pytester) -> Path:
    """A project whose pack sits in a folder named ``chaos`` (the name gives every item the keyword)."""
    need(importlib.util.find_spec("ordeal") is not None, "ordeal is not installed (pip install ordeal)")
    dst = pytester.path / "chaos" / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    shutil.copy(PACK / "cases" / CASE, dst / "cases")
    return dst


def test_crashpoint_chaos_runs_every_item_with_ordeal_installed(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project), "--crashpoint-chaos", "--crashpoint-schedules", "1")
    assert "ordeal" in result.stdout.str()  # ordeal's plugin is loaded in this session
    result.assert_outcomes(passed=8)  # golden + 6 kills + the schedules item; nothing skipped


def test_plain_pytest_runs_the_golden_case_with_ordeal_installed(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project))
    result.assert_outcomes(passed=1)


def test_the_header_advertises_only_our_options(pytester: pytest.Pytester, project: Path) -> None:
    golden = pytester.runpytest(str(project), "--co")
    golden.stdout.fnmatch_lines(["*enable chaos with --crashpoint-chaos (--chaos belongs to another plugin)*"])
    chaos = pytester.runpytest(str(project), "--crashpoint-chaos", "--crashpoint-seed", "5", "--co")
    chaos.stdout.fnmatch_lines(["*crashpoint: chaos seed 5*same schedules: --crashpoint-seed 5 or --crashpoint-seed last*"])
    assert "--chaos-seed" not in chaos.stdout.str()


def test_ordeals_chaos_flag_does_not_switch_ours_on(pytester: pytest.Pytester, project: Path) -> None:
    result = pytester.runpytest(str(project), "--chaos", "--co")
    assert result.ret == pytest.ExitCode.OK
    result.stdout.fnmatch_lines(["*crashpoint: golden runs only*", "*1 test collected*"])
