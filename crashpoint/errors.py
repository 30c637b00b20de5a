"""The exception hierarchy: one root, builtin-compatible subclasses.

Every error crashpoint raises on purpose derives from :class:`CrashpointError`.
Errors about input files carry the file, the line (1-based) and the field path
so that a message can be acted on without opening a debugger (after
Hypothesis' ``errors.py`` and attrs' validators).
"""

from __future__ import annotations


def rebuilt(cls: type[BaseException], args: tuple) -> BaseException:
    """An exception of class ``cls`` with ``args``, made without calling its ``__init__`` (pickle then restores its
    attributes): how :meth:`CrashpointError.__reduce__` and :meth:`crashpoint.api.EffectFault.__reduce__` cross
    processes whatever their ``__init__`` requires (keyword-only arguments)."""
    exc = cls.__new__(cls)
    exc.args = args
    return exc


class CrashpointError(Exception):
    """Root of every error crashpoint raises on purpose. Every one pickles and unpickles to an equal exception (its
    class, ``args``, ``str()`` and attributes), whatever its ``__init__`` takes: engines pickle the exceptions a
    team's code raises (DBOS records a failed step's exception and raises it again on recovery)."""

    def __reduce__(self) -> tuple:
        return rebuilt, (type(self), self.args), self.__dict__


class UsageError(CrashpointError, ValueError):
    """The command line or an API was used wrongly (exit code 2)."""


class CaseError(CrashpointError, ValueError):
    """A case, pack, workflow or trace file is malformed.

    Args:
        message: what is wrong, in one sentence, with the fix when known.
        file: path of the offending file (``str``), or ``None``.
        line: 1-based line number in ``file``, or ``None`` when unknown.
        field: dotted path of the offending field (``"events[1].type"``), or ``None``.

    ``str(err)`` is ``"FILE:LINE: field FIELD: MESSAGE"``, the form editors and
    CI annotations understand.
    """

    def __init__(self, message: str, *, file: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.message = message
        self.file = file
        self.line = line
        self.field = field
        super().__init__(str(self))

    def __str__(self) -> str:
        where = printable(self.file or "<input>")
        if self.line is not None:
            where += f":{self.line}"
        what = f" field {printable(self.field)}:" if self.field else ""
        return f"{where}:{what} {printable(self.message)}"


def printable(text: str) -> str:
    """``text`` with each non-printable character (line breaks, NUL, bidi controls) written as a
    Python escape (``\\n``, ``\\x00``, ``\\u202e``), so a message stays one readable line whatever a
    hostile file name, key or value holds."""
    text = str(text)
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


class EngineCrashed(CrashpointError, RuntimeError):
    """An engine worker process died in a way the harness did not cause."""


class WorkerTimeout(CrashpointError, TimeoutError):
    """An engine worker neither finished nor crashed within its timeout (seconds)."""


class Unsupported(CrashpointError):
    """The engine (or its release) lacks a feature the run needs: the run's verdict is ``unsupported``,
    never ``failed`` or ``passed``."""


class StoreError(CrashpointError, RuntimeError):
    """A file crashpoint keeps state in cannot be read or written: an engine database, a ledger or a
    results store that is damaged, of another schema or format, or not a SQLite file at all; a write
    that failed (disk full, read-only). The ``crashpoint`` command exits 3 on it.

    Args:
        message: what is wrong, naming the file (or the database URL).
        file: the file or URL, or ``None`` when the message alone names it.
    """

    def __init__(self, message: str, *, file: str | None = None) -> None:
        self.message = message
        self.file = file
        super().__init__(printable(message))
