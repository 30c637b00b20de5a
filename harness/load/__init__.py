"""Loading input: YAML safely, JSON Schemas, packs, workflows and cases, with file/line/field errors.

This package's ``__init__`` imports nothing, so that importing one of its modules stays light.
"""
