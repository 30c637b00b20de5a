"""The pytest plugin: scenario cases as test items, expanded into the fault matrix with ``--chaos``.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
