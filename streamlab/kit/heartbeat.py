"""What the heartbeat checks share: the course's reference processor, a state-call meter, a
processor's story on a ``TwsTester``.

- ``ReferenceHeartbeatProcessor`` is lab 04's ``LeanHeartbeatProcessor``, loaded from the
  solution notebook (:func:`streamlab.solutions.load_solution`), so that a check of a later
  exercise (a query, a sink, a bucketed processor) is graded on that exercise alone, never on
  the learner's lab 04.
- ``Meter`` (:class:`streamlab.tws_batches.Meter`) counts the state calls a processor makes
  under ``TwsTester``: every call of a Python processor is a round trip to the JVM, and the cost
  exercises grade the count.
"""

from __future__ import annotations

from contextlib import contextmanager
from datetime import UTC, datetime

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor

from streamlab.grading.expect import CheckFailed
from streamlab.tws_batches import Meter as Meter
from streamlab.tws_batches import pending_timers


@contextmanager
def handler_must_yield(who: str, rows: str = "status_row(...)"):
    """Turn the TypeError of a handler that returned None into a sentence that says so.

    ``who`` names the handler (or processor) in the sentence; ``rows`` is what it should yield.
    """
    try:
        yield
    except TypeError as error:
        if "NoneType" in str(error) and "iter" in str(error):
            raise CheckFailed(
                f"{who} returned None: it should yield its rows (a handler that yields nothing "
                "is fine: it returns an empty generator).",
                expected=f"a generator that yields {rows} for each change",
                actual="None",
            ) from None
        raise


def epoch_ms(value) -> int | None:
    """Milliseconds since the epoch of a datetime (naive means UTC); None for anything else."""
    if not isinstance(value, datetime):
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return round(value.timestamp() * 1000)


def __getattr__(name: str):
    # Loaded on first use: the solution notebook runs once per process, and only for the
    # checks that need it.
    if name == "ReferenceHeartbeatProcessor":
        from streamlab.solutions import load_solution

        return load_solution("04").LeanHeartbeatProcessor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


STATUS_FIELDS = ["machine_name", "status", "previous_status", "last_status_change_time"]


def status_tuples(rows, who: str, method: str) -> list[tuple]:
    """``(machine, status, previous, ms)`` per row a handler emitted, checked on the way.

    Each row must be a ``Row`` with the status fields in order and a datetime for its time;
    a check fails with a sentence naming ``who.method`` when one is not.
    """
    summary = []
    for row in rows:
        if not isinstance(row, Row):
            raise CheckFailed(
                f"{who}.{method} should emit Row objects (use status_row(...)).",
                expected="a Row",
                actual=f"a {type(row).__name__}: {row!r}",
            )
        fields = list(row.asDict().keys())
        if fields != STATUS_FIELDS:
            raise CheckFailed(
                f"{who}.{method} emitted a row with other fields than STATUS_SCHEMA's, in its "
                "order. Build rows with status_row(...).",
                expected=STATUS_FIELDS,
                actual=fields,
            )
        when = epoch_ms(row.last_status_change_time)
        if when is None:
            raise CheckFailed(
                f"last_status_change_time should be a datetime, in what {who}.{method} "
                "emitted. status_row(...) converts milliseconds for you.",
                expected="a datetime",
                actual=repr(row.last_status_change_time),
            )
        summary.append((row.machine_name, row.status, row.previous_status, when))
    return summary


class ProcessorStory:
    """A processor on a ``TwsTester`` with a clock that moves only when the check moves it.

    :meth:`at` moves the clock and returns what the timers emitted; :meth:`batch` runs one
    micro-batch of a key. Both return :func:`status_tuples`.
    """

    def __init__(self, processor, name: str):
        self.name = name
        if not isinstance(processor, StatefulProcessor):
            raise CheckFailed(
                f"{name} should be a StatefulProcessor subclass.",
                expected="a StatefulProcessor",
                actual=f"{name}() is a {type(processor).__name__}",
            )
        from pyspark.sql.streaming.tws_tester import TwsTester

        self.tester = TwsTester(processor, timeMode="ProcessingTime", outputMode="Append")
        self.now = 0

    def at(self, ms: int) -> list[tuple]:
        """Move the clock to ``ms``; return what the timers that fired emitted."""
        if ms <= self.now:
            raise ValueError(f"a check's clock must move forward, not from {self.now} to {ms}")
        self.now = ms
        return self._rows(lambda: self.tester.setProcessingTime(ms), "handleExpiredTimer")

    def batch(self, key, rows: list) -> list[tuple]:
        """One micro-batch at the current time: ``rows`` for grouping key ``key``."""
        return self._rows(lambda: self.tester.test(key, rows), "handleInputRows")

    def _rows(self, call, method: str) -> list[tuple]:
        with handler_must_yield(f"{self.name}.{method}"):
            out = call()
        return status_tuples(out, self.name, method)

    def has_state(self, key) -> bool:
        handle = self.tester.handle
        return (
            any(s.state.get(key) is not None for s in handle.value_states.values())
            or any(s.state.get(key) for s in handle.list_states.values())
            or any(s.state.get(key) for s in handle.map_states.values())
        )

    def timers(self, key) -> list[int]:
        return pending_timers(self.tester, key)
