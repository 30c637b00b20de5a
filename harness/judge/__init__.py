"""Judging runs: oracles, vacuity and coverage, metrics, the result document and its record, certification.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
