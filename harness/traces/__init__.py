"""Trace files, replay of recorded runs, and incidents turned into regression cases.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
