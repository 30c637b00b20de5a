"""The JSON report: the result document, written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def render(data: dict[str, Any]) -> str:
    """The document as indented JSON text (keys in insertion order, UTF-8 safe). A lone surrogate
    (an engine's string may hold one; UTF-8 cannot) makes the whole text ASCII with ``\\uXXXX``
    escapes, which ``json.loads`` reads back to the same strings (a trace file replays as recorded)."""
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(data, indent=2, ensure_ascii=True) + "\n"
    return text


def write_atomic(path: str | Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file and a rename, so a reader (or a
    crash) never sees half a report. Raises ``OSError`` if the folder is not writable, and
    ``IsADirectoryError`` / ``FileExistsError`` (never replacing it) when ``path`` is a folder,
    a device, a FIFO or a socket (``/dev/null`` stays a device)."""
    path = Path(path)
    if path.exists() and not path.is_file():
        kind = IsADirectoryError if path.is_dir() else FileExistsError
        raise kind(f"{path}: not a regular file; refusing to replace it")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent if str(path.parent) else ".")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # mkstemp makes 0600; a report is an ordinary file
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(path: str | Path, data: dict[str, Any]) -> None:
    """Render ``data`` and write it atomically to ``path``."""
    write_atomic(path, render(data))
