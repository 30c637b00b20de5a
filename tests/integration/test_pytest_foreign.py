"""crashpoint's pytest items beside another plugin that owns ``--chaos`` (ordeal), in an environment of its own.

ordeal owns ``--chaos`` and ``--chaos-seed`` and skips every item whose keywords hold ``chaos`` (any item under a
folder named ``chaos``). Before issue 17 item 3, ``pytest --crashpoint-chaos`` there gave "7 skipped", exit 0,
plain ``pytest`` skipped the golden case, and the header advertised ``--chaos-seed last``, which ordeal owns.
Before issue 24 item 2, ``pytest --chaos`` there ran crashpoint's golden runs only, silently; and the ``test`` extra
installed ordeal into the project's own venv, where ``pytest --chaos`` then did no crashpoint chaos at all. The
``test`` extra no longer installs ordeal: these tests make a venv of their own that holds ordeal and sees the
current venv's packages (crashpoint included) through a ``.pth`` file, so ordeal never enters the user's venv.
"""

from __future__ import annotations

import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from needs import need

pytestmark = pytest.mark.slow  # a venv with ordeal (pip from the local mirror), then pytest in subprocesses

pytest_plugins = ("pytester",)

PACK = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
CASE = "draft_fatal_failure.yaml"  # 6 crash points


@pytest.fixture(scope="module")
def ordeal_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The interpreter of a new venv holding ordeal, which sees this venv's site-packages (crashpoint, pytest)."""
    venv = tmp_path_factory.mktemp("ordeal-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                              check=True, capture_output=True, text=True).stdout.strip())
    ours = [p for p in dict.fromkeys([sysconfig.get_path("purelib"), *site.getsitepackages()]) if Path(p).is_dir()]
    # addsitedir (not a bare path line) so that the .pth files there, crashpoint's editable install among them, load
    (own / "crashpoint-parent-venv.pth").write_text("".join(f"import site; site.addsitedir({p!r})\n" for p in ours))
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(own), "ordeal"],
                          capture_output=True, text=True, timeout=300)
    need(done.returncode == 0, f"pip install ordeal failed: {done.stderr.strip()[-500:]}")
    check = subprocess.run([str(python), "-c", "import ordeal, crashpoint.harness.pytest.plugin; print(ordeal.__file__)"],
                           capture_output=True, text=True)
    assert check.returncode == 0 and check.stdout.startswith(str(own)), check.stdout + check.stderr
    return python


@pytest.fixture()
def project(pytester: pytest.Pytester) -> Path:
    """A project whose pack sits in a folder named ``chaos`` (the name gives every item the keyword)."""
    dst = pytester.path / "chaos" / "refunds"
    shutil.copytree(PACK, dst, ignore=shutil.ignore_patterns("cases"))
    (dst / "cases").mkdir()
    shutil.copy(PACK / "cases" / CASE, dst / "cases")
    return dst


def _pytest(pytester: pytest.Pytester, python: Path, *args: str) -> pytest.RunResult:
    # langsmith's and faker's plugins cost seconds of import and are no part of this
    return pytester.run(str(python), "-m", "pytest", "-p", "no:langsmith_plugin", "-p", "no:faker", "-p",
                        "no:cacheprovider", *args, timeout=600)


def test_chaos_runs_crashpoints_chaos_beside_ordeals(pytester: pytest.Pytester, ordeal_python: Path,
                                                     project: Path) -> None:
    result = _pytest(pytester, ordeal_python, str(project), "--chaos", "--crashpoint-schedules", "1")
    out = result.stdout.str()
    assert "ordeal" in out.split("plugins:", 1)[1].splitlines()[0]  # ordeal's plugin is loaded in this session
    result.stdout.fnmatch_lines(["crashpoint: --chaos is shared with plugin ordeal: crashpoint honours it too*",
                                 "crashpoint: chaos on*"])
    result.assert_outcomes(passed=8)  # golden + 6 kills + the schedules item; nothing skipped
    assert "no crash run happened" not in out


def test_crashpoint_chaos_runs_every_item_with_ordeal_installed(pytester: pytest.Pytester, ordeal_python: Path,
                                                                project: Path) -> None:
    """Without ``--chaos`` ordeal skips every item with the ``chaos`` keyword; crashpoint's stay unskipped."""
    result = _pytest(pytester, ordeal_python, str(project), "--crashpoint-chaos", "--crashpoint-schedules", "1")
    result.assert_outcomes(passed=8)
    assert "shared with plugin" not in result.stdout.str()


def test_plain_pytest_runs_the_golden_case_and_says_no_crash_run_happened(pytester: pytest.Pytester,
                                                                          ordeal_python: Path, project: Path) -> None:
    result = _pytest(pytester, ordeal_python, str(project))
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["crashpoint: golden runs only; enable chaos with --chaos (shared with plugin ordeal) "
                                 "or --crashpoint-chaos",
                                 "crashpoint: no crash run happened (1 case(s) ran their golden run only)*"])


def test_the_header_advertises_only_our_seed_option(pytester: pytest.Pytester, ordeal_python: Path,
                                                    project: Path) -> None:
    chaos = _pytest(pytester, ordeal_python, str(project), "--crashpoint-chaos", "--crashpoint-seed", "5", "--co")
    chaos.stdout.fnmatch_lines(["*crashpoint: chaos seed 5*same schedules: --crashpoint-seed 5 or --crashpoint-seed last*"])
    assert "--chaos-seed" not in chaos.stdout.str()  # ordeal's (an int): `last` would not parse there
