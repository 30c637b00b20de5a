"""Output paths are checked before anything runs (issue 17, "Tracebacks or hangs on valid-looking
input"): a read-only folder for ``--workdir``, ``--save-traces``, ``--json``, ``report --out`` and
``incident --out``; a FIFO for ``--results-db``, ``--json`` and ``report --out``; a device node for
``--json``. Each is one message and exit 2, nothing replaced. Before: a traceback (after the whole
sweep, for ``--save-traces``), a hang (FIFO store), or the device replaced by a regular file."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

from crashpoint.harness.cli.main import main

CASE = "refunds/cases/refund_approved_happy_path.yaml"
DATA = next(p for p in (Path(__file__).resolve().parents[1] / "data", Path(__file__).resolve().parent / "data")
            if p.is_dir())


@pytest.fixture()
def readonly(tmp_path: Path):
    """A folder no file can be created in: permission bits for a user, a read-only tmpfs for root."""
    folder = tmp_path / "ro"
    folder.mkdir()
    if os.geteuid() != 0:
        folder.chmod(0o555)
        yield folder
        folder.chmod(0o755)
        return
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(folder)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"running as root and cannot mount a read-only tmpfs: {done.stderr.decode().strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def _case() -> str:
    from crashpoint.scenarios import builtin_pack

    return str(builtin_pack("refunds") / "cases" / "refund_approved_happy_path.yaml")


def _one_line_exit_2(argv: list[str], capsys, *words: str) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert err.count("\n") == 0 and err.startswith("crashpoint: error: "), err
    assert all(w in err for w in words), err
    assert "sweeping" not in captured.out, "the check came after the sweep had started"


@pytest.mark.parametrize("option", ["--workdir", "--save-traces", "--json"])
def test_run_refuses_an_unwritable_output_before_sweeping(option: str, readonly: Path, capsys) -> None:
    target = readonly / ("r.json" if option == "--json" else "d")
    if option == "--workdir":
        target = readonly  # an existing, empty, read-only folder
    _one_line_exit_2(["run", _case(), "--crash", "none", option, str(target), "--no-progress"], capsys,
                     option, "not writable")


def test_report_and_incident_refuse_an_unwritable_out(readonly: Path, tmp_path: Path, capsys) -> None:
    db = tmp_path / "r.db"
    assert main(["run", _case(), "--crash", "none", "--results-db", str(db), "--no-progress"]) == 0
    capsys.readouterr()
    _one_line_exit_2(["report", "--db", str(db), "--out", str(readonly / "r.md")], capsys, "--out", "not writable")
    trace = tmp_path / "t.trace.json"
    shutil.copy(DATA / "refund_happy.trace.json", trace)
    import json

    data = json.loads(trace.read_text())
    data["run"]["verdict"] = "failed"
    trace.write_text(json.dumps(data))
    _one_line_exit_2(["incident", str(trace), "--out", str(readonly / "i.yaml")], capsys, "--out", "not writable")


def test_a_fifo_is_refused_never_opened(tmp_path: Path, capsys) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    _one_line_exit_2(["run", _case(), "--crash", "none", "--results-db", str(fifo), "--no-progress"], capsys,
                     "not a regular file")
    _one_line_exit_2(["report", "--db", str(fifo)], capsys, "not a regular file")
    _one_line_exit_2(["run", _case(), "--crash", "none", "--json", str(fifo), "--no-progress"], capsys,
                     "--json", "is a FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_device_node_is_never_replaced(tmp_path: Path, capsys) -> None:
    """``--json /dev/null`` as root replaced the machine's /dev/null; here a copy of the node in tmp."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    node = tmp_path / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    link = tmp_path / "link.json"
    link.symlink_to(node)
    for target in (node, link):
        _one_line_exit_2(["run", _case(), "--crash", "none", "--json", str(target), "--no-progress"], capsys,
                         "--json", "character device")
    from crashpoint.reports.json_report import write_atomic

    with pytest.raises(FileExistsError):
        write_atomic(node, "{}")
    assert stat.S_ISCHR(os.stat(node).st_mode)


def test_save_traces_into_a_folder_holding_a_fifo_is_refused_before_sweeping(tmp_path: Path, capsys) -> None:
    """issue 17: a FIFO named as a trace file in the ``--save-traces`` folder: a traceback after the whole
    sweep (exit 3). Now one message before anything runs, exit 2, the FIFO untouched; one that appears
    during the sweep is refused by name when the traces are written (exit 2, never written through)."""
    folder = tmp_path / "traces"
    folder.mkdir()
    fifo = folder / "refund_approved_happy_path__none.trace.json"
    os.mkfifo(fifo)
    _one_line_exit_2(["run", _case(), "--crash", "none", "--save-traces", str(folder), "--no-progress"], capsys,
                     "--save-traces", "a FIFO", fifo.name)
    link = tmp_path / "links"
    link.mkdir()
    (link / "x.trace.json").symlink_to(fifo)  # through a link too
    _one_line_exit_2(["run", _case(), "--crash", "none", "--save-traces", str(link), "--no-progress"], capsys,
                     "a FIFO")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)

    from types import SimpleNamespace

    from crashpoint.errors import UsageError
    from crashpoint.harness.traces.tracefile import save_traces

    late = SimpleNamespace(case_id="refund_approved_happy_path", crash_point=None, outcome=object())
    with pytest.raises(UsageError, match="is a FIFO; not replaced and not written through"):
        save_traces(folder, [late], [], None, None)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


@pytest.mark.parametrize("command", [["certify", "--adapter", "crashpoint.harness.adapters.reference:ReferenceAdapter"],
                                     ["search", "refunds", "--schedules", "1"]])
def test_certify_and_search_out_into_a_folder_holding_a_fifo_are_refused_before_running(
        command: list[str], tmp_path: Path, capsys) -> None:
    """``certify --out`` and ``search --out`` write files with names not known in advance there, like
    ``--save-traces``: a FIFO in the folder is one message and exit 2 before anything runs, untouched."""
    folder = tmp_path / "out"
    folder.mkdir()
    fifo = folder / "certificate.json"
    os.mkfifo(fifo)
    _one_line_exit_2([*command, "--out", str(folder)], capsys, "--out", "a FIFO", fifo.name)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
