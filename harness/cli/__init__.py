"""The ``crashpoint`` command line: :mod:`.main` (the parser, ``main`` and ``ExitCode``; the console script
is ``crashpoint.harness.cli.main:main``), one module per command family (:mod:`.certify`, :mod:`.report`,
:mod:`.search`).

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
