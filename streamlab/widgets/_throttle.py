"""Rate-limit display updates: a fleet reports every send, a browser needs a few frames a second."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class Throttle:
    """Call ``action`` at most once per ``interval`` seconds, and always once after the last call.

    The first call in a quiet period runs at once (in the caller's thread); calls during the
    following ``interval`` collapse into one trailing run on a timer thread, so the display
    ends up showing the latest state even when the calls stop.
    """

    def __init__(self, action: Callable[[], None], interval: float) -> None:
        self._action = action
        self._interval = interval
        self._lock = threading.Lock()
        self._last = float("-inf")
        self._timer: threading.Timer | None = None
        self._cancelled = False

    def __call__(self) -> None:
        with self._lock:
            if self._cancelled or self._timer is not None:
                return  # a trailing run is already scheduled and will see this change
            wait = self._last + self._interval - time.monotonic()
            if wait > 0:
                self._timer = threading.Timer(wait, self._trailing)
                self._timer.daemon = True
                self._timer.start()
                return
            self._last = time.monotonic()
        self._action()

    def _trailing(self) -> None:
        with self._lock:
            self._timer = None
            if self._cancelled:
                return
            self._last = time.monotonic()
        self._action()

    def cancel(self) -> None:
        """Drop any pending run and ignore later calls."""
        with self._lock:
            self._cancelled = True
            if self._timer is not None:
                self._timer.cancel()
                self._timer = None
