"""The oracle rule registry (:mod:`crashpoint.harness.model.rules`) and the one verdict function
(:mod:`crashpoint.harness.judge.verdict`): rule ids on every finding, a rule that raises is an
``unknown`` (never a crashed sweep), metrics select findings by rule id, never by message text."""

from __future__ import annotations

import copy
import dataclasses
import shlex
import subprocess
from pathlib import Path

import pytest
from crashpoint.harness.adapters.reference import ReferenceAdapter
from crashpoint.harness.judge import metrics
from crashpoint.harness.model import rules
from crashpoint.harness.judge.record import measures
from crashpoint.harness.model.rules import Finding, RuleContext, found, rule
from crashpoint.harness.judge.verdict import Invocation, RunResult, judge, repro_command
from crashpoint.harness.load.loader import Case, Pack, load_target
from crashpoint.harness.run.pack_driver import Driver, RunOutcome
from crashpoint.harness.run.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]
HAPPY = "refund_approved_happy_path"
FAMILIES = {"final_status", "side_effects", "trace", "agent", "differential", "versions", "target"}


@pytest.fixture(scope="module")
def refunds() -> tuple[Pack, dict[str, Case]]:
    pack, cases = load_target(ROOT / "scenarios" / "refunds")
    return pack, {c.case_id: c for c in cases}


@pytest.fixture(scope="module")
def happy_run(refunds: tuple[Pack, dict[str, Case]], tmp_path_factory: pytest.TempPathFactory) -> RunOutcome:
    pack, cases = refunds
    return Driver(ReferenceAdapter(), pack).run(cases[HAPPY], tmp_path_factory.mktemp("happy") / "run")


@pytest.fixture()
def raising_rule():
    """A registered rule that raises on every run (removed afterwards)."""
    @rule("test_only.raises", description="a rule with a bug: it raises")
    def _raises(ctx: RuleContext) -> list[Finding]:
        raise KeyError("no such field")
    yield "test_only.raises"
    rules.unregister("test_only.raises")


def test_every_builtin_rule_has_a_stable_id_a_family_and_a_description() -> None:
    ids = [r.id for r in rules.registered()]
    assert len(ids) == len(set(ids)) >= 30
    assert all(rules.RULE_ID.match(i) and len(i) <= rules.RULE_ID_MAX for i in ids)
    assert {r.family for r in rules.registered()} == FAMILIES
    assert all(r.description for r in rules.registered())
    for wanted in ("side_effects.at_most_once", "side_effects.exactly_once_on_success",
                   "side_effects.gated_by_approval", "trace.transition_legal", "trace.checkpoint_after_effect",
                   "final_status.expected", "differential.same_effects"):
        assert rules.get(wanted).id == wanted


def test_the_docs_list_every_rule_id() -> None:
    page = (ROOT / "docs" / "reference" / "rules.md").read_text()
    missing = [r.id for r in rules.registered() if f"`{r.id}`" not in page]
    assert not missing, f"docs/reference/rules.md does not list rule(s) {missing}: run python docs/generate.py"


def test_bad_rule_ids_and_a_second_rule_under_one_id_are_refused() -> None:
    for bad in ("NoDot", "side_effects.", "Side.x", "a.b-c", "a." + "x" * 60):
        with pytest.raises(ValueError, match="rule id"):
            rule(bad, description="d")
    with pytest.raises(ValueError, match="already registered"):
        rule("side_effects.at_most_once", description="a copy")(lambda ctx: [])
    with pytest.raises(ValueError, match="description"):
        rule("test_only.nodesc", description=" ")


def test_every_finding_carries_the_id_of_the_rule_that_made_it(refunds, happy_run: RunOutcome) -> None:
    pack, cases = refunds
    broken = copy.deepcopy(happy_run)
    issue = next(c for c in broken.calls if c["tool"] == "refunds.issueRefund")
    broken.calls.append({**issue, "seq": 99, "gseq": 99})  # the refund applied twice
    broken.status = "failed"  # and the engine says failed while its trace says succeeded
    result = judge(cases[HAPPY], pack, broken, crash_point=None)
    assert result.verdict == "failed"
    assert all(f.rule in {r.id for r in rules.registered()} for f in result.failures)
    assert "side_effects.at_most_once" in result.rules and "trace.ends_in_status" in result.rules
    assert all(f.oracle == f.rule.split(".")[0] for f in result.failures)
    # a rule that returns a finding made with found() (or with another id) gets its own id stamped on it
    stamped = rules.evaluate(RuleContext(cases[HAPPY], pack, broken), [rules.Rule("x.y", "d", lambda c: [
        found("m"), Finding("other.id", "n")], "m")])
    assert [f.rule for f in stamped.findings] == ["x.y", "x.y"]


def test_a_rule_that_raises_gives_unknown_naming_it_and_the_exception(refunds, happy_run, raising_rule) -> None:
    pack, cases = refunds
    result = judge(cases[HAPPY], pack, happy_run, crash_point=None)
    assert result.verdict == "unknown"
    assert result.rules_unknown == [raising_rule]
    assert f"rule {raising_rule} raised KeyError" in result.error and "no such field" in result.error
    assert result.to_dict()["rules_unknown"] == [raising_rule]
    # a definite finding of another rule still fails the run; the broken rule is named beside it
    broken = copy.deepcopy(happy_run)
    broken.stop_reason = "something else"
    other = judge(dataclasses.replace(cases[HAPPY], expected={"stop_reason": "completed"}), pack, broken)
    assert other.verdict == "failed" and "final_status.stop_reason" in other.rules
    assert raising_rule in other.error


def test_a_rule_that_raises_never_crashes_a_sweep(refunds, raising_rule, tmp_path: Path) -> None:
    pack, cases = refunds
    result = sweep(pack, [cases[HAPPY]], ReferenceAdapter(), crash="every", only=["after_checkpoint:refund_draft"],
                   executor="threads", jobs=2, workdir=tmp_path / "w")
    assert [r.verdict for r in result.results] == ["unknown", "unknown"]
    assert all(raising_rule in r.error for r in result.results)


def _dup_run(happy_run: RunOutcome) -> RunOutcome:
    out = copy.deepcopy(happy_run)
    out.deliveries = {"duplicates_sent": 1, "duplicates_recognised": 1}
    return out


def test_a_missing_effect_does_not_lower_duplicate_event_safety(happy_run: RunOutcome) -> None:
    missing = Finding("side_effects.exactly_once_on_success",
                      "workflow succeeded but effect issue_refund was applied 0 times; exactly once is required")
    twice = Finding("side_effects.at_most_once", "effect issue_refund (refunds.issueRefund) applied 2 times; "
                                                 "at most once is allowed")
    lost = RunResult("c", None, "failed", [missing], outcome=_dup_run(happy_run))
    dup = RunResult("c", None, "failed", [twice], outcome=_dup_run(happy_run))
    assert measures(lost)["dup_safe"] is True and measures(lost)["dup_effect"] is False
    assert measures(dup)["dup_safe"] is False and measures(dup)["dup_effect"] is True
    assert metrics.aggregate([lost])["overall"]["duplicate_event_safety"] == 1.0
    assert metrics.aggregate([dup])["overall"]["duplicate_event_safety"] == 0.0
    # what counts is the rule id, not the message: the same text under another rule is no duplicate
    renamed = RunResult("c", None, "failed", [dataclasses.replace(twice, rule="trace.one_version")],
                        outcome=_dup_run(happy_run))
    assert measures(renamed)["dup_effect"] is False


def test_metrics_of_restored_results_come_from_their_stored_measures(happy_run: RunOutcome) -> None:
    from crashpoint.harness.run.resume import StoredResult

    happy_run.crash_fired = True  # a result copies what its outcome showed when it is made
    live = RunResult("c", "after_checkpoint:x", "passed", outcome=happy_run)
    data = live.to_dict() | {"measures": measures(live)}
    restored = StoredResult(data)
    assert restored.outcome is None and restored.measures == data["measures"]
    assert metrics.aggregate([restored]) == metrics.aggregate([live])
    assert metrics.aggregate([restored])["overall"]["resume_success"] == 1.0


def test_repro_command_is_one_shell_safe_line(tmp_path: Path) -> None:
    case = tmp_path / "x$(touch P).yaml"
    line = repro_command(case, "after_effect:it's", Invocation("m:E", "a b:c", "kill-cold"))
    assert shlex.split(line) == ["crashpoint", "run", str(case), "--crash-point", "after_effect:it's", "--engine",
                                 "m:E", "--crash-mode", "kill-cold", "--adapter", "a b:c"]
    assert repro_command(Path("c.yaml"), "after_checkpoint:a") == "crashpoint run c.yaml --crash-point after_checkpoint:a"
    assert repro_command(Path("c.yaml"), None) == "crashpoint run c.yaml --crash none"
    # pasted into a shell, the line runs nothing but the command
    pasted = subprocess.run(["sh", "-c", "printf '%s\\n' " + line.removeprefix("crashpoint ")], cwd=tmp_path,
                            capture_output=True, text=True, check=True)
    assert pasted.stdout.splitlines()[1:3] == [str(case), "--crash-point"] and not (tmp_path / "P").exists()


def test_every_front_end_builds_its_reproduce_line_with_the_one_function(tmp_path: Path) -> None:
    from crashpoint.harness.cli.main import repro_command as cli_repro
    from crashpoint.harness.cli.search import repro_line
    from crashpoint.harness.run.certification import repro

    case = tmp_path / "c.yaml"
    assert cli_repro(case, "p", "m:E", "kill-cold", "a:B") == repro_command(case, "p", Invocation("m:E", "a:B",
                                                                                                  "kill-cold"))
    assert repro(case, "p", "a:B") == repro_command(case, "p", Invocation(adapter="a:B"))
    assert repro_line(case, "m:E") == repro_command(case, None, Invocation("m:E"))
