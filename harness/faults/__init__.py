"""Fault kinds and fault schedules: what can go wrong in a run, drawn, applied and described.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
