"""Shared test set-up: make ``tests/`` importable, here and in engine worker subprocesses.

``tests/test_quality.py`` points ``ReferenceAdapter(engine="variants.engines:NAME")`` at the
deliberately broken engines in ``tests/variants/``. The adapter imports that class in this
process, and every worker subprocess (started with this process's environment) imports it
again, so ``tests/`` goes on both ``sys.path`` and ``PYTHONPATH``, keeping what was there.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

TESTS_DIR = str(Path(__file__).resolve().parent)

if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)
_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
if TESTS_DIR not in _paths:
    os.environ["PYTHONPATH"] = os.pathsep.join([TESTS_DIR, *_paths])
