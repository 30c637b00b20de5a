"""Generated malformed input, every format: at least 10,000 inputs, no traceback escapes.

Formats: case files, pack files, workflow definitions, recorded trace files, results store files
and command-line arguments. Each input is a valid seed document with one to three structural
mutations (a value replaced by another JSON value or a hostile string, a key removed or added)
and, often, a text mutation (truncation, a YAML hazard snippet, a stray byte) on top. The loaders
are called in-process (``load_case``/``load_pack``/``read_trace``), some inputs go through
``crashpoint.harness.cli.main.main`` too, and the store and argument inputs only through ``main``.

Every input must either load or be refused with :class:`~crashpoint.errors.CaseError` (files) /
exit code 2 (CLI) with a one-line message that names its file (and a line whenever a field is
named); nothing is written when an input is refused (no ``--out``/``--json`` file, the store file
unchanged). Each test counts the inputs it fed and checks the count, so the total is known:
:data:`BUDGET` sums to 10,000 or more. Fixed seed (``derandomize=True``), no example database.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import os
import random
import shutil
from pathlib import Path
from typing import Any, Callable

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from crashpoint.errors import CaseError
from crashpoint.harness.cli import main as cli
from crashpoint.harness.load import loader
from crashpoint.harness.traces.tracefile import read_trace

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
ROOT = Path(__file__).resolve().parents[2]
REFUNDS = ROOT / "scenarios" / "refunds"
TRACE = ROOT / "tests" / "data" / "refund_happy.trace.json"

#: Inputs generated per format (sum >= 10,000, the issue's floor).
BUDGET = {"case": 3000, "pack": 1400, "workflow": 1400, "trace": 2200, "store": 600, "argv": 1400}
def test_budget_is_at_least_10000() -> None:
    assert sum(BUDGET.values()) >= 10_000


#: Inputs fed per generated example (one hypothesis example draws a seeded ``random.Random``).
PER_EXAMPLE = 5


def feed_inputs(one: Callable[[random.Random], None], n: int) -> None:
    """Call ``one(rnd)`` for at least ``scaled(n)`` inputs: ``PER_EXAMPLE`` per hypothesis example."""

    @fuzz_settings(-(-scaled(n) // PER_EXAMPLE))
    @given(st.randoms(use_true_random=False))
    def feed(rnd: random.Random) -> None:
        for _ in range(PER_EXAMPLE):
            one(rnd)

    feed()


def fuzz_settings(n: int) -> settings:
    """Reproducible, quick: ``n`` examples, a fixed seed, no example database, no deadline."""
    return settings(max_examples=n, deadline=None, database=None, derandomize=True,
                    suppress_health_check=list(HealthCheck))


# --------------------------------------------------------------------------- strategies

HOSTILE_STRINGS = [
    "", " ", "\n", "a\nb", "\t", "\x00", "\ufeff", "é", "\u202e", "../../etc/passwd", "/etc/passwd",
    "~/x", "C:\\x", "$result.nope.x", "*a", "&a", "!!python/object/apply:os.system ['true']", "{{x}}",
    "<script>alert(1)</script>", "x" * 300, "refunds.draftRefundRequest", "issue_refund", "NaN", "-1",
    "1e999", "2024-01-01", "yes", "null", "~", "A >> B", "before_effect:x", "0x1F", "%s%s%n",
]
#: Characters random text is made of: ASCII, YAML indicators, controls, non-ASCII (bad UTF-8 comes
#: from the byte mutations of :func:`render`).
ALPHABET = "abcxyz_019 .:-[]{}#&*!|>'\"%@`,?\t\n\r\x00\x1b\x7f\x85\u00e9\u202e\u2028\ufeff\U0001f600"


def random_text(rnd: random.Random, max_size: int) -> str:
    """Up to ``max_size`` characters of :data:`ALPHABET`."""
    return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, max_size)))


def json_value(rnd: random.Random, depth: int = 0) -> Any:
    """A random JSON-able value: scalars (huge ints, floats, hostile strings), small lists and mappings."""
    kind = rnd.randrange(9 if depth < 2 else 6)
    if kind == 0:
        return None
    if kind == 1:
        return rnd.random() < 0.5
    if kind == 2:
        return rnd.choice([0, -1, 1, 2**31, -(2**63), 2**70, rnd.randint(-1000, 1000)])
    if kind == 3:
        return rnd.choice([0.5, -0.0, 1e308, 1.0, rnd.uniform(-1e6, 1e6)])
    if kind == 4:
        return random_text(rnd, 12)
    if kind == 5:
        return rnd.choice(HOSTILE_STRINGS)
    if kind in (6, 7):
        return [json_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {rnd.choice([random_text(rnd, 8), "type", "tool", "id"]): json_value(rnd, depth + 1)
            for _ in range(rnd.randint(0, 3))}


#: Text snippets spliced into a file: YAML hazards and syntax breakers.
SNIPPETS = [
    "*x", "&a [1, *a]", "!!python/object/apply:os.system ['true']", "!!python/name:os.system", "<<: {a: 1}",
    "{", "]", ":", "- ", "\t", "\x00", "\ufeff", "%YAML 1.1\n---\n", "--- \n", "...\n", "2024-01-01",
    ".nan", "-.inf", "!!binary aGk=", "!!set {a}", "!!omap [a: 1]", "? [a]\n: b", "!foo x", "!!float nope",
    "'", '"', "\\", "[" * 70 + "]" * 70, "a: &x 1\nb: *x\n", "1: x\n", "yes: x\n", "\u2028", "\x85",
    "a:\n" + "  " * 3 + "- x", "key: value\nkey: again\n",
]


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _mutate_once(doc: Any, rnd: random.Random) -> Any:
    path = rnd.choice(_paths(doc))
    op = rnd.choice(["replace", "replace", "delete", "add", "retype"])
    if not path:
        return json_value(rnd) if op in ("replace", "retype") else doc
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if op == "delete":
        del parent[last]
    elif op == "add" and isinstance(parent[last], dict):
        parent[last][rnd.choice([random_text(rnd, 10), "colour", "type", "times"])] = json_value(rnd)
    elif op == "retype":
        old = parent[last]
        parent[last] = [old] if not isinstance(old, list) else {"x": old}
    else:
        parent[last] = json_value(rnd)
    return doc


def mutated_doc(seed: Any, rnd: random.Random) -> Any:
    """A deep copy of ``seed`` with 1-3 structural mutations."""
    doc = copy.deepcopy(seed)
    for _ in range(rnd.randint(1, 3)):
        doc = _mutate_once(doc, rnd)
    return doc


def render(doc: Any, rnd: random.Random, as_json: bool) -> bytes:
    """``doc`` as YAML or JSON bytes, sometimes with a text mutation on top."""
    text = json.dumps(doc, indent=1) if as_json else yaml.dump(doc, Dumper=DUMPER, sort_keys=False,
                                                              allow_unicode=True)
    op = rnd.choice(["none", "none", "truncate", "insert", "insert", "drop_line", "bytes"])
    if op == "truncate":
        text = text[:rnd.randint(0, len(text))]
    elif op == "insert":
        at = rnd.randint(0, len(text))
        text = text[:at] + (rnd.choice(SNIPPETS) if rnd.random() < 0.7 else random_text(rnd, 4)) + text[at:]
    elif op == "drop_line":
        lines = text.splitlines(keepends=True)
        if lines:
            del lines[rnd.randint(0, len(lines) - 1)]
        text = "".join(lines)
    raw = text.encode("utf-8", "surrogatepass")
    if op == "bytes":
        at = rnd.randint(0, len(raw))
        raw = raw[:at] + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 4))) + raw[at:]
    return raw


# --------------------------------------------------------------------------- checks

def check_refusal(exc: CaseError, path: Path) -> None:
    """One line, naming ``path``; a named field comes with its line."""
    text = str(exc)
    assert "\n" not in text, text
    assert exc.file is not None and Path(exc.file) == path, (exc.file, path, text)
    assert str(path) in text, text
    if exc.field is not None:
        assert exc.line is not None, text


def try_load(path: Path, load: Callable[[], Any]) -> bool:
    """``True`` if it loaded; ``False`` if refused properly. Anything else fails the test."""
    try:
        load()
    except CaseError as exc:
        check_refusal(exc, path)
        return False
    return True


def scaled(n: int) -> int:
    """The budget after ``CRASHPOINT_FUZZ_SCALE``."""
    return max(1, int(n * float(os.environ.get("CRASHPOINT_FUZZ_SCALE", "1"))))


def run_cli(argv: list[str]) -> tuple[int, str]:
    """``crashpoint.harness.cli.main.main(argv)`` in-process: (exit code, stderr). A traceback fails the test."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        code = cli.main(argv)
    assert isinstance(code, int)
    return code, err.getvalue()


def check_cli_refusal(code: int, stderr: str, name: str, codes: tuple[int, ...] = (2,)) -> None:
    """Exit 2 (or one of ``codes``) with one ``crashpoint: error:`` line that names ``name``."""
    assert code in codes, (code, stderr)
    lines = [line for line in stderr.splitlines() if line.startswith("crashpoint: error:")]
    assert len(lines) == 1, stderr
    assert name in lines[0], stderr


# --------------------------------------------------------------------------- fixtures

@pytest.fixture(scope="module")
def fuzz_pack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the refund pack with one case in its cases folder."""
    root = tmp_path_factory.mktemp("fuzzpack") / "pack"
    shutil.copytree(REFUNDS, root, ignore=shutil.ignore_patterns("cases"))
    (root / "cases").mkdir()
    shutil.copy(REFUNDS / "cases" / "draft_fatal_failure.yaml", root / "cases")
    return root


def _seed_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text())


CASE_SEEDS = [_seed_yaml(REFUNDS / "cases" / name) for name in (
    "draft_fatal_failure.yaml", "duplicate_approval_same_key.yaml", "deploy_mid_run_keeps_pinned_version.yaml",
    "approval_timeout_after_refund_draft.json", "issue_refund_slow_exceeds_phase_timeout.yaml")]


# --------------------------------------------------------------------------- case files

@pytest.mark.slow  # the fast loop: 3,000 generated case files, each validated and run (minutes); the full suite runs it
def test_generated_case_files(fuzz_pack: Path) -> None:
    pack = loader.load_pack(fuzz_pack)
    target = fuzz_pack / "cases" / "fuzz.yaml"
    jtarget = fuzz_pack / "cases" / "fuzz.json"
    fed = {"n": 0, "refused": 0, "cli": 0}

    def one(rnd: random.Random) -> None:
        seed = rnd.choice(CASE_SEEDS)
        as_json = rnd.random() < 0.5
        path = jtarget if as_json else target
        path.write_bytes(render(mutated_doc(seed, rnd), rnd, as_json))
        fed["n"] += 1
        loaded = try_load(path, lambda: loader.load_case(path, pack))
        fed["refused"] += not loaded
        if fed["n"] % 20 == 0:  # the whole path through the CLI, now and then
            code, err = run_cli(["validate", str(path)])
            fed["cli"] += 1
            if loaded:
                assert code == 0, err
            else:
                check_cli_refusal(code, err, str(path))
        path.unlink()

    feed_inputs(one, BUDGET["case"])
    assert fed["n"] >= scaled(BUDGET["case"]) and fed["refused"] > fed["n"] // 2, fed


# --------------------------------------------------------------------------- pack and workflow files

def _pack_copy(src: Path, dst: Path) -> Path:
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(src, dst)
    return dst


@pytest.mark.slow  # the fast loop: 2 x 1,400 generated pack and workflow files (minutes); the full suite runs it
@pytest.mark.parametrize("mutated", ["pack.yaml", "workflows/refund.yaml"])
def test_generated_pack_and_workflow_files(fuzz_pack: Path, tmp_path: Path, mutated: str) -> None:
    pack_dir = _pack_copy(fuzz_pack, tmp_path / "pack")
    target = pack_dir / mutated
    seed = _seed_yaml(target)
    budget = BUDGET["pack" if mutated == "pack.yaml" else "workflow"]
    # a cross reference may be reported in the other file (a workflow renamed in either)
    files = (str(pack_dir / "pack.yaml"), str(pack_dir / "workflows" / "refund.yaml"))
    fed = {"n": 0, "refused": 0}

    def one(rnd: random.Random) -> None:
        target.write_bytes(render(mutated_doc(seed, rnd), rnd, False))
        fed["n"] += 1
        try:
            loader.load_pack(pack_dir)
        except CaseError as exc:
            fed["refused"] += 1
            assert exc.file in files, str(exc)
            check_refusal(exc, Path(exc.file))

    feed_inputs(one, budget)
    assert fed["n"] >= scaled(budget) and fed["refused"] > fed["n"] // 2, fed


# --------------------------------------------------------------------------- trace files

def _small_trace() -> dict[str, Any]:
    doc = json.loads(TRACE.read_text())
    doc["journal"] = doc["journal"][:6]
    return doc


def test_generated_trace_files(tmp_path: Path) -> None:
    seed = _small_trace()
    target = tmp_path / "fuzz.trace.json"
    out = tmp_path / "incident.yaml"
    fed = {"n": 0, "refused": 0}

    def one(rnd: random.Random) -> None:
        target.write_bytes(render(mutated_doc(seed, rnd), rnd, True))
        fed["n"] += 1
        loaded = try_load(target, lambda: read_trace(target))
        fed["refused"] += not loaded
        if not loaded and fed["n"] % 10 == 0:
            code, err = run_cli(["incident", str(target), "--out", str(out)])
            check_cli_refusal(code, err, str(target))
            assert not out.exists()

    feed_inputs(one, BUDGET["trace"])
    assert fed["n"] >= scaled(BUDGET["trace"]) and fed["refused"] > fed["n"] // 2, fed


# --------------------------------------------------------------------------- results store files

def _valid_store(path: Path) -> bytes:
    from crashpoint.reports.results_store import ResultStore

    store = ResultStore(path)
    run = store.begin_run({"engine": "reference", "pack": "refunds", "crash": "every"})
    store.add_result(run, {"case_id": "c", "crash_point": "none", "verdict": "passed", "failures": []})
    store.finish_run(run, {"summary": {}})
    store.engine.dispose()
    with contextlib.suppress(Exception):
        import sqlite3

        con = sqlite3.connect(path)
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()
    return path.read_bytes()


def test_generated_store_files(tmp_path: Path) -> None:
    seed = _valid_store(tmp_path / "seed.db")
    target = tmp_path / "fuzz.db"
    out = tmp_path / "report.out"
    fed = {"n": 0, "refused": 0}

    def one(rnd: random.Random) -> None:
        op = rnd.choice(["flip", "flip", "truncate", "header", "text", "empty"])
        raw = bytearray(seed)
        if op == "flip":
            for _ in range(rnd.randint(1, 8)):
                at = rnd.randint(0, len(raw) - 1)
                raw[at] = rnd.randint(0, 255)
        elif op == "truncate":
            raw = raw[:rnd.randint(0, len(raw) - 1)]
        elif op == "header":
            raw = bytearray(b"SQLite format 3\x00") + bytearray(rnd.randrange(256) for _ in range(rnd.randint(0, 200)))
        elif op == "text":
            raw = bytearray(random_text(rnd, 100).encode("utf-8", "surrogatepass"))
        else:
            raw = bytearray()
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(str(target) + suffix).unlink(missing_ok=True)
        target.write_bytes(bytes(raw))
        before = hashlib.sha256(bytes(raw)).hexdigest()
        fed["n"] += 1
        argv = rnd.choice([
            ["report", "latest", "--db", str(target), "--out", str(out)],
            ["report", "latest", "--db", str(target), "--format", "junit", "--out", str(out)],
            ["report", "--list", "--db", str(target)],
        ])
        code, err = run_cli(argv)
        assert code in (0, 1, 2, 3), (code, err)
        if code in (2, 3):  # 3: a store that cannot be read (damaged); 2: one that is not there (emptied)
            fed["refused"] += 1
            check_cli_refusal(code, err, str(target), codes=(2, 3))
            assert not out.exists()
            assert hashlib.sha256(target.read_bytes()).hexdigest() == before, "a refused store was changed"
        out.unlink(missing_ok=True)

    feed_inputs(one, BUDGET["store"])
    assert fed["n"] >= scaled(BUDGET["store"]) and fed["refused"] > fed["n"] // 3, fed


# --------------------------------------------------------------------------- command-line arguments

#: (option tokens, the word the message must name): each is wrong on its own.
BAD_OPTIONS = [
    (["--jobs", "0"], "--jobs"), (["--jobs", "-3"], "--jobs"), (["--jobs", "x"], "--jobs"),
    (["--worker-timeout", "0"], "--worker-timeout"), (["--worker-timeout", "nan"], "--worker-timeout"),
    (["--worker-timeout", "inf"], "--worker-timeout"), (["--worker-timeout", "-1"], "--worker-timeout"),
    (["--worker-timeout", "soon"], "--worker-timeout"), (["--crash", "sometimes"], "--crash"),
    (["--budget", "soon"], "--budget"), (["--budget", "0"], "--budget"), (["--pairs", "3"], "--pairs"),
    (["--crash", "recovery", "--pairs", "0"], "--pairs"),
    (["--crash", "none", "--crash-point", "after_checkpoint:x"], "--crash-point"),
    (["--engine", "nope_module_xyz:Engine"], "--engine"), (["--engine", "os:path"], "--engine"),
    (["--engine", "crashpoint.engine.engine:Nope"], "--engine"), (["--engine", ":"], "--engine"),
    (["--json", ""], "--json"), (["--json", "/nonexistent-dir-xyz/out.json"], "--json"),
    (["--json", "{tmp}"], "--json"), (["--workdir", "{nonempty}"], "--workdir"),
    (["--save-traces", "{file}"], "--save-traces"), (["--results-db", "sqlite://"], "results database"),
    (["--results-db", "{file}"], "results database"), (["--results-db", "nope+x://a/b"], "results database"),
    (["--bogus-option"], "--bogus-option"), (["--jobs"], "--jobs"),
]
GOOD_OPTIONS = [[], ["-q"], ["--jobs", "2"], ["--crash", "none"], ["--worker-timeout", "5"], ["--crash", "every"]]
BAD_PATHS = ["/nonexistent-xyz/pack", "{file}", "nope_pack_name", "{emptydir}", "../../../../etc/passwd"]


def test_generated_command_lines(fuzz_pack: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import crashpoint.harness.run.sweep as sweep_mod

    def no_run(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("a malformed command line reached a run")

    monkeypatch.setattr(sweep_mod, "sweep", no_run)
    (tmp_path / "nonempty").mkdir()
    (tmp_path / "nonempty" / "x").write_text("x")
    (tmp_path / "emptydir").mkdir()
    (tmp_path / "file").write_text("not a database, not a folder\n")
    subst = {"{tmp}": str(tmp_path), "{nonempty}": str(tmp_path / "nonempty"), "{file}": str(tmp_path / "file"),
             "{emptydir}": str(tmp_path / "emptydir")}
    case = str(fuzz_pack / "cases" / "draft_fatal_failure.yaml")
    watched = sorted(p.name for p in tmp_path.iterdir())
    fed = {"n": 0}

    def one(rnd: random.Random) -> None:
        command = rnd.choice(["run", "run", "validate", "replay", "incident", "report", "none"])
        if command == "run":
            bad, name = rnd.choice(BAD_OPTIONS)
            good = rnd.choice(GOOD_OPTIONS)
            if "--crash" in good and "--crash" in bad:
                good = []
            argv = ["run", case] + good + bad
            if rnd.random() < 0.5:
                argv[1], name = rnd.choice(BAD_PATHS), None
                argv = argv[:2] + good
        elif command == "validate":
            argv, name = ["validate", rnd.choice(BAD_PATHS)], None
        elif command in ("replay", "incident"):
            argv, name = [command, rnd.choice(BAD_PATHS + [case])], None
        elif command == "report":
            argv, name = rnd.choice([
                (["report", "--db", "{file}"], "{file}"), (["report", "--format", "pdf", "--db", "{file}"], None),
                (["report", "--weekly", "--since", "2026-13-01", "--until", "2026-01-01"], None),
                (["report", "nothex", "--db", "{emptydir}"], None), (["report", "--since", "2026-01-01"], "--since"),
                (["report", "--out", "{emptydir}"], "--out"),
            ])
        else:
            argv, name = rnd.choice([([], None), (["frobnicate"], "frobnicate"), (["--jobs", "2"], None),
                                                     (["run"], None), (["run", "--crash"], "--crash")])
        argv = [subst.get(a, a) for a in argv]
        if rnd.random() < 0.5:  # noise that must not change the verdict
            noise = rnd.choices(["--", "-", "--x=1", "\x00", "é"], k=rnd.randint(1, 2))
            argv, name = argv + noise, None  # argparse may name the noise instead
        name = subst.get(name, name) if name else None
        fed["n"] += 1
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = cli.main(argv)
        text = err.getvalue()
        # 3: a results store that is not a SQLite file cannot be read (a store error, not bad usage)
        store = any(a in ("--results-db", "--db") and argv[i + 1:i + 2] == [str(tmp_path / "file")]
                    for i, a in enumerate(argv))
        assert code in ((2, 3) if store else (2,)), (argv, code, text)
        assert "Traceback" not in text, text
        assert text.strip(), argv
        if name is not None:
            assert name in text, (argv, text)
        assert sorted(p.name for p in tmp_path.iterdir()) == watched, "a refused command wrote a file"
        assert list((tmp_path / "emptydir").iterdir()) == []

    feed_inputs(one, BUDGET["argv"])
    assert fed["n"] >= scaled(BUDGET["argv"]), fed
