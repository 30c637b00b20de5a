"""Temporal targets: the team's own workflows and activities (examples/temporal_refund) under real SIGKILLs,
each run in a namespace of its own on a shared dev server that outlives the killed workers (or, ``server="run"``
and a server crash, on a server of its own that dies with the run)."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from installed import needs

pytestmark = needs("temporalio")

from crashpoint.errors import CaseError  # noqa: E402
from crashpoint.harness.run.target_driver import TargetUnsupported, run_target  # noqa: E402
from crashpoint.harness.engines.effects import alive  # noqa: E402
from crashpoint.harness.judge.target_rules import judge  # noqa: E402
from crashpoint.harness.load.target import Target  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples/temporal_refund"
TARGET = EXAMPLE / "target.yaml"


def _binary_or_skip() -> None:
    from crashpoint.harness.engines.temporal import temporal_binary

    try:
        temporal_binary()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


@pytest.fixture(scope="module")
def target() -> Target:
    _binary_or_skip()
    return Target.from_file(TARGET)


@pytest.fixture(scope="module")
def golden(target: Target, tmp_path_factory: pytest.TempPathFactory):
    return run_target(target, target.case("approved"), "sync", tmp_path_factory.mktemp("golden"))


def _servers_of(run_dir: Path) -> list[int]:
    """Pids of live processes whose command line names this run's database file."""
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes()
            except OSError:
                continue
            if str(run_dir).encode() in cmd and b"start-dev" in cmd:
                found.append(int(proc.name))
    return found


def test_golden_run_of_the_teams_workflows(target: Target, golden) -> None:
    """Start, then the approval signal from a new process; the activities, the timer, the child workflow."""
    assert golden.threads["refund-1001"]["status"] == "finished"
    assert golden.threads["refund-1001"]["values"]["result"] == {"order_id": "1001", "refund_id": "rf-dr-1001",
                                                                 "status": "issued", "amount_cents": 4200}
    applied = [(c.thread, c.effect, c.node) for c in golden.calls if c.outcome == "applied"]
    assert applied == [("refund-1001", "draft_refund", "draft"), ("refund-1001", "issue_refund", "issue"),
                       ("refund-1001-notify-refunded", "notify_customer", "notify")]
    assert [p["phase"] for p in golden.pids] == ["start", "answer"] and golden.kills == 0
    for point in ("before_start:refund-1001", "task_done:refund-1001", "activity:refund-1001@draft",
                  "before_effect:draft_refund", "after_activity:refund-1001@draft", "resolved:refund-1001@draft",
                  "timer_started:refund-1001", "before_signal:refund-1001@approve", "signal:refund-1001@approve",
                  "child_start:refund-1001@NotifyCustomer", "activity:refund-1001-notify-refunded@notify",
                  "child_done:refund-1001@NotifyCustomer"):
        assert point in golden.crash_points, point
    assert judge(target, golden, None) == ([], [])


@pytest.fixture(scope="module")
def own_golden(target: Target, tmp_path_factory: pytest.TempPathFactory):
    return run_target(target, target.case("approved"), "sync", tmp_path_factory.mktemp("own"), server="run")


def test_a_run_has_a_namespace_of_its_own_on_a_shared_server_killed_once_idle(target: Target, golden,
                                                                             tmp_path: Path) -> None:
    """The default: a namespace (never handed out twice) on a shared server that outlives the run; two runs at once
    on it do not see each other's workflows (each drafts its own refund); the server dies (verified) once no run
    uses it."""
    from crashpoint.harness.engines.temporal import close_idle

    [first] = [d for d in golden.deliveries if d["kind"] == "server"]
    assert first["shared"] and first["namespace"] != "default"
    assert not (golden.run_dir / "temporal.db").exists()
    outs = {}
    runs = [threading.Thread(target=lambda n=n: outs.__setitem__(n, run_target(
        target, target.case("approved"), "sync", tmp_path / str(n)))) for n in (1, 2)]
    for run in runs:
        run.start()
    for run in runs:
        run.join()
    servers = [next(d for d in outs[n].deliveries if d["kind"] == "server") for n in (1, 2)]
    assert len({first["namespace"], *(d["namespace"] for d in servers)}) == 3
    for n in (1, 2):
        assert outs[n].threads["refund-1001"]["status"] == "finished"
        assert [c.effect for c in outs[n].calls if c.outcome == "applied"] == ["draft_refund", "issue_refund",
                                                                                "notify_customer"]
        assert judge(target, outs[n], golden) == ([], [])
    pids = {first["pid"], *(d["pid"] for d in servers)}
    assert close_idle() >= 1
    assert not any(alive(p) for p in pids)


def test_a_shared_server_hands_each_namespace_out_once_and_dies_when_spent(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Three namespaces a server: the fourth lease goes to the next server (started ahead); the first dies (its pid
    checked gone) once its last lease is given back, the second lives on while it has namespaces left."""
    _binary_or_skip()
    from crashpoint.harness.engines import temporal

    temporal.close_idle()
    monkeypatch.setattr(temporal, "NAMESPACES_PER_SERVER", 3)
    monkeypatch.setattr(temporal, "START_AHEAD", 2)
    leases = [temporal.lease(tmp_path).start() for _ in range(4)]
    assert len({lease.namespace for lease in leases}) == 4
    first, second = leases[0].pids[0], leases[3].pids[0]
    assert {lease.pids[0] for lease in leases[:3]} == {first} and second != first
    for lease in leases[:3]:
        assert alive(first)
        lease.kill()
    assert not alive(first) and alive(second)
    leases[3].kill()
    assert alive(second)  # namespaces left: kept for the next run
    assert temporal.close_idle() == 1 and not alive(second)
    with pytest.raises(RuntimeError, match="server crash needs a RunServer"):
        temporal.lease(tmp_path).restart()


def test_a_run_on_its_own_server_kills_it_with_the_run(own_golden) -> None:
    """``server="run"``: the server of the run (one pid for the whole run) is gone once the run is over, and nothing
    else of the run's database file still runs."""
    servers = [d for d in own_golden.deliveries if d["kind"] == "server"]
    assert len(servers) == 1 and not servers[0]["shared"] and not alive(servers[0]["pid"])
    assert own_golden.threads["refund-1001"]["status"] == "finished"
    assert _servers_of(own_golden.run_dir) == []
    assert (own_golden.run_dir / "temporal.db").exists()


def test_a_runs_server_starts_on_a_fresh_database_copied_from_the_template(own_golden) -> None:
    """The template is a database as the dev server makes it (namespace ``default``, no workflow); the run's own
    database held the run's workflows, the template still holds none."""
    import sqlite3

    from crashpoint.harness.engines.temporal import template_db

    made = template_db()
    assert made is not None and made.parent != own_golden.run_dir
    with sqlite3.connect(made) as conn:
        assert conn.execute("SELECT name FROM namespaces WHERE name = 'default'").fetchone()
        assert conn.execute("SELECT count(*) FROM executions").fetchone() == (0,)
    with sqlite3.connect(own_golden.run_dir / "temporal.db") as conn:
        assert conn.execute("SELECT count(*) FROM executions").fetchone()[0] >= 2  # the refund and its child


def test_a_verified_kill_inside_an_activity_is_retried_by_temporal_in_a_new_process(target: Target, golden,
                                                                                     tmp_path: Path) -> None:
    """A SIGKILL after the payment and before the activity's completion reached the server: the same server
    (alive across the kill) retries the activity on the next worker; the key makes the repeat a duplicate."""
    out = run_target(target, target.case("approved"), "sync", tmp_path, "after_effect:issue_refund")
    killed = [p for p in out.pids if p["rc"] == -9]
    assert len(killed) == 1 and out.kills == 1 and out.fired == ["after_effect:issue_refund"]
    assert not alive(killed[0]["pid"]) and killed[0]["pid"] != out.pids[-1]["pid"]
    assert len([d for d in out.deliveries if d["kind"] == "server"]) == 1  # no server restarted by the kill
    issues = [c.outcome for c in out.calls if c.effect == "issue_refund"]
    assert issues == ["applied", "duplicate"]
    assert out.threads["refund-1001"]["status"] == "finished"
    assert judge(target, out, golden) == ([], [])
    assert _servers_of(tmp_path) == []


@pytest.mark.slow
@pytest.mark.parametrize("point", ["signal:refund-1001@approve", "timer_started:refund-1001",
                                   "child_start:refund-1001@NotifyCustomer"])
def test_kills_in_workflow_tasks_are_recovered(target: Target, golden, tmp_path: Path, point: str) -> None:
    out = run_target(target, target.case("approved"), "sync", tmp_path, point)
    assert out.kills == 1 and out.fired == [point]
    assert out.threads["refund-1001"]["status"] == "finished"
    assert judge(target, out, golden) == ([], [])


@pytest.mark.slow
@pytest.mark.parametrize("point", ["update:refund-1001@change_amount", "update_done:refund-1001@change_amount"])
def test_an_update_killed_while_handled_is_applied_once(target: Target, tmp_path: Path, point: str) -> None:
    """Case amount-lowered: the reviewer's change_amount update (delivered before the approval signal), the worker
    killed as the update reaches the workflow or once its handler returned: the refund is issued at the lowered
    amount, once, as in the golden run."""
    case = target.case("amount-lowered")
    golden = run_target(target, case, "sync", tmp_path / "golden")
    for name in ("before_update", "update", "update_done", "after_update"):
        assert f"{name}:refund-1001@change_amount" in golden.crash_points, name
    assert golden.threads["refund-1001"]["values"]["result"]["amount_cents"] == 3000
    out = run_target(target, case, "sync", tmp_path / "kill", point)
    assert out.kills == 1 and out.fired == [point]
    assert out.threads["refund-1001"]["values"]["result"]["amount_cents"] == 3000
    assert [c.args["amount_cents"] for c in out.calls if c.effect == "issue_refund" and c.outcome == "applied"] == [3000]
    assert judge(target, out, golden) == ([], [])


@pytest.mark.parametrize("groups", ["0", "10"])
def test_a_server_crash_while_the_refund_waits_keeps_its_history(target: Target, golden, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch, groups: str) -> None:
    """Case server-crash: the server is SIGKILLed (verified) while the refund waits for its approval and a new one
    starts on the same database file; the approval goes to the new server and the refund ends as in the golden
    run, its effects once each. On a server of its own (``CRASHPOINT_TEMPORAL_GROUPS=0``) the database is then moved
    into the run folder; in a crash group (here of one run) the group's server and folder are gone with its last run."""
    from crashpoint.harness.engines.temporal_groups import ENV

    monkeypatch.setenv(ENV, groups)
    out = run_target(target, target.case("server-crash"), "sync", tmp_path)
    [server] = [d for d in out.deliveries if d["kind"] == "server"]
    assert not server["shared"]  # not a namespace of the long-lived shared server
    [crash] = [d for d in out.deliveries if d["kind"] == "server_crash"]
    assert not alive(crash["killed"]) and crash["pid"] != crash["killed"] and not alive(crash["pid"])
    assert _servers_of(Path(server["database"]).parent) == []  # no process of the run's database left
    if groups == "0":
        assert (tmp_path / "temporal.db").exists()  # moved into the run folder once its server was killed
    else:
        assert server["namespace"].startswith("crashpoint-group-") and not Path(server["database"]).exists()
    assert out.threads["refund-1001"]["status"] == "finished"
    assert judge(target, out, golden) == ([], [])


class _AmnesicServer:
    """A server that forgets its database when it crashes (what the fault must catch)."""

    def __init__(self, run_dir: Path) -> None:
        from crashpoint.harness.engines.temporal import RunServer

        self.inner = RunServer(run_dir)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def restart(self) -> None:
        self.inner.kill()
        (self.inner.run_dir / "temporal.db").unlink()
        self.inner.start()


def _amnesic_restart(self) -> None:
    """RunServer.restart forgetting the database (a crash group's server)."""
    self.kill()
    (self.run_dir / "temporal.db").unlink()
    self.start()


@pytest.mark.slow
@pytest.mark.parametrize("groups", ["0", "10"])
def test_a_server_that_loses_its_database_in_a_crash_is_caught(target: Target, golden, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch, groups: str) -> None:
    from crashpoint.harness.engines import temporal_ahead
    from crashpoint.harness.engines.temporal import RunServer
    from crashpoint.harness.engines.temporal_groups import ENV

    monkeypatch.setenv(ENV, groups)
    if groups == "0":
        monkeypatch.setattr(temporal_ahead, "ahead", _AmnesicServer)  # the server-crash case's own server
    else:
        monkeypatch.setattr(RunServer, "restart", _amnesic_restart)  # the crash group's server
    out = run_target(target, target.case("server-crash"), "sync", tmp_path)
    failures, _ = judge(target, out, golden)
    assert failures, out.threads
    assert any("had no checkpoint" in n for n in out.notes), out.notes


def test_an_async_durability_is_unsupported_on_temporal(target: Target, tmp_path: Path) -> None:
    with pytest.raises(TargetUnsupported, match="Temporal server records each event"):
        run_target(target, target.case("approved"), "async", tmp_path)
    assert _servers_of(tmp_path) == []


def test_a_deploy_must_name_a_version() -> None:
    data = Target.from_file(TARGET).to_data()
    data["cases"] = [{"name": "d", "deploy": "v9"}]
    with pytest.raises(CaseError, match="temporal.versions"):
        Target.from_data(data)


def test_a_bad_deploy_in_a_file_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "t.yaml"
    path.write_text("target: x\nengine: temporal\nentry: a:b\ninputs: [{thread: t, input: 1}]\n"
                    "cases:\n  - {name: c, server_crash: true}\n  - {name: d, deploy: nope}\n")
    with pytest.raises(CaseError) as err:
        Target.from_file(path)
    assert str(err.value).startswith(f"{path}:7: field cases[1].deploy: case 'd' deploys 'nope'")


def test_the_target_file_round_trips() -> None:
    target = Target.from_file(TARGET)
    assert Target.from_data(target.to_data()).to_data() == target.to_data()
    assert target.case("deploy-v2-patched").deploy == "v2-patched"
    assert target.options["task_queue"] == "refunds"
    assert os.path.isdir(target.pythonpath[0])


def test_a_temporal_sweep_runs_five_runs_per_cpu_by_default() -> None:
    """Temporal runs mostly wait on the server's timeouts: more runs than CPUs at once; other engines keep 2."""
    from types import SimpleNamespace

    from crashpoint.harness.run.target_sweep import DEFAULT_WORKERS, default_workers

    assert default_workers(Target.from_file(TARGET)) == 5 * (os.cpu_count() or 1)
    assert default_workers(SimpleNamespace(engine="langgraph")) == DEFAULT_WORKERS == 2
