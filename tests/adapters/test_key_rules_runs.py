"""Keys as payment APIs treat them (issue 28 item 5), on real LangGraph golden runs (``--crash none``), as a team gets
them wrong and right:

* one key shared by two orders (``shared_key.yaml``): the second order's call is refused as a ``conflict``
  (``target.key_reused``); before, it was answered the first order's refund as a ``duplicate`` and every run passed.
  Against a provider declared ``key_reuse="replay"`` the ledger answers ``duplicate`` and the rule says nothing;
* a key made fresh per call: the retry after a lost answer (``random_key.yaml``, case ``payments-flaky``) and the
  e-mail before ``interrupt()`` (``email_uuid.yaml``) apply the same request twice with no kill, in the golden run
  (``target.fresh_key_repeat``);
* the fixed graphs (a key from the order, the mail in its own node) pass."""

from __future__ import annotations

from pathlib import Path

import pytest
from installed import needs

pytestmark = [needs("langgraph.checkpoint.sqlite"), pytest.mark.slow]

from crashpoint.harness.load.target import Target  # noqa: E402
from crashpoint.harness.run.target_sweep import sweep  # noqa: E402

HERE = Path(__file__).resolve().parents[1] / "data/realbugs"


def _golden(tmp_path: Path, name: str) -> dict[str, tuple[str, set[str]]]:
    result = sweep(Target.from_file(HERE / f"{name}.yaml"), crash="none", workdir=tmp_path / name)
    return {r.case_id: (r.verdict, {f.rule for f in r.failures}) for r in result.results}


def test_a_key_shared_by_two_orders_is_a_conflict_unless_the_provider_replays(tmp_path: Path) -> None:
    (verdict, rules), = _golden(tmp_path, "shared_key").values()
    assert verdict == "failed" and "target.key_reused" in rules, rules
    assert _golden(tmp_path, "shared_key_fixed") == {"default[sync]": ("passed", set())}
    (verdict, rules), = _golden(tmp_path, "shared_key_replay").values()
    assert "target.key_reused" not in rules and verdict == "passed", rules


def test_a_fresh_key_per_call_that_pays_or_mails_twice_fails_its_golden_run(tmp_path: Path) -> None:
    broken = _golden(tmp_path, "random_key")
    assert broken["ok[sync]"] == ("passed", set())
    assert broken["payments-flaky[sync]"][0] == "failed" and "target.fresh_key_repeat" in broken["payments-flaky[sync]"][1]
    (verdict, rules), = _golden(tmp_path, "email_uuid").values()
    assert verdict == "failed" and "target.fresh_key_repeat" in rules, rules
    assert all(v == ("passed", set()) for v in _golden(tmp_path, "random_key_fixed").values())
    assert _golden(tmp_path, "email_uuid_fixed") == {"default[sync]": ("passed", set())}
