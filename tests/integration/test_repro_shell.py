"""Reproduce lines are pasted into a shell: they must run no code of a file name or an engine's crash
point, and must still reproduce (issue 17, "Reproduce lines are not shell-safe")."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from crashpoint.harness.cli.main import main, repro_command
from crashpoint.harness.cli.search import repro_line
from crashpoint.harness.run.certification import repro
from crashpoint.scenarios import builtin_pack

TESTS = Path(__file__).resolve().parents[1] if (Path(__file__).parents[1] / "variants").is_dir() \
    else Path(__file__).resolve().parent
HOSTILE_POINT = "before_effect:it's$(touch Q)`touch R`"


def _argv_in_shell(line: str, cwd: Path) -> list[str]:
    """The words a POSIX shell hands to ``crashpoint`` when ``line`` is pasted (a stub prints them)."""
    stub = cwd / "bin"
    stub.mkdir(exist_ok=True)
    (stub / "crashpoint").write_text(f"#!{sys.executable}\nimport json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    (stub / "crashpoint").chmod(0o755)
    out = subprocess.run(["sh", "-c", line], cwd=cwd, capture_output=True, text=True, check=True,
                         env={**os.environ, "PATH": f"{stub}{os.pathsep}{os.environ['PATH']}"})
    return json.loads(out.stdout)


def test_every_repro_line_survives_a_shell_with_hostile_names(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    case = tmp_path / "x$(touch P).yaml"
    from types import SimpleNamespace

    from crashpoint.harness.judge.verdict import target_repro

    lines = {"run": repro_command(case, HOSTILE_POINT, "m:E;touch S", "kill-cold", "a:B|touch T"),
             "target": target_repro(SimpleNamespace(file=str(case)), "c;touch W", "sync", HOSTILE_POINT),
             "certify": repro(case, HOSTILE_POINT, "a:B'$(touch U)"),
             "search": repro_line(case, "m:E&&touch V")}
    argv = {name: _argv_in_shell(line, tmp_path) for name, line in lines.items()}
    assert not [p.name for p in tmp_path.iterdir() if len(p.name) == 1], "a pasted reproduce line ran code"
    assert argv["run"] == ["run", case.name, "--crash-point", HOSTILE_POINT, "--engine", "m:E;touch S",
                           "--crash-mode", "kill-cold", "--adapter", "a:B|touch T"]
    assert argv["certify"] == ["run", case.name, "--crash-point", HOSTILE_POINT, "--adapter", "a:B'$(touch U)"]
    assert argv["search"] == ["run", case.name, "--crash", "none", "--engine", "m:E&&touch V"]
    assert argv["target"] == ["run", case.name, "--case", "c;touch W", "--durability", "sync",
                              "--crash-point", HOSTILE_POINT]


def test_a_pasted_reproduce_line_reproduces_the_failure(tmp_path: Path, monkeypatch, capsys) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(builtin_pack("refunds"), pack)
    for f in (pack / "cases").iterdir():
        if f.name != "cancel_while_waiting_compensates_draft.yaml":
            f.unlink()
    (pack / "cases" / "cancel_while_waiting_compensates_draft.yaml").rename(pack / "cases" / "x$(touch P).yaml")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(TESTS))
    out = tmp_path / "out.json"
    assert main(["run", "pack", "--crash", "none", "--engine", "variants.engines:NoCompensationOnCancel",
                 "--json", str(out), "--no-progress"]) == 1
    line = json.loads(out.read_text())["results"][0]["reproduce"]
    capsys.readouterr()
    bindir = Path(sys.executable).parent
    done = subprocess.run(["sh", "-c", line], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}",
                               "PYTHONPATH": os.pathsep.join([str(TESTS), os.environ.get("PYTHONPATH", "")])})
    assert not (tmp_path / "P").exists(), "the pasted line ran code from the case file's name"
    assert done.returncode == 1, done.stderr
    assert "compensation refunds.cancelRefundDraft was never applied" in done.stdout
