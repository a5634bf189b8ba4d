"""A time limit for a learner's code, so an endless loop becomes a message, not a hang."""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager

#: How long one cell may take to define its functions and classes.
CELL_TIME_LIMIT = 30.0
#: Time limit of one check unless its marker says otherwise.
DEFAULT_TIMEOUT = 30.0
#: Seconds between a limit's firings once it has expired and the code caught it.
AGAIN = 1.0


class CheckTimeout(Exception):
    """The code under check ran longer than its time limit.

    An ``Exception``, so that py4j, interrupted in a call into the JVM, closes the connection
    it was waiting on (a ``BaseException`` would leave the thread's one connection waiting for
    the interrupted call's answer, and every later call, the check's ``stop()`` included,
    behind it). Code that catches it and carries on is interrupted again: see
    :func:`time_limit`.
    """

    def __init__(self, seconds: float):
        super().__init__(f"did not finish within {seconds:g} s")
        self.seconds = seconds


class Limit:
    """A running time limit: ``expired`` tells, afterwards, whether it fired.

    Library code may catch the :class:`CheckTimeout` raised inside it and raise its own
    error instead (py4j turns it into ``Py4JError``); ``expired`` still tells the truth.
    """

    def __init__(self, seconds: float | None):
        self.seconds = seconds
        self.expired = False

    def error(self) -> CheckTimeout:
        return CheckTimeout(self.seconds or 0)


@contextmanager
def time_limit(seconds: float | None) -> Iterator[Limit]:
    """Raise :class:`CheckTimeout` in the block once ``seconds`` have passed.

    Uses SIGALRM, which interrupts pure-Python loops and blocking calls alike. Signals
    reach only the main thread, so elsewhere the block runs without a limit. A loop inside
    C is not interrupted: the grader's supervisor kills the whole process for that. Once
    expired, the limit fires again every :data:`AGAIN` seconds until the block ends, so code
    that catches even a ``BaseException`` cannot stay in the block.
    """
    limit = Limit(seconds)
    if not seconds or threading.current_thread() is not threading.main_thread():
        yield limit
        return

    def _expire(signum, frame):
        limit.expired = True
        signal.setitimer(signal.ITIMER_REAL, AGAIN)
        raise CheckTimeout(seconds)

    previous = signal.signal(signal.SIGALRM, _expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield limit
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
