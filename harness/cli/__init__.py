"""The ``crashpoint`` command line (:mod:`.main`); ``crashpoint.harness.cli:main`` is the console script."""

from crashpoint.harness.cli.main import ExitCode, main

__all__ = ["ExitCode", "main"]
