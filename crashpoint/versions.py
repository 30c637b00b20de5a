"""The installed releases of packages, as one line for a report (``"langgraph 1.2.24, langgraph-checkpoint-sqlite
3.1.2"``): what an engine's ``version()`` says, read from the installed distributions' metadata (never imported)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def installed_versions(*packages: str) -> str:
    """``"NAME VERSION, ..."`` for each distribution name in ``packages``, in order; one not installed reads
    ``"NAME (not installed)"``."""
    found = []
    for package in packages:
        try:
            found.append(f"{package} {version(package)}")
        except PackageNotFoundError:
            found.append(f"{package} (not installed)")
    return ", ".join(found)


__all__ = ["installed_versions"]
