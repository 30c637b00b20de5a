"""The harness: fault injection, the runner, oracles, metrics, adapters, the CLI and the pytest plugin.

This package's ``__init__`` imports nothing, so that a worker process that only needs
:mod:`crashpoint.harness.process.crashpoints` starts fast.
"""
