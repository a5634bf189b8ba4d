"""Run a micro-batch on a ``TwsTester`` the way Spark runs one: every key's rows, then the due timers.

In a Spark micro-batch a ``transformWithState`` operator first calls ``handleInputRows`` for
every key that has rows, then ``handleExpiredTimer`` for every timer due at the batch's
processing time. ``TwsTester`` has no public way to do that within one processing time:
``setProcessingTime(ms)`` fires the due timers at once, so rows passed to ``test()`` after it
come *after* the timers. A heartbeat that arrives in the batch where its machine's deadline
has passed is then handled after the timeout fired (Unhealthy, then Healthy again), which
Spark never does: there the heartbeat comes first.

:func:`spark_batch` keeps Spark's order. It needs two private members of ``TwsTester``
(``_currentProcessingTimeMs`` and ``_handleExpiredTimers``); :func:`pending_timers` and
:func:`register_timer` reach into the tester's in-memory handle (``handle._timers``,
``handle.setGroupingKey``), and :func:`spark_initial_state` into both (``_getTimerValues``).
Every use goes through :func:`_require`, which raises :class:`TwsTesterChanged` with a sentence
when a PySpark release no longer has them.

    tester = TwsTester(processor, timeMode="ProcessingTime")
    spark_batch(tester, 1_000, {"m1": [Row(machine_name="m1")]})   # rows of m1, then due timers
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

#: The PySpark releases whose ``TwsTester`` this module was checked against.
CHECKED_ON = ("4.2", "4.3")

_MISSING = object()


class TwsTesterChanged(RuntimeError):
    """The installed PySpark's ``TwsTester`` lacks a private member this module relies on."""


def _require(tester, *members: str) -> None:
    """Raise :class:`TwsTesterChanged` unless ``tester`` has every dotted ``member``."""
    import pyspark

    for member in members:
        owner = tester
        for part in member.split("."):
            owner = getattr(owner, part, _MISSING)
            if owner is _MISSING:
                raise TwsTesterChanged(
                    f"streamlab.tws_batches needs TwsTester.{member}, a private member of "
                    f"PySpark's TwsTester that it was checked against on PySpark "
                    f"{' and '.join(CHECKED_ON)}; PySpark {pyspark.__version__} does not have "
                    f"it. Read pyspark/sql/streaming/tws_tester.py of this release and adapt "
                    f"streamlab/tws_batches.py to it."
                )


def spark_batch(tester, now_ms: int, rows_by_key: Mapping[Any, list]) -> list:
    """One micro-batch at processing time ``now_ms``, in Spark's order.

    ``handleInputRows`` runs for each key of ``rows_by_key`` (in the mapping's order, with its
    rows), then ``handleExpiredTimer`` for every timer due at ``now_ms``. Returns what the
    handlers emitted, rows first. ``now_ms`` must not go back in time.
    """
    from_rows, from_timers = spark_batch_by_handler(tester, now_ms, rows_by_key)
    return from_rows + from_timers


def spark_batch_by_handler(tester, now_ms: int, rows_by_key: Mapping[Any, list]) -> tuple:
    """The micro-batch of :func:`spark_batch`, with what each handler emitted kept apart:
    ``(emitted by handleInputRows, emitted by handleExpiredTimer)``."""
    _require(tester, "_currentProcessingTimeMs", "_handleExpiredTimers")
    if now_ms < tester._currentProcessingTimeMs:
        raise ValueError(
            f"a micro-batch at {now_ms} ms after one at {tester._currentProcessingTimeMs} ms: "
            f"processing time only moves forward"
        )
    tester._currentProcessingTimeMs = now_ms
    from_rows = []
    for key, rows in rows_by_key.items():
        from_rows += tester.test(key, list(rows))
    return from_rows, list(tester._handleExpiredTimers())


def pending_timers(tester, key) -> list[int]:
    """The expiry times (ms) of the timers ``key`` has registered and not yet seen fire."""
    _require(tester, "handle._timers.listTimers")
    return sorted(tester.handle._timers.listTimers(key))


def register_timer(tester, key, expiry_ms: int) -> None:
    """Register a timer for ``key`` from outside the processor, as one of its handlers would.

    With ``tester.updateValueState`` it sets up a story that starts in the middle of a key's
    life: its state and its pending timer as an earlier batch left them.
    """
    _require(tester, "handle.setGroupingKey", "handle.registerTimer")
    tester.handle.setGroupingKey(key)
    tester.handle.registerTimer(expiry_ms)


def spark_initial_state(tester, now_ms: int, rows: list[tuple]) -> list:
    """Hand ``handleInitialState`` the ``(key, row)`` pairs of an initial state at ``now_ms``.

    ``TwsTester(initialStateRow=...)`` does the same at processing time 0, where a processor
    that arms its timers from the clock cannot be tested. Returns what each call returned:
    Spark ignores it, so a generator there (a ``yield``) is a handler that never runs.
    """
    _require(tester, "_currentProcessingTimeMs", "_getTimerValues", "handle.setGroupingKey")
    if now_ms < tester._currentProcessingTimeMs:
        raise ValueError(
            f"an initial state at {now_ms} ms after a batch at {tester._currentProcessingTimeMs} "
            f"ms: processing time only moves forward"
        )
    tester._currentProcessingTimeMs = now_ms
    returned = []
    for key, row in rows:
        tester.handle.setGroupingKey(key)
        returned.append(tester.processor.handleInitialState((key,), row, tester._getTimerValues()))
    return returned


_STATE_CALLS = (
    "get",
    "exists",
    "update",
    "clear",
    "getValue",
    "containsKey",
    "updateValue",
    "iterator",
    "keys",
    "values",
    "removeKey",
    "put",
    "appendValue",
    "appendList",
)
_HANDLE_CALLS = ("registerTimer", "deleteTimer", "listTimers", "deleteIfExists")


class Meter:
    """Counts the state calls a processor makes through a ``TwsTester``'s handle and states.

    A call made from inside another counted call (TwsTester's own plumbing) is not counted
    again. :meth:`take` returns the counts so far and starts again from zero.
    """

    def __init__(self, tester: Any) -> None:
        self.calls: Counter = Counter()
        self._depth = 0
        handle = tester.handle
        self._wrap(handle, _HANDLE_CALLS)
        for name in ("getValueState", "getListState", "getMapState"):
            self._wrap_factory(handle, name)
        for group in (handle.value_states, handle.list_states, handle.map_states):
            for state in group.values():
                self._wrap(state, _STATE_CALLS)

    def take(self) -> Counter:
        calls, self.calls = self.calls, Counter()
        return calls

    @staticmethod
    def listing(calls: Counter) -> str:
        """``get x1, update x1``: the calls in a sentence."""
        return ", ".join(f"{name} x{n}" for name, n in sorted(calls.items())) or "none"

    def _count(self, name, method):
        def counted(*args, **kwargs):
            if self._depth == 0:
                self.calls[name] += 1
            self._depth += 1
            try:
                return method(*args, **kwargs)
            finally:
                self._depth -= 1

        return counted

    def _wrap(self, obj, names):
        for name in names:
            method = getattr(obj, name, None)
            if method is not None and not getattr(method, "_metered", False):
                counted = self._count(name, method)
                counted._metered = True
                setattr(obj, name, counted)

    def _wrap_factory(self, handle, name):
        factory = getattr(handle, name)

        def wrapped(*args, **kwargs):
            self.calls[name] += 1
            state = factory(*args, **kwargs)
            self._wrap(state, _STATE_CALLS)
            return state

        setattr(handle, name, wrapped)
