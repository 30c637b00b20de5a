"""Validation refuses what cannot be meant (issue 27 item 1): ``crashpoint validate`` (and ``crashpoint run`` before
its sweep) exits 2 with ``FILE:LINE: field FIELD: message`` on a gate of an effect no effect has, a human node the
graph lacks, two invariants or two cases of one name, a version that is the entry itself under another name; and
``Target.from_data`` checks exactly what the file schema checks. Each of these printed ``ok`` (or ran) before."""

from __future__ import annotations

import contextlib
import io
import textwrap
from pathlib import Path

import pytest

from crashpoint.errors import CaseError
from crashpoint.harness.cli.main import main
from crashpoint.harness.load.target import Target

CODE = '''
import crashpoint

@crashpoint.effect("issue_refund", key="key")
def issue_refund(order, key=None):
    return {"refund": order}

def charge(order):
    return {"charged": order}

class Builder:  # a graph as validation reads one: nodes, and compile
    nodes = {"__start__": None, "approve": None, "issue": None}
    def compile(self, checkpointer=None):
        return self

builder = Builder()
alias = builder

def check(run):
    return None
'''

TARGET = """target: t
engine: langgraph
entry: teamcode:builder
pythonpath: ["."]
inputs:
  - {{thread: a, input: {{x: 1}}}}
human:
  approve: [{{resume: yes}}]
{extra}"""


def _validate(tmp_path: Path, extra: str = "", files: dict[str, str] | None = None,
              command: str = "validate") -> tuple[int, str, str]:
    (tmp_path / "teamcode.py").write_text(textwrap.dedent(CODE))
    for name, text in (files or {}).items():
        (tmp_path / name).write_text(textwrap.dedent(text))
    path = tmp_path / "target.yaml"
    path.write_text(TARGET.format(extra=textwrap.dedent(extra)))
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([command, str(path)] + (["--crash", "none"] if command == "run" else []))
    return code, out.getvalue(), err.getvalue()


def _refused(result: tuple[int, str, str], where: str, *said: str) -> None:
    code, out, err = result
    assert code == 2 and not out.startswith("ok"), (code, out, err)
    assert err.count("\n") == 1 and f"target.yaml:{where}:" in err, err
    for s in said:
        assert s in err, err


def test_a_target_that_means_what_it_says_is_valid(tmp_path: Path) -> None:
    code, out, err = _validate(tmp_path, "gates: {issue_refund: approve}\ninvariants: [teamcode:check]\n"
                                         "effects: [teamcode:charge]\n")
    assert code == 0 and out.startswith("ok: target t"), err


def test_a_gate_on_an_effect_no_effect_has_is_refused(tmp_path: Path) -> None:
    """The issue's case: a misspelt effect in gates passed validate, and a graph that ignores the reviewer's denial
    then passed every run (the gate gated nothing)."""
    _refused(_validate(tmp_path, "gates: {issue_refnd: approve}\n"), "9: field gates.issue_refnd",
             "no effect has", "issue_refund")


def test_an_effect_named_under_effects_can_be_gated(tmp_path: Path) -> None:
    code, out, err = _validate(tmp_path, "gates: {charge: approve}\neffects: [teamcode:charge]\n")
    assert code == 0, err
    _refused(_validate(tmp_path, "gates: {charge: approve}\n"), "9: field gates.charge", "no effect has")


@pytest.mark.parametrize(("extra", "where"), [
    ("human: {aprove: [{resume: yes}]}\n", "9: field human.aprove"),
    ("cases:\n  - {name: c1}\n  - {name: c2, human: {review: [{resume: no}]}}\n", "11: field cases[1].human.review"),
    ("gates: {issue_refund: review}\n", "9: field gates.issue_refund"),
])
def test_a_node_the_graph_does_not_have_is_refused(tmp_path: Path, extra: str, where: str) -> None:
    text = TARGET.format(extra="")
    if extra.startswith("human:"):  # replace the target's own human
        extra_text = extra
        (tmp_path / "teamcode.py").write_text(textwrap.dedent(CODE))
        (tmp_path / "target.yaml").write_text(text.replace("human:\n  approve: [{resume: yes}]\n", "") + extra_text)
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["validate", str(tmp_path / "target.yaml")])
        where = where.replace("9:", "7:")
        result = (code, out.getvalue(), err.getvalue())
    else:
        result = _validate(tmp_path, extra)
    _refused(result, where, "which the graph does not have", "approve, issue")


def test_two_invariants_of_one_name_are_refused(tmp_path: Path) -> None:
    """Before, the second module's check replaced the first one's in the registry: one was never judged."""
    two = {"checks_a.py": "import crashpoint\n@crashpoint.invariant\ndef paid_once(run):\n    return None\n",
           "checks_b.py": "import crashpoint\n@crashpoint.invariant\ndef paid_once(run):\n    return False\n"}
    _refused(_validate(tmp_path, "invariants: [checks_a:paid_once, checks_b:paid_once]\n", two),
             "9: field invariants[0]", "two invariants are named 'paid_once'", "checks_a:paid_once",
             "checks_b:paid_once")
    same = {"checks_c.py": "import crashpoint\n@crashpoint.invariant(name='x')\ndef one(run):\n    return None\n"
                           "@crashpoint.invariant(name='x')\ndef two(run):\n    return False\n"}
    _refused(_validate(tmp_path, "invariants: [checks_c:one]\n", same), "9: field invariants[0]",
             "two invariants are named 'x'")


def test_two_invariants_of_one_name_are_unknown_when_judged(tmp_path: Path) -> None:
    """A target built in Python and swept without validation: the clash is ``unknown``, never one check dropped."""
    from crashpoint.harness.judge.target_rules import judge
    from crashpoint.harness.model.outcomes import TargetOutcome

    (tmp_path / "clash_a.py").write_text("import crashpoint\n@crashpoint.invariant\ndef clash_one(run):\n    return None\n")
    (tmp_path / "clash_b.py").write_text("import crashpoint\n@crashpoint.invariant\ndef clash_one(run):\n    return False\n")
    target = Target.from_data({"target": "t", "engine": "langgraph", "entry": "x:y", "pythonpath": [str(tmp_path)],
                               "inputs": [{"thread": "a", "input": {}}],
                               "invariants": ["clash_a:clash_one", "clash_b:clash_one"]})
    run = TargetOutcome("default", "sync", None, tmp_path, threads={"a": {"status": "finished", "values": {}}})
    failures, unknown = judge(target, run, None)
    assert any("two invariants are named 'clash_one'" in u for u in unknown), unknown


def test_a_version_that_is_the_entry_under_another_name_is_refused(tmp_path: Path) -> None:
    _refused(_validate(tmp_path, "versions: {v2: 'teamcode:alias'}\ncases:\n  - {name: d, deploy: v2}\n"),
             "9: field versions.v2", "'teamcode:alias' is the entry 'teamcode:builder' itself under another name")
    other = {"teamcode_v2.py": "from teamcode import Builder\nbuilder = Builder()\n"}
    code, out, err = _validate(tmp_path, "versions: {v2: 'teamcode_v2:builder'}\ncases:\n  - {name: d, deploy: v2}\n",
                               other)
    assert code == 0, err


def test_a_temporal_version_whose_code_is_the_targets_own_is_refused(tmp_path: Path) -> None:
    (tmp_path / "twf.py").write_text("class Refund: ...\nclass Notify: ...\nACTS = [print]\n"
                                     "class Refund2: ...\n")
    text = textwrap.dedent("""\
        target: t
        engine: temporal
        entry: twf:Refund
        pythonpath: ["."]
        inputs:
          - {thread: a, input: {x: 1}}
        temporal:
          workflows: [twf:Refund, twf:Notify]
          activities: [twf:ACTS]
          versions:
            same: {workflows: [twf:Notify, twf:Refund]}
            changed: {workflows: [twf:Refund2, twf:Notify]}
        """)
    (tmp_path / "target.yaml").write_text(text)
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = main(["validate", str(tmp_path / "target.yaml")])
    assert code == 2 and "target.yaml:11: field temporal.versions.same: version 'same': its workflows and " \
                         "activities are the target's own" in err.getvalue(), err.getvalue()


def test_two_cases_of_one_name_are_refused(tmp_path: Path) -> None:
    """Before, ``--crash none`` dropped the first case's golden run, and a full sweep judged case 1's crash runs
    against case 2's golden run."""
    _refused(_validate(tmp_path, "cases:\n  - {name: c}\n  - {name: c, human: {}}\n"), "11: field cases[1].name",
             "two cases are named 'c'")


@pytest.mark.parametrize("expect", ["expect: {a: {values: {}}}\n", "expect: {a: {effects: {}}}\n"])
def test_an_expect_that_expects_nothing_is_refused(tmp_path: Path, expect: str) -> None:
    """``expect: {a: {}}`` was refused and ``expect: {a: {values: {}}}`` accepted: a check that cannot fail (the
    attack on issue 27 item 1)."""
    code, out, err = _validate(tmp_path, expect)
    assert code == 2 and "should be non-empty" in err and "field expect.a." in err, (code, out, err)


def test_crashpoint_run_refuses_before_its_sweep(tmp_path: Path) -> None:
    """The same check before a sweep: no run is made of a target validate refuses."""
    _refused(_validate(tmp_path, "gates: {issue_refnd: approve}\n", command="run"), "9: field gates.issue_refnd")
    assert not list(tmp_path.glob("*.db")) and not (tmp_path / "runs").exists()


BASE = {"target": "t", "engine": "langgraph", "entry": "m:builder", "inputs": [{"thread": "a", "input": {}}]}


@pytest.mark.parametrize(("change", "field"), [
    ({"inputs": [{"thread": "order 1", "input": {}}]}, "inputs[0].thread"),
    ({"inputs": [{"thread": "order-1\n", "input": {}}]}, "inputs[0].thread"),
    ({"inputs": [{"thread": "a >> b", "input": {}}]}, "inputs[0].thread"),
    ({"cases": [{"name": "../../../x"}]}, "cases[0].name"),
    ({"cases": [{"name": "ok", "colour": "red"}]}, "cases[0].colour"),
    ({"durability": []}, "durability"),
    ({"budget_s": -1}, "budget_s"),
    ({"gates": {"pay": "bad node name!"}}, "gates.pay"),
])
def test_from_data_checks_what_the_file_schema_checks(change: dict, field: str) -> None:
    """Before, ``Target.from_data`` skipped the schema: thread ids with a space, a newline or `` >> `` crashed every run,
    and a case name ``../../../x`` put run folders outside the workdir."""
    with pytest.raises(CaseError) as caught:
        Target.from_data({**BASE, **change})
    assert caught.value.field == field and caught.value.line is None, str(caught.value)


def test_from_data_takes_the_schemas_defaults() -> None:
    target = Target.from_data(dict(BASE))
    assert target.durability == ["sync"] and target.budget_s == 60 and [c.name for c in target.cases] == ["default"]
    assert Target.from_data(target.to_data()).to_data() == target.to_data()


TOP = "target: t\nengine: langgraph\nentry: m:builder\n"


@pytest.mark.parametrize(("body", "said"), [
    (TOP + "inputs: [{thread: a, input: {x: 1}}\n", "YAML syntax error"),
    (TOP + "inputs: " + "[" * 5000 + "]" * 5000 + "\n", "nesting is deeper than 64 levels"),
    (TOP + "inputs: [{thread: a, input: {x: 1}}]\n" + "# padding\n" * 120_000, "the limit is 1048576"),
    ("# padding\n" * 120_000 + TOP + "inputs: [{thread: a, input: {x: 1}}]\n", "the limit is 1048576"),
])
def test_a_broken_target_file_is_named_as_one_not_as_a_missing_pack(tmp_path: Path, body: str, said: str) -> None:
    """Before, each was reported as "no pack.yaml in this folder or any folder above it"."""
    path = tmp_path / "target.yaml"
    path.write_text(body)
    for command in ("validate", "run"):
        err = io.StringIO()
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
            code = main([command, str(path)])
        assert code == 2 and said in err.getvalue() and "pack.yaml" not in err.getvalue(), err.getvalue()
        assert f"{path}:" in err.getvalue()


def test_checks_of_one_name_in_two_targets_modules_do_not_clash(tmp_path: Path) -> None:
    """Two targets judged in one process (a pytest session) whose check modules each define a check of one name: each
    target gets its own (only the modules a target names count)."""
    from crashpoint.api import resolve_invariants
    import sys

    (tmp_path / "own_a.py").write_text("import crashpoint\n@crashpoint.invariant\ndef shared_name(run):\n    return None\n")
    (tmp_path / "own_b.py").write_text("import crashpoint\n@crashpoint.invariant\ndef shared_name(run):\n    return False\n")
    sys.path.insert(0, str(tmp_path))
    try:
        a, b = resolve_invariants(["own_a:shared_name"]), resolve_invariants(["own_b:shared_name"])
        assert a["shared_name"].__module__ == "own_a" and b["shared_name"].__module__ == "own_b"
        assert resolve_invariants(["own_a:shared_name"])["shared_name"].__module__ == "own_a"
    finally:
        sys.path.remove(str(tmp_path))


def test_a_no_effect_list_naming_no_effect_is_refused(tmp_path: Path) -> None:
    _refused(_validate(tmp_path, "cases:\n  - {name: c, no_effect: [issue_refnd]}\n"), "10: field cases[0].no_effect[0]",
             "says it makes no 'issue_refnd', which no effect has")
    code, out, err = _validate(tmp_path, "cases:\n  - {name: c, no_effect: [issue_refund]}\n")
    assert code == 0, err


def test_a_compensation_naming_no_effect_is_refused(tmp_path: Path) -> None:
    """Issue 28 item 10: each name of a ``compensations`` entry (the effect, its undo, its unless) must be an effect
    the code makes, or the rule would judge nothing."""
    _refused(_validate(tmp_path, "effects: [teamcode:charge]\ncompensations: {issue_refund: {undo: charge, "
                                 "unless: [chrage]}}\n"),
             "10: field compensations.issue_refund.unless[0]", "compensations names effect 'chrage', which no effect has")
    _refused(_validate(tmp_path, "compensations: {issue_refund: void}\n"), "9: field compensations.issue_refund",
             "compensations names effect 'void'")
    code, out, err = _validate(tmp_path, "effects: [teamcode:charge]\ncompensations: {issue_refund: charge}\n")
    assert code == 0, err


def test_an_effects_entry_a_module_holds_by_name_is_refused(tmp_path: Path) -> None:
    """attack 27 N2: a module that imported the function by name before crashpoint wrapped it keeps the original,
    and calls through it are not observed (a sweep passed with them unseen)."""
    byname = "from teamcode import charge as _direct\n\ndef check(run):\n    return None\n"
    _refused(_validate(tmp_path, "effects: [teamcode:charge]\ninvariants: [byname:check]\n", {"byname.py": byname}),
             "9: field effects[0]", "byname._direct holds the effects: entry charge (teamcode:charge) unwrapped",
             "calls through it are not observed")
