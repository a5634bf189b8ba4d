"""The ``transformWithState`` processor a warm grading child runs once before it grades.

It lives in a module of its own, importable by Spark's Python workers, and does a little of
what the checks' processors do: a value state, a timer, a row out.
"""

from __future__ import annotations

from collections.abc import Iterator

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle


class WarmUpProcessor(StatefulProcessor):
    """Counts each key's rows and emits the count; arms a timer it never needs."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.count = handle.getValueState("count", "n long")

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        seen = (self.count.get() or (0,))[0] + sum(1 for _ in rows)
        self.count.update((seen,))
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 3_600_000)
        yield Row(k=key[0], n=seen)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        return iter(())

    def close(self) -> None:
        pass
