"""Running cases: the driver, worker processes, crash points, crash modes, executors, sweeps, resume.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
