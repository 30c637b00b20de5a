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


def output_folder(raw: str | os.PathLike[str], option: str, *, empty: bool = False,
                  files_only: bool = False) -> Path:
    """Check that ``raw`` (the value of ``option``) is a folder files can be written in, or can be made.

    Args:
        empty: an existing folder must be empty too (``--workdir``).
        files_only: an existing folder must hold nothing but regular files and folders (a folder that
            files with names not known yet are written into, ``--save-traces``: a FIFO there would
            hang the writer or be replaced, a device written through).

    Raises:
        UsageError: an existing non-folder, a non-empty folder when ``empty``, a FIFO, device or socket
            in it (also through a link) when ``files_only``, or a folder (or nearest existing ancestor
            of a new one) where no file can be created.
    """
    path = Path(raw)
    what = f"{option} {os.fspath(raw)}"
    if path.exists():
        if not path.is_dir():
            raise UsageError(f"{what}: is {_kind(os.stat(path).st_mode)}, not a folder")
        if empty and any(path.iterdir()):
            raise UsageError(f"{what}: must be an empty folder or not exist yet")
        if files_only:
            odd = _not_a_file(path)
            if odd is not None:
                raise UsageError(f"{what}: holds {odd[1]}, {odd[0]}; give a folder of regular files only "
                                 "(a file written there could go through it)")
        _probe(path, what)
        return path
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{what}: {ancestor} is not a folder")
    _probe(ancestor, what)
    return path


def _not_a_file(folder: Path) -> tuple[str, str] | None:
    """The first entry of ``folder`` (by name) that is neither a regular file nor a folder, following links:
    ``(name, what it is)``, or ``None``. A dangling link counts as nothing (a rename replaces the link)."""
    with os.scandir(folder) as entries:
        for entry in sorted(entries, key=lambda e: e.name):
            try:
                mode = entry.stat().st_mode
            except OSError:
                continue
            if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                return entry.name, _kind(mode)
    return None


def check_written(path: Path, option: str) -> None:
    """Just before a file is written to ``path`` (by a rename) in a folder checked with ``files_only``: a
    FIFO, device, socket or folder that appeared there since is refused with :class:`UsageError`."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return
    if not stat.S_ISREG(mode):
        raise UsageError(f"{option}: {path} is {_kind(mode)}; not replaced and not written through")
