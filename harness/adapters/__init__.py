"""Engine adapters. :class:`~.reference.ReferenceAdapter` drives crashpoint's own engine."""

from crashpoint.harness.adapters.reference import ReferenceAdapter

__all__ = ["ReferenceAdapter"]
