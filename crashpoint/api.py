"""The target API: mark a team's side effects and checks so crashpoint can judge their own code.

::

    import crashpoint

    @crashpoint.effect("issue_refund", key=lambda draft_id, **_: f"refund-{draft_id}")
    def issue_refund(draft_id: str, amount_cents: int) -> dict: ...

    @crashpoint.invariant
    def refund_matches_draft(run) -> None:      # run: crashpoint.RunView
        assert len(run.applied("issue_refund")) <= len(run.applied("draft_refund"))

Outside a crashpoint run, :func:`effect` is a pass-through: the wrapper reads one module global and
calls the function (measured in ``benchmarks/effect_overhead.py``). Importing this module imports
nothing but the standard library's ``functools`` and ``os``: no harness, no pandas, no engine.

In a process of a target run that is not a worker (a subprocess a team's node starts: its environment carries
the run's marker ``CRASHPOINT_RUN_DIR``, the folder holds ``target.json``), no session is installed; a call
there is appended to ``RUN_DIR/``:data:`OUTSIDE_FILE` and the function is called. The ledger never holds it
and no crash point is armed around it, so the run's verdict is ``error`` naming the pid and the effect.

Inside a run, a crashpoint worker installs a session (:func:`_install`); every call of an effect then
goes to the run's ledger (effect name, idempotency key, a digest of the arguments, the calling
process, the workflow/thread and node the engine says it is in, the outcome), passes the crash points
``before_effect:NAME`` and ``after_effect:NAME``, and may take a scripted tool fault (see
:class:`EffectFault`, :class:`EffectRateLimited`; an ``empty_answer`` / ``malformed_answer`` fault returns ``{}`` /
an HTML error page's text instead of the function's value, with the effect applied). A call that repeats the key of an applied call is answered the way payment APIs
answer a repeated ``Idempotency-Key``: with the first result, the function not called again, recorded
``duplicate``. A call with no key is a new effect every time.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Sequence

#: The environment variable naming the run folder of the process (set by ``crashpoint.harness.process.launch`` for every
#: worker of a run, inherited by its children).
RUN_MARKER = "CRASHPOINT_RUN_DIR"
#: File of a run folder: one JSON line ``{"pid", "ppid", "effect", "key"}`` per effect call made outside a worker.
OUTSIDE_FILE = "outside-effects.log"


class _Outside:
    """The session of a process of a target run that is not a worker: each call is noted in ``RUN_DIR/``
    :data:`OUTSIDE_FILE` (one ``O_APPEND`` write per line), then made."""

    def __init__(self, run_dir: str) -> None:
        self.path = os.path.join(run_dir, OUTSIDE_FILE)

    def call(self, spec: "EffectSpec", fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Note the call (its key ``None`` when it cannot be read), then return ``fn(*args, **kwargs)``."""
        try:
            key = spec.key_of(fn, args, kwargs)
        except Exception:  # noqa: BLE001 - the call is noted whatever its arguments
            key = None
        import json

        line = json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "effect": spec.name, "key": key}) + "\n"
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)
        return fn(*args, **kwargs)


def _outside_session() -> _Outside | None:
    """The session of this process when it belongs to a target run (its marker names a folder with ``target.json``)
    without being its worker; ``None`` otherwise (no run: the pass-through)."""
    run_dir = os.environ.get(RUN_MARKER)
    if run_dir and os.path.exists(os.path.join(run_dir, "target.json")):
        return _Outside(run_dir)
    return None


#: The running session (set in a crashpoint worker by :func:`_install`); ``None`` outside a run; in a non-worker
#: process of a target run (a node's subprocess), an :class:`_Outside`.
_session: Any = _outside_session()
#: Invariants registered with :func:`invariant`, by name, in registration order.
_invariants: dict[str, Callable[["RunView"], Any]] = {}
#: Every registration, in order: ``(name, check)`` (two targets' modules may each register a check of one name: each
#: target's own are told apart by :func:`resolve_invariants`).
_registrations: list[tuple[str, Callable[["RunView"], Any]]] = []
#: Effects made in this process by :func:`effect` and :func:`wrap` (name -> ``module:qualname`` of each function).
_effects: dict[str, list[str]] = {}


def _origin(fn: Any) -> str:
    """``module:qualname`` of a function (what names a check or an effect in messages)."""
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


class EffectFault(Exception):
    """A tool fault crashpoint scripted for an effect call (never raised outside a run).

    Attributes:
        effect: the effect's name. ``retryable``: whether retrying can succeed. ``maybe_applied``: the
        effect happened and only its answer was lost (a ``lost_response``).

    Pickles and unpickles whole (class, message, attributes).
    """

    def __init__(self, message: str, *, effect: str, retryable: bool, maybe_applied: bool = False) -> None:
        super().__init__(message)
        self.effect, self.retryable, self.maybe_applied = effect, retryable, maybe_applied

    def __reduce__(self) -> tuple:
        """Pickles and unpickles to an equal fault (DBOS pickles a failed step's exception and raises it again when
        it replays the workflow): the default, ``cls(*args)``, lacks the keyword-only arguments."""
        from crashpoint.errors import rebuilt

        return rebuilt, (type(self), self.args), self.__dict__


class EffectTimeout(EffectFault, TimeoutError):
    """A scripted timeout: no answer in time, nothing applied (retryable)."""


class EffectRateLimited(EffectFault):
    """A scripted rate limit: the provider refused the call with HTTP 429 and a ``Retry-After``; nothing applied.

    Retryable: durable code waits ``retry_after`` seconds, then calls again with the same idempotency key.

    Attributes:
        status: ``429``. ``retry_after``: seconds to wait before the next call (a float, real time).
        Also :class:`EffectFault`'s (``retryable`` is ``True``, ``maybe_applied`` ``False``).

    Pickles and unpickles whole (class, message, attributes).
    """

    def __init__(self, message: str, *, effect: str, retry_after: float, status: int = 429,
                 retryable: bool = True, maybe_applied: bool = False) -> None:
        super().__init__(message, effect=effect, retryable=retryable, maybe_applied=maybe_applied)
        self.status, self.retry_after = status, retry_after


#: How a provider answers an idempotency key used again with other arguments (:class:`EffectSpec`).
KEY_REUSE = ("conflict", "replay")


@dataclass(frozen=True)
class EffectSpec:
    """How one effect is identified: its ``name`` and how to read its idempotency key.

    ``key`` is ``None`` (no key), the name of a parameter whose value is the key, or a callable taking
    the effect's arguments by name (``lambda draft_id, **_: f"refund-{draft_id}"``) and returning the key
    (``str`` or ``None``). ``key_reuse`` (:data:`KEY_REUSE`) is how the provider answers a key used again with other
    arguments: ``conflict`` (the default, as a payments API refuses it: the call raises :class:`EffectFault`, applies
    nothing, and the run fails ``target.key_reused``) or ``replay`` (a provider that answers the first call's answer
    whatever the arguments: recorded ``duplicate``, no finding).
    """

    name: str
    key: str | Callable[..., Any] | None = None
    key_reuse: str = "conflict"

    def key_of(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> str | None:
        """The call's idempotency key as a string, or ``None``.

        Raises:
            TypeError: ``key`` names a parameter the call does not bind.
        """
        if self.key is None:
            return None
        bound = bound_arguments(fn, args, kwargs)
        value = self.key(**bound) if callable(self.key) else bound.get(self.key)
        return None if value is None else str(value)


def bound_arguments(fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """``{parameter: value}`` of one call of ``fn`` (defaults applied; ``inspect`` is imported here, lazily).

    Raises:
        TypeError: the arguments do not fit ``fn``'s signature.
    """
    import inspect

    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except ValueError:  # a builtin without a signature
        return {f"arg{i}": a for i, a in enumerate(args)} | dict(kwargs)
    bound.apply_defaults()
    return dict(bound.arguments)


def wrap(fn: Callable[..., Any], name: str | None = None, key: str | Callable[..., Any] | None = None,
         key_reuse: str = "conflict") -> Callable[..., Any]:
    """``fn`` as an effect (what :func:`effect` does to a decorated function; also used to patch an
    effect named by dotted path in a target's ``effects:``). Wrapping a wrapped effect returns it.

    Raises:
        ValueError: ``key_reuse`` is not one of :data:`KEY_REUSE`.
    """
    if key_reuse not in KEY_REUSE:
        raise ValueError(f"key_reuse must be one of {', '.join(KEY_REUSE)}, got {key_reuse!r}")
    if getattr(fn, "__crashpoint_effect__", None) is not None:
        return fn
    spec = EffectSpec(name or getattr(fn, "__qualname__", repr(fn)), key, key_reuse)
    origins = _effects.setdefault(spec.name, [])
    if _origin(fn) not in origins:
        origins.append(_origin(fn))

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        session = _session
        if session is None:
            return fn(*args, **kwargs)
        return session.call(spec, fn, args, kwargs)

    wrapper.__crashpoint_effect__ = spec  # type: ignore[attr-defined]
    return wrapper


def effect(name: str | Callable[..., Any] | None = None, *, key: str | Callable[..., Any] | None = None,
           key_reuse: str = "conflict") -> Any:
    """Mark a side-effecting function: ``@effect``, ``@effect("issue_refund", key="draft_id")``, or
    ``effect("notify")(send_email)``.

    Args:
        name: the effect's name in the ledger, crash points and findings (default: the function's
            qualified name).
        key: its idempotency key: ``None``, a parameter name, or a callable given the call's arguments by
            name (``lambda order_id, **_: f"refund-{order_id}"``) that returns it.
        key_reuse: how the provider answers the key used again with other arguments (:class:`EffectSpec`):
            ``conflict`` (default: refused, as a payments API does; a finding, ``target.key_reused``) or ``replay``
            (the first answer, whatever the arguments).

    Returns:
        The wrapped function (or, without a function, the decorator).

    Raises:
        ValueError: ``key_reuse`` is not one of :data:`KEY_REUSE`.
    """
    if callable(name):
        return wrap(name)
    if key_reuse not in KEY_REUSE:
        raise ValueError(f"key_reuse must be one of {', '.join(KEY_REUSE)}, got {key_reuse!r}")
    return lambda fn: wrap(fn, name, key, key_reuse)


def invariant(fn: Callable[["RunView"], Any] | None = None, *, name: str | None = None) -> Any:
    """Register a user check over a run, judged like an oracle (rule ``target.invariant:NAME``).

    The check takes a :class:`RunView`. It passes only by returning ``None`` or ``True`` (those objects: not
    ``numpy.True_``, not ``1``); it fails by raising ``AssertionError``, by returning a non-empty string (the
    message) or by returning anything else (``False``, ``numpy.False_``, ``0``, ``""``, an object: the finding says
    what it returned). Any other exception, ``BaseException`` included (``SystemExit``, ``KeyboardInterrupt``,
    pytest's ``skip`` and ``fail`` outcomes), makes its verdict ``unknown`` with the exception's text: never a pass,
    never a skip of the calling test, never an exit of the process. Returns ``fn`` unchanged.
    """
    def register(check: Callable[["RunView"], Any]) -> Callable[["RunView"], Any]:
        key = name or check.__name__
        _invariants[key] = check
        _registrations.append((key, check))
        return check

    return register(fn) if fn is not None else register


def registered_invariants() -> dict[str, Callable[["RunView"], Any]]:
    """The invariants registered so far (name -> check)."""
    return dict(_invariants)


def registered_effects() -> dict[str, list[str]]:
    """The effects made so far in this process (:func:`effect`, :func:`wrap`): name -> the ``module:qualname`` of each
    function made that effect."""
    return {k: list(v) for k, v in _effects.items()}


class InvariantClash(ValueError):
    """Two different checks of a target share one name (one rule id ``target.invariant:NAME``): one of them would be
    dropped. ``name``: the name; ``origins``: ``module:qualname`` of each."""

    def __init__(self, name: str, origins: Sequence[str]) -> None:
        super().__init__(f"two invariants are named {name!r}: {', '.join(origins)}; one would never be judged "
                         "(give one another name: crashpoint.invariant(name=...))")
        self.name, self.origins = name, list(origins)

    def __reduce__(self) -> tuple:
        return InvariantClash, (self.name, self.origins)


def resolve_invariants(specs: Sequence[str]) -> dict[str, Callable[["RunView"], Any]]:
    """The checks a target's ``invariants:`` means: each ``module:attr`` it names (under the name it was registered
    with, else ``attr``) and every other check registered by those modules, imported here (the target's folders must
    already be on ``sys.path``).

    Raises:
        ImportError / AttributeError: a spec names nothing.
        InvariantClash: two different checks of those modules (or named) share a name.
    """
    import importlib

    named = []
    for spec in specs:  # imported first: importing a module registers its checks
        module, _, attr = spec.partition(":")
        fn: Any = importlib.import_module(module)
        for part in attr.split("."):
            fn = getattr(fn, part)
        named.append((attr.rsplit(".", 1)[-1], fn))
    modules = {s.partition(":")[0] for s in specs}
    found: dict[str, dict[str, Callable[["RunView"], Any]]] = {}  # name -> origin -> check (a module imported again
    for key, fn in _registrations:                                 # registers its checks again: one origin)
        if getattr(fn, "__module__", None) in modules:
            found.setdefault(key, {})[_origin(fn)] = fn
    for attr, fn in named:
        as_registered = next((n for n, f in reversed(_registrations) if f is fn), None)
        found.setdefault(as_registered or attr, {})[_origin(fn)] = fn
    checks: dict[str, Callable[["RunView"], Any]] = {}
    for key, by_origin in found.items():
        if len(by_origin) > 1:
            raise InvariantClash(key, list(by_origin))
        checks[key] = next(iter(by_origin.values()))
    return checks


@dataclass(frozen=True)
class EffectCall:
    """One effect call as a check sees it.

    Attributes:
        seq: order in the run's ledger (1-based). ``effect``: its name. ``key``: the idempotency key or
            ``None``. ``digest``: SHA-256 prefix of the arguments. ``args``: the arguments (JSON form).
        outcome: ``applied`` | ``duplicate`` (a repeated key, not applied again) | ``failed`` | ``conflict`` (the key
            used again with other arguments, refused: :class:`EffectSpec`'s ``key_reuse``).
        lost: the effect applied but its answer never reached the caller.
        pid: the calling process. ``thread`` / ``node`` / ``task``: where the engine said the call ran.
        durable: the engine had a durable record of the thread when the call began.
        live_others: the run's other worker processes alive when the call began (pids).
        error: the failure's text. ``result``: the answer (JSON form). ``step``: the engine's step number
            (LangGraph's superstep) when the engine gives one. ``gseq``: position in the order the ledger
            shares between effect calls and human decisions.
    """

    seq: int
    effect: str
    key: str | None
    digest: str
    args: Any
    outcome: str
    lost: bool
    pid: int
    thread: str | None
    node: str | None
    task: str | None
    durable: bool | None
    live_others: tuple[int, ...] = ()
    error: str | None = None
    result: Any = None
    step: int | None = None
    gseq: int = 0


@dataclass(frozen=True)
class RunView:
    """What an invariant sees of one run.

    Attributes:
        calls: every effect call, in order. ``final``: thread -> the thread's final state values
            (``None`` when it has no checkpoint). ``status``: thread -> ``finished`` | ``waiting`` |
            ``no_checkpoint`` | ``stuck``. ``decisions``: the human answers given, in order.
        crash_point: the crash point of this run (``None``: the golden run).
    """

    calls: tuple[EffectCall, ...]
    final: Mapping[str, Any]
    status: Mapping[str, str]
    decisions: tuple[Mapping[str, Any], ...] = ()
    crash_point: str | None = None
    notes: tuple[str, ...] = field(default=())

    def applied(self, effect: str | None = None, thread: str | None = None) -> list[EffectCall]:
        """Calls whose effect happened (duplicates and failures excluded), of ``effect``/``thread`` when given."""
        return [c for c in self.calls if c.outcome == "applied" and effect in (None, c.effect)
                and thread in (None, c.thread)]


def run_dir() -> "os.PathLike[str] | None":
    """The folder of the crashpoint run this process belongs to, as a ``pathlib.Path``; ``None`` outside a run.

    Every worker of a run, and every process it starts that inherits its environment, has it (the run's marker
    ``CRASHPOINT_RUN_DIR``); each run has its own, so a team's fake provider that keeps its state in a file keeps it
    per run there (``Path(crashpoint.run_dir() or ".") / "payments.json"``), where a file in the working directory is
    shared by every run of a sweep at once (runs go in parallel) and outlives the run. Read it when a call is made, not
    at import time: a worker is forked from a zygote that imported the team's modules before any run existed.
    """
    folder = os.environ.get(RUN_MARKER)
    if not folder:
        return None
    from pathlib import Path

    return Path(folder)


def _install(session: Any) -> None:
    """Make ``session`` (an object with ``call(spec, fn, args, kwargs)``) receive every effect call of this
    process; ``None`` turns the pass-through back on. Called by crashpoint workers only."""
    global _session
    _session = session
