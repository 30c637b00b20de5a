"""signals_held: a Ctrl-C (or SIGTERM) that comes while the sweep waits on its futures takes effect after the wait,
never inside concurrent.futures' lock juggling (a KeyboardInterrupt there left futures locked and the command
hung at exit after an interrupt, 1 time in 12)."""

from __future__ import annotations

from collections.abc import Iterator

import os
import signal

import pytest

from crashpoint.harness.run.executors import signals_held


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT as a terminal's foreground job has it (an xdist worker, or a background job, ignores it)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_sigint_inside_the_block_is_raised_when_it_ends(ctrl_c: None) -> None:
    reached = []
    with pytest.raises(KeyboardInterrupt):
        with signals_held():
            os.kill(os.getpid(), signal.SIGINT)
            reached.append("after the signal")  # not interrupted here
    assert reached == ["after the signal"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_sigterm_goes_to_the_handler_there_was_once_the_block_ends() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda signum, _frame: seen.append(signum))
    try:
        with signals_held():
            os.kill(os.getpid(), signal.SIGTERM)
            assert seen == []
        assert seen == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_ignored_signal_stays_ignored() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with signals_held():
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
            os.kill(os.getpid(), signal.SIGINT)
    finally:
        signal.signal(signal.SIGINT, previous)
