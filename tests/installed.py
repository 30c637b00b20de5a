"""Skip marks for the optional engines and libraries a test module needs, found without importing them.

``pytest.importorskip("dbos")`` at a module's top imports the package while the module is collected, so every
collection, the fast loop's included, paid for importing dbos, LangGraph, Temporal and matplotlib (about 3 s of CPU
of 14 on this machine) even when ``-m "not slow"`` then deselected every test that uses them.
"""

from __future__ import annotations

import importlib.util

import pytest


def needs(module: str) -> pytest.MarkDecorator:
    """A ``skipif`` mark for ``module`` (dotted) not being installed, as ``pytestmark = needs("dbos")``: found by
    :func:`importlib.util.find_spec`, which imports only the parent packages of a dotted name."""
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing
        found = False
    return pytest.mark.skipif(not found, reason=f"{module} is not installed")
