"""The engine conformance kit (:mod:`crashpoint.harness.run.engine_conformance`) on each installed engine, with the
engine's example and one of its broken variants; and the kit's own checks failing on broken engine integrations
(tests/variants/target_engines.py, a probe that survives its kill)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from installed import needs

from crashpoint.harness.load.target import Target

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def _langgraph() -> tuple[Target, Target, dict]:
    correct = Target.from_file(EXAMPLES / "langgraph_refund/target.yaml")
    return correct, dataclasses.replace(correct, entry="langgraph_refund.variants:no_key"), \
        {"case": "approved", "broken_point": "after_effect:issue_refund"}


def _dbos() -> tuple[Target, Target, dict]:
    data = Target.from_file(EXAMPLES / "dbos_refund/target.yaml").to_data()
    data["inputs"] = data["inputs"][:1]  # one workflow: a handful of runs stays cheap
    correct = Target.from_data(data)
    return correct, Target.from_data(data | {"entry": "dbos_refund.variants:refund_without_key"}), \
        {"case": "approved", "broken_point": "after_effect:issue_refund"}


def _temporal() -> tuple[Target, Target, dict]:
    correct = Target.from_file(EXAMPLES / "temporal_refund/target.yaml")
    data = correct.to_data() | {"entry": "temporal_refund.variants:RefundWithoutKey"}
    data["temporal"] = data["temporal"] | {"workflows": ["temporal_refund.variants:WORKFLOWS"],
                                           "activities": ["temporal_refund.activities:ACTIVITIES",
                                                          "temporal_refund.variants:ACTIVITIES"]}
    return correct, Target.from_data(data), {"case": "approved", "broken_point": "after_effect:issue_refund"}


def _prefect() -> tuple[Target, Target, dict]:
    correct = Target.from_file(EXAMPLES / "prefect_refund/target.yaml")
    return correct, dataclasses.replace(correct, entry="prefect_refund.variants:refund_without_key"), \
        {"case": "approved", "broken_point": "after_effect:issue_refund"}


@pytest.mark.slow
@pytest.mark.parametrize("make", [pytest.param(_langgraph, marks=needs("langgraph.checkpoint.sqlite"), id="langgraph"),
                                  pytest.param(_dbos, marks=needs("dbos"), id="dbos"),
                                  pytest.param(_temporal, marks=needs("temporalio"), id="temporal"),
                                  pytest.param(_prefect, marks=needs("prefect"), id="prefect")])
def test_each_installed_engine_conforms(make, tmp_path: Path) -> None:
    from crashpoint.harness.run.engine_conformance import assert_conforms, report

    correct, broken, options = make()
    checks = assert_conforms(correct, broken, workdir=tmp_path, **options)
    assert [c.name for c in checks] == ["declarations", "crash points", "kill lands", "resumes", "broken caught",
                                        "durability"], report(checks)


def test_the_declarations_check_names_what_does_not_hold() -> None:
    from crashpoint.harness.engines.base import engine_for, engines
    from crashpoint.harness.run.engine_conformance import check_declarations
    from variants.target_engines import Amnesic

    (check,) = check_declarations(Amnesic())
    assert not check.ok
    assert "worker_module 'variants.target_engines' are not variants.target_engines's" in check.detail, check.detail
    assert "server is declared but server_for is not answered" in check.detail, check.detail
    for engine in engines():  # every engine of the package passes it (installed or not: its packages are named)
        (ok,) = check_declarations(engine)
        assert ok.ok or ok.detail.startswith("packages:"), ok.detail
    assert engine_for("langgraph").name == "langgraph"


@pytest.mark.slow
@needs("langgraph.checkpoint.sqlite")
def test_the_kit_catches_an_engine_that_restarts_and_under_declares(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """An integration whose recovering worker starts over (its checkpoints deleted) fails ``resumes``; one that
    declares ``sync`` only while its worker runs ``async`` fails ``durability``; a "broken" variant that is the
    correct code fails ``broken caught``. The golden run's points and the kill itself still pass."""
    from crashpoint.harness.engines import base
    from crashpoint.harness.run.engine_conformance import check_engine, report
    from variants.target_engines import Amnesic

    base.engines()
    monkeypatch.setitem(base._found, "langgraph", Amnesic())
    correct, _, options = _langgraph()
    checks = {c.name: c for c in check_engine(correct, correct, workdir=tmp_path, **options)}
    failed = sorted(name for name, c in checks.items() if not c.ok)
    assert failed == ["broken caught", "declarations", "durability", "resumes"], report(list(checks.values()))
    assert "durability async (not declared): passed" in checks["durability"].detail
    assert "the correct target failed" in checks["broken caught"].detail  # the amnesic worker breaks correct code
    assert checks["resumes"].detail.endswith("(failed)")  # its recovery started the thread over: draft ran again


@pytest.mark.slow
@needs("langgraph.checkpoint.sqlite")
def test_the_kit_catches_a_kill_that_does_not_land(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A probe that records its kill and does not die (tests/variants/kills.py): ``kill lands`` fails."""
    from crashpoint.harness.run import target_driver
    from crashpoint.harness.run.engine_conformance import check_engine, report

    monkeypatch.setattr(target_driver, "PROBE_SPEC", "variants.kills:surviving_probe")
    correct, broken, options = _langgraph()
    checks = {c.name: c for c in check_engine(correct, broken, workdir=tmp_path, **options)}
    assert not checks["kill lands"].ok and not checks["resumes"].ok, report(list(checks.values()))
    assert checks["crash points"].ok and checks["declarations"].ok, report(list(checks.values()))
