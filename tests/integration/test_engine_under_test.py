"""One choice of the engine under test for ``run``, ``replay`` and ``search`` (``cli.main.engine_under_test``).

Issue 17: ``run`` and ``replay`` each chose "the reference engine from --engine, or --adapter" in code of their
own; ``run --engine X --adapter Y`` imported and checked engine ``X``, then ran ``Y`` (the repro line named
both), while ``replay`` and ``search`` refused the pair.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from crashpoint.errors import UsageError
from crashpoint.harness.adapters.protocol import adapter_class
from crashpoint.harness.cli.main import engine_under_test, main
from crashpoint.scenarios import builtin_pack

TESTS = Path(__file__).resolve().parents[1]
ENGINE = "variants.engines:NoCompensationOnCancel"
ADAPTER = "variants.adapters:no_compensation_on_cancel"
CASE = builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml"


@pytest.fixture(autouse=True)
def _variants_importable(monkeypatch) -> None:
    monkeypatch.syspath_prepend(str(TESTS))


def test_each_option_and_the_recorded_adapter_choose_the_engine() -> None:
    assert engine_under_test(None, None, 5.0).name == "reference"
    assert engine_under_test(ENGINE, None, 5.0).name == ENGINE
    chosen = engine_under_test(None, ADAPTER, 5.0)
    assert chosen.adapter_spec == ADAPTER and chosen.call_timeout_s == 5.0
    assert engine_under_test(None, None, 5.0, recorded=ADAPTER).adapter_spec == ADAPTER  # replay: the trace's
    assert engine_under_test(ENGINE, None, 5.0, recorded=ADAPTER).name == ENGINE  # --engine beats the record
    assert engine_under_test(None, ADAPTER, 5.0, recorded="x:Y").adapter_spec == ADAPTER
    assert adapter_class(engine_under_test(None, ADAPTER, 5.0)) != "GuardedAdapter"


def test_engine_and_adapter_together_is_refused_alike_by_each_command(capsys) -> None:
    with pytest.raises(UsageError, match="exclude each other"):
        engine_under_test(ENGINE, ADAPTER, 5.0)
    assert main(["run", str(CASE), "--crash", "none", "--engine", ENGINE, "--adapter", ADAPTER]) == 2
    err = capsys.readouterr().err
    assert f"--engine {ENGINE} and --adapter {ADAPTER} exclude each other" in err, err
    assert main(["search", str(CASE), "--engine", ENGINE, "--adapter", ADAPTER]) == 2
    assert "exclude each other" in capsys.readouterr().err
