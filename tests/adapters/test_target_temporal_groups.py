"""Crash groups (harness/engines/temporal_groups.py) on the Temporal example: server-crash runs sharing one dev server
and one crash get the verdicts and deliveries they get on a server of their own, and a member the group went on
without is an ``error``, the others passing."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.harness.engines import temporal_groups  # noqa: E402
from crashpoint.harness.engines.effects import alive  # noqa: E402
from crashpoint.harness.engines.temporal import Temporal  # noqa: E402
from crashpoint.harness.judge.verdict import judge_target  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run import target_driver  # noqa: E402
from crashpoint.harness.run.target_sweep import sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TARGET = ROOT / "examples/temporal_refund/target.yaml"


@pytest.fixture(scope="module")
def target() -> Target:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    return Target.from_file(TARGET)


def _shape(deliveries: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """What the deliveries were, in order, and which fields each had (not the pids, ports and namespaces)."""
    return [(d["kind"], tuple(sorted(d))) for d in deliveries]


def _by_point(result: Any) -> dict[str | None, tuple[str, list[tuple[str, tuple[str, ...]]]]]:
    return {r.crash_point: (r.verdict, _shape(r.outcome.deliveries)) for r in result.results}


@pytest.mark.slow
def test_a_grouped_sweep_gets_the_verdicts_and_deliveries_of_servers_of_their_own(target: Target,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """The server-crash case's default sweep (42 runs), once in crash groups and once with a server of its own per
    run: every run's verdict and the kinds and fields of its deliveries are the same; in groups, most crashes were
    shared (fewer server crashes than runs) and every run recorded its group's killed and new pid."""
    monkeypatch.setenv(temporal_groups.ENV, "0")
    alone = sweep(target, cases=["server-crash"], crash="sampled", keep_outcomes=True)
    monkeypatch.delenv(temporal_groups.ENV)
    grouped = sweep(target, cases=["server-crash"], crash="sampled", keep_outcomes=True)
    assert _by_point(grouped) == _by_point(alone)
    assert {r.verdict for r in grouped.results} == {"passed"}, [(r.crash_point, r.error) for r in grouped.results]
    crashes = [d for r in grouped.results for d in r.outcome.deliveries if d["kind"] == "server_crash"]
    killed = {d["killed"] for d in crashes}
    assert len(crashes) == len(grouped.results) and len(killed) < len(crashes) / 2  # shared crashes
    assert not any(alive(d["killed"]) or alive(d["pid"]) for d in crashes)  # every group's servers gone
    assert all(any("crash group of" in n for n in r.outcome.notes) for r in grouped.results)


@pytest.mark.slow
def test_a_member_that_never_comes_is_an_error_and_the_others_pass(target: Target, tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Three runs of the server-crash case in one group; one is held before its first worker until the other two
    crashed the group's server (they wait a short share of their budget for it, then go on without it). The two
    record the same crash (one kill, one restart) and pass; the held one, whose server crashed at a moment it did not
    choose, is an ``error`` saying so."""
    monkeypatch.delenv(temporal_groups.ENV, raising=False)
    monkeypatch.setattr(temporal_groups, "WAIT_SHARE", 0.05)  # about 4 s of a 90 s budget
    temporal_groups.close_groups()  # a fresh group for these three
    case = target.case("server-crash")
    crashed: list[float] = []
    real_crash, real_launch = Temporal.crash_server, target_driver._launch

    def crash_server(self: Temporal, server: Any, left_s: float) -> None:
        real_crash(self, server, left_s)
        crashed.append(left_s)

    held = threading.Event()

    def launch(code: Target, warm: bool, module: str, argv: list[str], *args: Any) -> Any:
        if str(tmp_path / "held") in argv[argv.index("--run-dir") + 1] and not held.is_set():
            held.set()
            for _ in range(600):  # until the two others crashed the group's server without it
                if len(crashed) == 2:
                    break
                threading.Event().wait(0.1)
        return real_launch(code, warm, module, argv, *args)

    monkeypatch.setattr(Temporal, "crash_server", crash_server)
    monkeypatch.setattr(target_driver, "_launch", launch)
    outcomes: dict[str, Any] = {}

    def run(name: str) -> None:
        try:
            outcomes[name] = target_driver.run_target(target, case, "sync", tmp_path / name)
        except Exception as exc:  # noqa: BLE001 - judged below
            outcomes[name] = exc

    threads = [threading.Thread(target=run, args=(name,)) for name in ("a", "b", "held")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    verdicts = {name: judge_target(target, case, "sync", out) for name, out in outcomes.items()}
    for name in ("a", "b"):
        assert verdicts[name].verdict == "passed", (verdicts[name].error, verdicts[name].failures)
    assert verdicts["held"].verdict == "error"
    assert "did not test its case's server crash" in (verdicts["held"].error or ""), verdicts["held"].error
    [a], [b] = ([d for d in outcomes[n].deliveries if d["kind"] == "server_crash"] for n in ("a", "b"))
    assert (a["killed"], a["pid"]) == (b["killed"], b["pid"])  # one crash for the group
    assert any("3 run(s)" in n and "1 did not come" in n for n in outcomes["a"].notes), outcomes["a"].notes
