"""A target sweep on a Dask cluster through the command line (``crashpoint run TARGET.yaml --executor
dask://HOST:PORT``) gives the verdicts of a local sweep: each run executes in a Dask worker process, in a folder of
its own there, with the team's code on its path (the target's ``pythonpath``) and the engine installed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), needs("distributed"), pytest.mark.slow]

from crashpoint.harness.cli.main import ExitCode, main  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
#: a kill after the refund is issued (the no_key variant issues it again: failed), and two that pass
POINTS = ["node:order-1001@approve", "after_effect:draft_refund", "after_effect:issue_refund"]


def _target_file(folder: Path) -> Path:
    """The LangGraph example's target pointed at its ``no_key`` variant (the refund issued twice after a kill at
    ``after_effect:issue_refund``), with its ``pythonpath`` absolute."""
    text = (ROOT / "examples/langgraph_refund/target.yaml").read_text()
    text = text.replace("entry: langgraph_refund.graph:builder", "entry: langgraph_refund.variants:no_key")
    text = text.replace('pythonpath: [".."]', f"pythonpath: [{json.dumps(str(ROOT / 'examples'))}]")
    path = folder / "target.yaml"
    path.write_text(text)
    return path


def _verdicts(report: Path) -> list[tuple[str, str, list[str]]]:
    data = json.loads(report.read_text())
    return sorted((r["crash_point"], r["verdict"], sorted({f["rule"] for f in r["failures"]}))
                  for r in data["results"])


@pytest.fixture(scope="module")
def dask_cluster():
    """A Dask cluster on loopback: 2 worker processes of 1 thread each."""
    import distributed

    cluster = distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, host="127.0.0.1",
                                       dashboard_address=None, silence_logs=40)
    try:
        yield cluster
    finally:
        cluster.close()


def test_a_target_sweep_on_dask_gives_the_local_verdicts(dask_cluster, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    target = _target_file(tmp_path)
    picked = ["--case", "approved", "-q"] + [a for p in POINTS for a in ("--crash-point", p)]
    address = "dask://" + dask_cluster.scheduler_address.split("://", 1)[1]
    remote = tmp_path / "dask.json"
    assert main(["run", str(target), *picked, "--executor", address, "--json", str(remote)]) == ExitCode.FAILED
    out = capsys.readouterr().out
    assert f"on dask {dask_cluster.scheduler_address}" in out
    local = tmp_path / "local.json"
    assert main(["run", str(target), *picked, "--json", str(local)]) == ExitCode.FAILED
    assert _verdicts(remote) == _verdicts(local)
    assert _verdicts(remote) == sorted([("none", "passed", []), ("node:order-1001@approve", "passed", []),
                                        ("after_effect:draft_refund", "passed", []),
                                        ("after_effect:issue_refund", "failed",
                                         ["differential.same_effects", "side_effects.at_most_once",
                                          "target.expected_effects"])])
    ran = {r["crash_point"]: r for r in json.loads(remote.read_text())["results"]}
    assert all(r["kills"] == 1 for p, r in ran.items() if p != "none")  # real kills, verified, on the Dask workers
    assert not any(tmp_path.glob("crashpoint-run-*"))  # each run's folder was a temporary one of its worker
