"""Each YAML / pack hazard through ``crashpoint validate``: exit 2, one line naming the file, the line,
the field and the limit. The messages are part of the contract (README, "Hostile input")."""

from __future__ import annotations

import contextlib
import io
import os
import shutil
from pathlib import Path
from typing import Callable

import pytest

from crashpoint.harness.cli.main import main

REFUNDS = Path(__file__).resolve().parents[2] / "scenarios" / "refunds"
TAG_REFUSED = "is not allowed: only plain JSON values are read (no !!python/* or custom tags)"


def _pack(root: Path) -> Path:
    shutil.copytree(REFUNDS, root, ignore=shutil.ignore_patterns("cases"))
    (root / "cases").mkdir()
    shutil.copy(REFUNDS / "cases" / "draft_fatal_failure.yaml", root / "cases")
    return root


def _case(text: str) -> Callable[[Path], Path]:
    def make(pack: Path) -> Path:
        (pack / "cases" / "h.yaml").write_text(text)
        return pack / "cases" / "h.yaml"
    return make


def _pack_edit(old: str, new: str) -> Callable[[Path], Path]:
    def make(pack: Path) -> Path:
        (pack / "pack.yaml").write_text((pack / "pack.yaml").read_text().replace(old, new))
        return pack
    return make


def _workflow_symlink(pack: Path) -> Path:
    outside = pack.parent / "outside.yaml"
    outside.write_text((pack / "workflows" / "refund.yaml").read_text())
    (pack / "workflows" / "refund.yaml").unlink()
    os.symlink(outside, pack / "workflows" / "refund.yaml")
    return pack


def _case_symlink(pack: Path) -> Path:
    outside = pack.parent / "outcase.yaml"
    shutil.copy(REFUNDS / "cases" / "refund_approved_happy_path.yaml", outside)
    os.symlink(outside, pack / "cases" / "evil.yaml")
    return pack


LAUGHS = ('a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
          "b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\nc: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\n")

#: hazard -> (how to make it, file:line the message names, the message after it)
HAZARDS = {
    "billion laughs": (_case(LAUGHS), "cases/h.yaml:2", "field b[0]: YAML aliases are not allowed (*a); "
                                                         "write the value out"),
    "!!python/object": (_case("case_id: x\nevents: []\nexpected: !!python/object/apply:os.system ['true']\n"),
                        "cases/h.yaml:3", f"field expected: YAML tag !!python/object/apply:os.system {TAG_REFUSED}"),
    "!!python/name": (_case("case_id: !!python/name:os.system\nevents: []\nexpected: {}\n"), "cases/h.yaml:1",
                      f"field case_id: YAML tag !!python/name:os.system {TAG_REFUSED}"),
    "custom tag": (_case("case_id: x\nevents: !include other.yaml\nexpected: {}\n"), "cases/h.yaml:2",
                   f"field events: YAML tag !include {TAG_REFUSED}"),
    "merge key": (_case("case_id: x\nevents: []\nexpected:\n  <<: {final_status: failed}\n"), "cases/h.yaml:4",
                  "field expected: YAML merge keys (<<) are not allowed; write the fields out"),
    "huge file": (_case("case_id: x\ndescription: " + "a" * (2 << 20) + "\nevents: []\nexpected: {}\n"),
                  "cases/h.yaml:1", "file is 2097201 bytes; the limit is 1048576"),
    "deep nesting": (_case("case_id: x\nevents: []\nexpected: {}\ninput: " + "[" * 200 + "]" * 200 + "\n"),
                     "cases/h.yaml:4", "nesting is deeper than 64 levels"),
    "workflow ../": (_pack_edit("workflows/refund.yaml", "../../etc/refund.yaml"), "pack.yaml:8",
                     "field workflows.refund: '../../etc/refund.yaml' points outside the pack folder"),
    "workflow absolute path": (_pack_edit("workflows/refund.yaml", "/etc/passwd"), "pack.yaml:8",
                               "field workflows.refund: must be a path relative to the pack folder, got '/etc/passwd'"),
    "workflow symlink out": (_workflow_symlink, "pack.yaml:8",
                             "field workflows.refund: 'workflows/refund.yaml' points outside the pack folder"),
    "case symlink out": (_case_symlink, "cases/evil.yaml", "points outside the pack"),
    "cases folder ../": (_pack_edit("cases: cases", "cases: ../"), "pack.yaml:25",
                         "field cases: '../' points outside the pack folder"),
    "cases folder absolute": (_pack_edit("cases: cases", "cases: /tmp"), "pack.yaml:25",
                              "field cases: must be a path relative to the pack folder, got '/tmp'"),
}


@pytest.mark.parametrize("hazard", list(HAZARDS))
def test_hazard_is_refused_with_its_message(tmp_path: Path, hazard: str) -> None:
    make, where, message = HAZARDS[hazard]
    pack = _pack(tmp_path / "pack")
    target = make(pack)
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(["validate", str(target)])
    text = err.getvalue()
    assert code == 2
    assert text.count("\n") == 1 and text.startswith(f"crashpoint: error: {pack}/{where}:"), text
    assert message in text, text
