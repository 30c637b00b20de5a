"""Output paths checked before anything runs: a report, a result document, a store, a folder of run
folders or trace files. A sweep that can only fail to write its results at the end (after an hour of
runs) is refused at the start instead, with one message and exit code 2.

The rules (README, "Hostile input and misbehaving engines"):

* an output **file** is a regular file or does not exist yet, in an existing folder this process can
  create files in (it is written through a temporary file and a rename there); a device, FIFO,
  socket or folder is refused, never replaced (``--json /dev/null`` as root used to replace the
  machine's ``/dev/null`` with a regular file);
* an output **folder** is a folder or does not exist yet; its nearest existing ancestor must be one
  this process can create files in (tested by creating one: permission bits do not stop root, a
  read-only file system does).
"""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from crashpoint.errors import UsageError


def _probe(folder: Path, what: str) -> None:
    """Create and remove a file in ``folder``; :class:`UsageError` naming ``what`` if that fails."""
    try:
        fd, name = tempfile.mkstemp(prefix=".crashpoint-probe-", dir=folder)
    except OSError as exc:
        raise UsageError(f"{what}: folder {folder} is not writable ({exc.strerror or exc})") from None
    os.close(fd)
    os.unlink(name)


def _kind(mode: int) -> str:
    return ("a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else
            "a character device" if stat.S_ISCHR(mode) else "a block device" if stat.S_ISBLK(mode) else
            "a socket" if stat.S_ISSOCK(mode) else "not a regular file")


def output_file(raw: str | os.PathLike[str], option: str) -> Path:
    """Check that ``raw`` (the value of ``option``, for the message) can be written atomically.

    Returns:
        the path as given.

    Raises:
        UsageError: empty; an existing non-regular file (folder, FIFO, device, socket), also through a
            symbolic link; a regular file this process may not write; a folder that does not exist or
            where no file can be created.
    """
    text = os.fspath(raw)
    if not text:
        raise UsageError(f"{option}: give a file name")
    path = Path(text)
    what = f"{option} {text}"
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{what}: cannot be read ({exc.strerror or exc})") from None
    if mode is not None:
        if not stat.S_ISREG(mode):
            raise UsageError(f"{what}: is {_kind(mode)}; give a regular file or a new file name "
                             "(it would be replaced)")
        if not os.access(path, os.W_OK):
            raise UsageError(f"{what}: not writable")
    folder = path.resolve().parent if mode is not None or path.is_symlink() else path.absolute().parent
    if not folder.is_dir():
        raise UsageError(f"{what}: folder {folder} does not exist")
    _probe(folder, what)
    return path


def output_folder(raw: str | os.PathLike[str], option: str, *, empty: bool = False) -> Path:
    """Check that ``raw`` (the value of ``option``) is a folder files can be written in, or can be made.

    Args:
        empty: an existing folder must be empty too (``--workdir``).

    Raises:
        UsageError: an existing non-folder, a non-empty folder when ``empty``, or a folder (or nearest
            existing ancestor of a new one) where no file can be created.
    """
    path = Path(raw)
    what = f"{option} {os.fspath(raw)}"
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{what}: is {_kind(os.stat(path).st_mode)}, not a folder")
        if empty and any(path.iterdir()):
            raise UsageError(f"{what}: must be an empty folder or not exist yet")
        _probe(path, what)
        return path
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{what}: {ancestor} is not a folder")
    _probe(ancestor, what)
    return path
