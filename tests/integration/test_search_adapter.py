"""``crashpoint search --adapter`` (issue 17, item 6): the generated search drives any engine's adapter.

Before, ``search`` had no ``--adapter`` (argparse refused it, exit 2), so an adapter's engine could not
be searched at all.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import main
from crashpoint.scenarios import builtin_pack

TESTS = Path(__file__).resolve().parents[1]
ADAPTER = "variants.adapters:no_compensation_on_cancel"


@pytest.mark.slow
def test_search_drives_an_adapter_and_its_repro_line_names_it(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(TESTS))
    case = builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml"
    code = main(["search", str(case), "--adapter", ADAPTER, "--kinds", "insert", "--schedules", "40",
                 "--seed", "20261130", "--max-faults", "3", "--json", str(tmp_path / "s.json"),
                 "--out", str(tmp_path / "repro")])
    out = capsys.readouterr().out
    assert code == 1, out
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["engine"] == "no-compensation-on-cancel"
    line = next(x.strip() for x in out.splitlines() if x.strip().startswith("reproduce: "))
    words = shlex.split(line.removeprefix("reproduce: "))
    assert words[-2:] == ["--adapter", ADAPTER]
    assert main(words[1:] + ["-q"]) == 1  # the repro fails on its own, on that adapter
    capsys.readouterr()
    assert main(words[1:-2] + ["-q"]) == 0  # and passes on the reference engine


def test_engine_and_adapter_exclude_each_other(capsys) -> None:
    case = builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml"
    assert main(["search", str(case), "--engine", "a:B", "--adapter", ADAPTER]) == 2
    assert "exclude each other" in capsys.readouterr().err
