"""An ``effects:`` entry that the team's code also holds by name, imported before the worker wrapped it (attack 27 N2:
one node called ``provider.send_money``, seen, another ``_direct``, imported with ``from lgd.provider import
send_money as _direct``, never seen: the sweep passed). :func:`~crashpoint.harness.engines.workerlib.patch_effects`
finds each global of a team module that still holds the original function; the run is an ``error`` naming it."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest

from crashpoint.harness.engines.workerlib import patch_effects, unwrapped_effects

PROVIDER = '''
def send_money(order_id, amount, key=None):
    return {"status": "ok"}

def audit(order_id):
    return {"audited": order_id}
'''

NODES = '''
from n2_provider import send_money as _direct
import n2_provider

def bonus(s):
    return _direct(s, 5)
'''


@pytest.fixture()
def team(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "n2_provider.py").write_text(textwrap.dedent(PROVIDER))
    (tmp_path / "n2_nodes.py").write_text(textwrap.dedent(NODES))
    monkeypatch.syspath_prepend(str(tmp_path))
    import n2_nodes  # noqa: F401 - the team's module, imported before the worker wraps (as the zygote does)

    yield tmp_path
    for name in ("n2_provider", "n2_nodes"):
        sys.modules.pop(name, None)


def test_a_team_global_holding_the_original_of_an_effects_entry_is_found_and_the_run_names_it(team: Path) -> None:
    run_dir = team / "run"
    run_dir.mkdir()
    found = patch_effects([{"path": "n2_provider:send_money", "key": "key"}, {"path": "n2_provider:audit"}],
                          team=[str(team)], run_dir=run_dir)
    assert found == [{"module": "n2_nodes", "name": "_direct", "effect": "send_money",
                      "path": "n2_provider:send_money"}], found
    (text,) = unwrapped_effects(run_dir)
    assert text.startswith("n2_nodes._direct holds the effects: entry send_money (n2_provider:send_money) "
                           "unwrapped: calls through it are not observed: look it up through its module"), text
    assert "or mark the function with crashpoint.effect" in text


def test_the_function_in_its_own_module_and_code_outside_the_team_folders_are_not_named(team: Path) -> None:
    """An entry that names the function where the node looks it up (``n2_nodes:_direct``) leaves the definition in
    its own module as it is: that is no by-name copy. Without team folders nothing is looked for."""
    assert patch_effects([{"path": "n2_nodes:_direct", "name": "send_money"}], team=[str(team)]) == []
    assert patch_effects([{"path": "n2_provider:audit"}]) == []
