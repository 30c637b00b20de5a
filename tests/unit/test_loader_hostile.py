"""Hostile input for crashpoint.harness.load.loader: every case is one CaseError with file, line and field.

Each test here reproduces a hole an adversarial tester found (a raw exception at run time,
a silently skipped file, a check that always passes, a pathological YAML file) and pins
the single, located error the loader now gives instead.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from crashpoint.errors import CaseError
from crashpoint.harness.load import loader
from crashpoint.harness.load.loader import load_case, load_pack, load_target, load_yaml
from crashpoint.scenarios import SCHEMA_DIR, builtin_pack

SEED = "approval_timeout_after_refund_draft.json"
NAME_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$"
ID_PATTERN = "^[A-Za-z0-9_][A-Za-z0-9_-]{0,127}$"


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, old
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def raises(fn, *args, line: bool = True) -> CaseError:
    """The one CaseError ``fn(*args)`` raises; its str() must be one line in the FILE:LINE form.

    ``line=False``: an error about a path itself (not a regular file, a subfolder), which
    has no line, like "file not found".
    """
    with pytest.raises(CaseError) as info:
        fn(*args)
    err = info.value
    assert "\n" not in str(err), repr(str(err))
    assert err.file is not None, str(err)
    if line:
        assert err.line is not None and str(err).startswith(f"{err.file}:{err.line}:"), str(err)
    else:
        assert err.line is None and str(err).startswith(f"{err.file}: "), str(err)
    return err


def case_text(extra: str = "", events: str = "[]", expected: str = "{}") -> str:
    return f"case_id: c\nevents: {events}\nexpected: {expected}\n{extra}"


# ---------------------------------------------------------------- 1. integers are not floats

@pytest.mark.parametrize("events, expected, field", [
    ("[{type: tool_success, tool: refunds.issueRefund, times: 1.0}]", "{}", "events[0].times"),
    ("[{type: tool_failure, tool: refunds.issueRefund, times: 2.0}]", "{}", "events[0].times"),
    ("[{type: cancel, deliveries: 1.0}]", "{}", "events[0].deliveries"),
    ("[{type: start, deliveries: 3.0}]", "{}", "events[0].deliveries"),
    ("[{type: approval_granted, approval_id: ap_1, deliveries: 2.0}]", "{}", "events[0].deliveries"),
    ("[]", "{effects: {draft_refund: 1.0}}", "expected.effects.draft_refund"),
])
def test_float_is_not_an_integer_in_a_case(pack_dir: Path, pack: loader.Pack, events: str, expected: str,
                                           field: str) -> None:
    path = write(pack_dir / "cases" / "f.yaml", case_text(events=events, expected=expected))
    err = raises(load_case, path, pack)
    assert err.field == field and "is not of type 'integer'" in err.message, str(err)


@pytest.mark.parametrize("old, new, line, field", [
    ("        retries: 1\n", "        retries: 1.0\n", 43, "phases[1].tasks[1].retries"),
    ("version: 1\n", "version: 1.0\n", 3, "version"),
])
def test_float_is_not_an_integer_in_a_workflow(pack_dir: Path, old: str, new: str, line: int, field: str) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    edit(wf, old, new)
    err = raises(load_pack, pack_dir)
    assert (err.file, err.line, err.field) == (str(wf), line, field)
    assert err.message == "1.0 is not of type 'integer'"


def test_booleans_are_still_not_integers(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "b.yaml", case_text(events="[{type: cancel, deliveries: true}]"))
    assert raises(load_case, path, pack).message == "True is not of type 'integer'"


# ---------------------------------------------------------------- 2. only JSON values

@pytest.mark.parametrize("value, message", [
    ("2024-01-01", "not a JSON value: date 2024-01-01"),
    ("2024-01-01 10:00:00", "not a JSON value: datetime 2024-01-01 10:00:00"),
    ("!!binary aGVsbG8=", "not a JSON value: bytes"),
    ("!!set {a, b}", "not a JSON value: set"),
    ("!!omap [a: 1, b: 2]", "not a JSON value: omap"),
    ("!!pairs [a: 1, b: 2]", "not a JSON value: pairs"),
    (".nan", "not a JSON value: nan"),
    (".inf", "not a JSON value: inf"),
    ("-.inf", "not a JSON value: -inf"),
    ("1.0e+999", "not a JSON value: inf"),
])
def test_non_json_values_in_input(pack_dir: Path, pack: loader.Pack, value: str, message: str) -> None:
    path = write(pack_dir / "cases" / "j.yaml", case_text(f"input:\n  order: o1\n  when: {value}\n"))
    err = raises(load_case, path, pack)
    assert (err.line, err.field) == (6, "input.when"), str(err)
    assert err.message.startswith(message), str(err)


def test_non_json_value_in_a_list_and_in_a_workflow(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "l.yaml", case_text("tags:\n  - a\n  - 2024-01-01\n"))
    err = raises(load_case, path, pack)
    assert (err.line, err.field) == (6, "tags[1]") and "date" in err.message
    wf = pack_dir / "workflows" / "refund.yaml"
    edit(wf, "reason: \"$input.reason\"", "reason: .nan")
    err = raises(load_pack, pack_dir)
    assert (err.file, err.line, err.field) == (str(wf), 19, "phases[0].tasks[0].args.reason")
    assert err.message.startswith("not a JSON value: nan")


def test_non_json_value_in_pack_yaml(pack_dir: Path) -> None:
    edit(pack_dir / "pack.yaml", "cases: cases", "cases: cases\nreleased: 2024-01-01")
    err = raises(load_pack, pack_dir)
    assert (err.field, err.line) == ("released", 26) and err.message.startswith("not a JSON value: date")


@pytest.mark.parametrize("value, fragment", [
    ("!!float nope", "could not convert"),
    ("!!int nope", "invalid literal"),
    ("!!timestamp nope", "timestamp"),
    ("!!binary '@@@'", "binary"),
])
def test_bad_explicit_tags_are_located(pack_dir: Path, pack: loader.Pack, value: str, fragment: str) -> None:
    path = write(pack_dir / "cases" / "t.yaml", case_text(f"input:\n  x: {value}\n"))
    err = raises(load_case, path, pack)
    assert err.line == 5 and fragment in err.message, str(err)


def test_merge_keys_are_refused(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "m.yaml", case_text("input:\n  <<: {2024-01-01: x}\n"))
    err = raises(load_case, path, pack)
    assert (err.line, err.field) == (5, "input") and "merge keys (<<) are not allowed" in err.message


# ---------------------------------------------------------------- 3. aliases, size, depth

BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def test_alias_bomb_is_refused_before_expanding(tmp_path: Path) -> None:
    path = write(tmp_path / "bomb.yaml", BILLION_LAUGHS)
    err = raises(load_yaml, path)
    assert (err.line, err.field) == (2, "b[0]")
    assert err.message.startswith("YAML aliases are not allowed (*a)")


@pytest.mark.parametrize("text, line, field, name", [
    ("a: &a {self: *a}\n", 1, "a.self", "a"),
    ("x: &anchor 5\ny:\n  - 1\n  - *anchor\n", 4, "y[1]", "anchor"),
    ("*top\n", 1, None, "top"),
])
def test_any_alias_is_refused(tmp_path: Path, text: str, line: int, field: str | None, name: str) -> None:
    err = raises(load_yaml, write(tmp_path / "a.yaml", text))
    assert (err.line, err.field) == (line, field)
    assert err.message.startswith(f"YAML aliases are not allowed (*{name})")


def test_alias_in_a_case_file(pack_dir: Path, pack: loader.Pack) -> None:
    path = write(pack_dir / "cases" / "al.yaml", case_text("input: &i {a: 1}\ntags: *i\n"))
    err = raises(load_case, path, pack)
    assert (err.line, err.field) == (5, "tags") and "YAML aliases are not allowed (*i)" in err.message


def test_file_size_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("# " + "x" * loader.MAX_FILE_BYTES + "\n", encoding="utf-8")
    size = path.stat().st_size
    err = raises(load_yaml, path)
    assert err.line == 1 and err.message == f"file is {size} bytes; the limit is 1048576"
    ok = tmp_path / "ok.yaml"
    ok.write_text("a: 1\n# " + "x" * (loader.MAX_FILE_BYTES - 10) + "\n", encoding="utf-8")
    assert ok.stat().st_size <= loader.MAX_FILE_BYTES and load_yaml(ok)[0] == {"a": 1}


def test_nesting_limit_block_and_flow(tmp_path: Path) -> None:
    block = "".join("  " * i + f"k{i}:\n" for i in range(100))
    err = raises(load_yaml, write(tmp_path / "deep.yaml", block))
    assert err.line == 65 and err.field == ".".join(f"k{i}" for i in range(64))
    assert err.message == "nesting is deeper than 64 levels"
    flow = tmp_path / "flow.yaml"
    flow.write_text("[" * 200_000 + "]" * 200_000, encoding="utf-8")  # no RecursionError either
    err = raises(load_yaml, flow)
    assert err.line == 1 and err.message == "nesting is deeper than 64 levels"
    ok = write(tmp_path / "ok.yaml", "[" * 64 + "]" * 64)
    assert load_yaml(ok)[0] is not None


# ---------------------------------------------------------------- 4. safe names

@pytest.mark.parametrize("old, new, line, field, pattern", [
    ("  - id: draft\n", "  - id: a/b\n", 6, "phases[0].id", ID_PATTERN),
    ("      - id: draft_refund\n", "      - id: ../x\n", 17, "phases[0].tasks[0].id", ID_PATTERN),
    ("      - id: draft_refund\n", "      - id: draft.refund\n", 17, "phases[0].tasks[0].id", ID_PATTERN),
    ("        checkpoint: refund_draft\n", "        checkpoint: \"a:b\"\n", 25, "phases[0].tasks[0].checkpoint",
     NAME_PATTERN),
    ("      checkpoint: approval_request\n", "      checkpoint: \"x#2\"\n", 12, "phases[0].human_gate.checkpoint",
     NAME_PATTERN),
    ("      approval_id: refund_approval\n", "      approval_id: \"a\\nb\"\n", 11,
     "phases[0].human_gate.approval_id", NAME_PATTERN),
    ("        tool: refunds.issueRefund\n", "        tool: \"refunds/issue\\0\"\n", 32, "phases[1].tasks[0].tool",
     NAME_PATTERN),
    ("        compensation: refunds.cancelRefundDraft\n", "        compensation: .hidden\n", 24,
     "phases[0].tasks[0].compensation", NAME_PATTERN),
    ("      - id: notify_customer\n", "      - id: " + "n" * 129 + "\n", 40, "phases[1].tasks[1].id", ID_PATTERN),
])
def test_unsafe_names_in_a_workflow(pack_dir: Path, old: str, new: str, line: int, field: str,
                                    pattern: str) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    edit(wf, old, new)
    err = raises(load_pack, pack_dir)
    assert (err.file, err.line, err.field) == (str(wf), line, field), str(err)
    assert f"does not match '{pattern}'" in err.message, str(err)


def test_unsafe_names_in_a_case(pack_dir: Path, pack: loader.Pack) -> None:
    long_id = write(pack_dir / "cases" / "long.yaml", "case_id: " + "c" * 129 + "\nevents: []\nexpected: {}\n")
    err = raises(load_case, long_id, pack)
    assert (err.line, err.field) == (1, "case_id") and "is too long" in err.message
    for event, field in [("{type: approval_granted, approval_id: ../up}", "events[0].approval_id"),
                         ("{type: approval_timeout, approval_id: 'a b'}", "events[0].approval_id"),
                         ("{type: tool_success, tool: 'x:y'}", "events[0].tool")]:
        path = write(pack_dir / "cases" / "n.yaml", case_text(events=f"[{event}]"))
        err = raises(load_case, path, pack)
        assert (err.line, err.field) == (2, field) and f"does not match '{NAME_PATTERN}'" in err.message, str(err)


def test_trailing_newline_does_not_slip_past_the_pattern(pack_dir: Path, pack: loader.Pack) -> None:
    """Python's ``$`` matches before a final newline; the patterns use ECMA-262's end of string."""
    block = write(pack_dir / "cases" / "nl.yaml", "case_id: |\n  abc\nevents: []\nexpected: {}\n")
    err = raises(load_case, block, pack)
    assert (err.line, err.field) == (1, "case_id") and err.message.startswith("'abc\\n' does not match")
    path = write(pack_dir / "cases" / "nl.yaml", case_text(events='[{type: approval_timeout, approval_id: "ap_1\\n"}]'))
    err = raises(load_case, path, pack)
    assert (err.line, err.field) == (2, "events[0].approval_id") and "does not match" in err.message


def test_unsafe_tool_name_in_pack_effects(pack_dir: Path) -> None:
    edit(pack_dir / "pack.yaml", "tool: notify.sendCustomerEmail", "tool: notify/send")
    err = raises(load_pack, pack_dir)
    assert (err.line, err.field) == (22, "effects.notify_customer.tool") and "does not match" in err.message


def test_dotted_tool_and_checkpoint_names_stay_valid(pack: loader.Pack) -> None:
    assert "refunds.issueRefund" in pack.tools("refund")


# ---------------------------------------------------------------- 5. workflow name = its key

def test_workflow_name_must_equal_its_key(pack_dir: Path) -> None:
    edit(pack_dir / "pack.yaml", "  refund: workflows/refund.yaml", "  refunds: workflows/refund.yaml")
    wf = pack_dir / "workflows" / "refund.yaml"
    err = raises(load_pack, pack_dir)
    assert (err.file, err.line, err.field) == (str(wf), 2, "workflow")
    assert err.message == ("workflow 'refund' is listed as 'refunds' in "
                           f"{pack_dir / 'pack.yaml'}:8; the two names must be equal")


# ---------------------------------------------------------------- 6. nothing in the cases folder is skipped

def cases_error(pack_dir: Path) -> CaseError:
    return raises(load_target, pack_dir, line=False)


def test_broken_symlink_case(pack_dir: Path) -> None:
    link = pack_dir / "cases" / "x.yaml"
    link.symlink_to(pack_dir / "cases" / "gone.yaml")
    err = cases_error(pack_dir)
    assert err.file == str(link) and "not a regular file (a broken symlink)" in err.message


def test_symlink_loop_case(pack_dir: Path) -> None:
    a, b = pack_dir / "cases" / "a.yaml", pack_dir / "cases" / "b.yaml"
    a.symlink_to(b)
    b.symlink_to(a)
    err = cases_error(pack_dir)
    assert err.file == str(a) and "not a regular file (a symlink loop)" in err.message


def test_directory_named_like_a_case(pack_dir: Path) -> None:
    (pack_dir / "cases" / "dir.yaml").mkdir()
    err = cases_error(pack_dir)
    assert err.file == str(pack_dir / "cases" / "dir.yaml")
    assert err.message.startswith("subfolders of the cases folder are not read")


def test_fifo_named_like_a_case(pack_dir: Path) -> None:
    fifo = pack_dir / "cases" / "f.yaml"
    os.mkfifo(fifo)
    err = cases_error(pack_dir)  # must not block reading the FIFO
    assert err.file == str(fifo) and "not a regular file" in err.message
    err = raises(load_target, fifo, line=False)
    assert err.file == str(fifo) and "not a regular file" in err.message


def test_subfolder_of_cases_is_an_error(pack_dir: Path) -> None:
    write(pack_dir / "cases" / "more" / "c.yaml", "case_id: more\nevents: []\nexpected: {}\n")
    err = cases_error(pack_dir)
    assert err.file == str(pack_dir / "cases" / "more")
    assert err.message == ("subfolders of the cases folder are not read; move the case files in "
                           f"{pack_dir / 'cases' / 'more'} up or remove it")


def test_symlink_out_of_the_pack(pack_dir: Path, tmp_path: Path) -> None:
    outside = write(tmp_path / "elsewhere" / "c.yaml", "case_id: out\nevents: []\nexpected: {}\n")
    link = pack_dir / "cases" / "out.yaml"
    link.symlink_to(outside)
    err = cases_error(pack_dir)
    assert err.file == str(link) and err.message.startswith("points outside the pack")


def test_symlink_inside_the_pack_is_fine(pack_dir: Path) -> None:
    write(pack_dir / "extra" / "c.yaml", "case_id: inside\nevents: []\nexpected: {}\n")
    (pack_dir / "cases" / "inside.yaml").symlink_to(pack_dir / "extra" / "c.yaml")
    _, cases = load_target(pack_dir)
    assert sorted(c.case_id for c in cases) == ["approval_timeout_after_refund_draft", "inside"]


def test_hidden_files_are_ignored(pack_dir: Path) -> None:
    write(pack_dir / "cases" / ".draft.yaml", "not: [valid")
    (pack_dir / "cases" / ".#lock.yaml").symlink_to("user@host.123")  # an Emacs lock: a broken symlink
    (pack_dir / "cases" / ".git").mkdir()
    _, cases = load_target(pack_dir)
    assert [c.path.name for c in cases] == [SEED]


@pytest.mark.parametrize("target, message", [
    ("/etc/passwd", "must be a path relative to the pack folder, got '/etc/passwd'"),
    ("../refund.yaml", "points outside the pack folder"),
    ("workflows/../../refund.yaml", "points outside the pack folder"),
])
def test_workflow_path_outside_the_pack(pack_dir: Path, target: str, message: str) -> None:
    shutil.copy(pack_dir / "workflows" / "refund.yaml", pack_dir.parent / "refund.yaml")
    edit(pack_dir / "pack.yaml", "workflows/refund.yaml", target)
    err = raises(load_pack, pack_dir)
    assert (err.file, err.line, err.field) == (str(pack_dir / "pack.yaml"), 8, "workflows.refund")
    assert message in err.message, str(err)


def test_workflow_symlink_out_of_the_pack(pack_dir: Path) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    outside = pack_dir.parent / "refund.yaml"
    shutil.move(wf, outside)
    wf.symlink_to(outside)
    err = raises(load_pack, pack_dir)
    assert (err.line, err.field) == (8, "workflows.refund") and "points outside the pack folder" in err.message


def test_workflow_path_not_a_regular_file(pack_dir: Path) -> None:
    wf = pack_dir / "workflows" / "refund.yaml"
    wf.unlink()
    os.mkfifo(wf)
    err = raises(load_pack, pack_dir)
    assert (err.line, err.field) == (8, "workflows.refund") and "not a regular file" in err.message


def test_cases_folder_outside_the_pack(pack_dir: Path) -> None:
    edit(pack_dir / "pack.yaml", "cases: cases", "cases: ../elsewhere")
    err = raises(load_pack, pack_dir)
    assert (err.line, err.field) == (25, "cases") and "points outside the pack folder" in err.message


# ---------------------------------------------------------------- 7. trace kinds

def test_trace_event_typo_is_an_error(pack_dir: Path, pack: loader.Pack) -> None:
    for key in ("required_trace_events", "forbidden_trace_events"):
        path = write(pack_dir / "cases" / "tr.yaml", f"case_id: tr\nevents: []\nexpected:\n  {key}:\n"
                     "    - workflow_finished\n    - compensation_strated\n")
        err = raises(load_case, path, pack)
        assert (err.line, err.field) == (6, f"expected.{key}[1]")
        assert err.message.startswith("'compensation_strated' is not one of")
        assert err.message.endswith("did you mean 'compensation_started'?")


def test_trace_kinds_constant_matches_the_schema() -> None:
    schema = json.loads((SCHEMA_DIR / "case.schema.json").read_text(encoding="utf-8"))
    assert tuple(schema["$defs"]["trace_kind"]["enum"]) == loader.TRACE_KINDS
    expected = schema["$defs"]["expected"]["properties"]
    for key in ("required_trace_events", "forbidden_trace_events"):
        assert expected[key]["items"] == {"$ref": "#/$defs/trace_kind"}
    assert len(set(loader.TRACE_KINDS)) == len(loader.TRACE_KINDS) == 25


# ---------------------------------------------------------------- 8. one-line messages with lines

def test_nul_byte_is_one_line_with_its_line(pack_dir: Path, pack: loader.Pack) -> None:
    path = pack_dir / "cases" / "nul.yaml"
    path.write_bytes(b"case_id: nul\nevents: []\nexpected: {}\x00\n")
    err = raises(load_case, path, pack)
    assert err.line == 3
    assert err.message == "YAML error: unacceptable character #x0000 (NUL): special characters are not allowed"


def test_invalid_utf8_has_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.yaml"
    path.write_bytes(b"a: 1\nb: caf\xe9\n")
    err = raises(load_yaml, path)
    assert err.line == 2 and err.message.startswith("not UTF-8: ")


def test_missing_cases_folder_has_the_line_of_cases(pack_dir: Path) -> None:
    shutil.rmtree(pack_dir / "cases")
    err = raises(load_target, pack_dir)
    assert (err.file, err.line, err.field) == (str(pack_dir / "pack.yaml"), 25, "cases")
    assert err.message == f"cases folder not found: {pack_dir / 'cases'}"
    edit(pack_dir / "pack.yaml", "cases: cases\n", "")
    err = raises(load_target, pack_dir)
    assert (err.line, err.field) == (1, "cases")


def test_cases_path_is_a_file(pack_dir: Path) -> None:
    shutil.rmtree(pack_dir / "cases")
    (pack_dir / "cases").write_text("x", encoding="utf-8")
    err = raises(load_target, pack_dir)
    assert (err.line, err.field) == (25, "cases") and "not a folder" in err.message


def test_pack_effect_after_must_name_another_effect(tmp_path: Path) -> None:
    import shutil

    from crashpoint.harness.load.loader import load_pack

    dst = Path(shutil.copytree(builtin_pack("refunds"), tmp_path / "refunds"))
    pack_file = dst / "pack.yaml"
    pack_file.write_text(pack_file.read_text().replace("after: [issue_refund]", "after: [issue_refunds]"))
    with pytest.raises(CaseError) as info:
        load_pack(dst)
    assert info.value.field == "effects.notify_customer.after[0]"
    assert "'issue_refunds', which is not another effect" in info.value.message
