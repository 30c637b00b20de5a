"""``--resume`` appends only to a run swept with the same ``--points`` (issue 25): a run of crash-point classes and a
run of every instance are different sweeps, and before, either was taken for the other."""

from __future__ import annotations

import argparse

from crashpoint.harness.cli.report import points_of
from crashpoint.harness.run.resume import differences

BASE = {"cases": {"a": "1"}, "crash_points": [], "crash": "sampled", "engine": "reference", "engine_version": "1",
        "pack_version": "1", "pack_digest": "d"}


def test_points_default_to_classes_for_a_sampled_sweep_and_all_otherwise() -> None:
    assert points_of(argparse.Namespace(points=None, crash="sampled")) == "classes"
    assert points_of(argparse.Namespace(points=None, crash="every")) == "all"
    assert points_of(argparse.Namespace(points="all", crash="sampled")) == "all"


def test_a_run_swept_with_other_points_is_not_the_one_resumed() -> None:
    classes, every = BASE | {"points": "classes"}, BASE | {"points": "all"}
    assert differences(classes, classes) == []
    assert differences(classes, every) == ["--points setting 'classes' then, 'all' now"]
    assert differences(BASE, every) == []  # recorded before the setting was: not refused for lacking it
