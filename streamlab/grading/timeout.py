"""A time limit for a learner's code, so an endless loop becomes a message, not a hang."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager


class CheckTimeout(Exception):
    """The code under check ran longer than its time limit."""

    def __init__(self, seconds: float):
        super().__init__(f"did not finish within {seconds:g} s")
        self.seconds = seconds


@contextmanager
def time_limit(seconds: float | None) -> Iterator[None]:
    """Raise :class:`CheckTimeout` in the block once ``seconds`` have passed.

    Uses SIGALRM, which interrupts pure-Python loops and blocking calls alike. Signals
    reach only the main thread, so elsewhere the block runs without a limit.
    """
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _expire(signum, frame):
        raise CheckTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
