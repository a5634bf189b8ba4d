"""Receivers a task keeps open in its Python worker, for the partition's next range.

With ``receiveOn=executors`` each task reads one partition's range of sequence numbers
(:meth:`KeptReceivers.read_range`). Spark reuses its Python workers, so the receiver is kept
open after the range, positioned just past it: the next batch's range of the partition usually
reads on without a new connection (opening one costs a link, its authorization and the first
delivery). A receiver that nobody reads from for :data:`KEEP_OPEN_S` seconds is closed by a
reaper thread. The worker's receivers are :data:`KEPT`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

from streamlab.eventhubs.buffer import Receivers, Row
from streamlab.eventhubs.options import EventHubsOptions

#: How long a task's receiver stays open in its Python worker with nobody reading from it.
KEEP_OPEN_S = 20.0

#: One event hub as a consumer group of it is read: connection string, event hub, group.
HubKey = tuple[str, str, str]


class KeptReceivers:
    """The receivers of every event hub a process's tasks read, and when each was last read.

    ``clock`` and ``factory`` (what builds a hub's :class:`Receivers`) are for tests.
    """

    def __init__(
        self,
        keep_open: float = KEEP_OPEN_S,
        *,
        clock: Callable[[], float] = time.monotonic,
        factory: Callable[[EventHubsOptions], Receivers] = Receivers,
    ) -> None:
        self.keep_open, self._clock, self._factory = keep_open, clock, factory
        self._lock = threading.Lock()
        self._by_hub: dict[HubKey, Receivers] = {}
        self._last_read: dict[tuple[HubKey, str], float] = {}
        self._reaper: threading.Thread | None = None

    def read_range(
        self,
        options: EventHubsOptions,
        partition_id: str,
        first: int,
        last: int,
        *,
        skipped: tuple[int, int] | None = None,
    ) -> Iterator[Row]:
        """The events ``first <= sequence number < last`` of one partition, read in a task.

        A range the partition's receiver does not cover (a replay after a restart, a range
        read elsewhere in between) restarts it at ``first``; a failed read closes it. Events
        of the range the hub no longer holds are reported, but ``skipped`` (see
        :meth:`Receivers.take`).
        """
        key = (options.connection_string, options.eventhub, options.consumer_group)
        receivers = self._being_read(key, options, partition_id)
        try:
            receivers.reuse_or_restart(partition_id, first)
            yield from receivers.drain(
                partition_id, last, options.timeout_seconds, start=first, skipped=skipped
            )
        except BaseException:
            receivers.close_partition(partition_id)
            raise
        finally:
            with self._lock:
                self._last_read[(key, partition_id)] = self._clock()

    def partitions(self) -> set[str]:
        """The partitions a receiver is kept open for."""
        with self._lock:
            kept = list(self._by_hub.values())
        return {p for receivers in kept for p in receivers.open_partitions()}

    def close_idle(self, idle_for: float | None = None) -> None:
        """Close every kept receiver nobody has read from for ``idle_for`` seconds (default:
        ``keep_open``).

        A receiver being read is never idle (its read took it out of the table), and the
        closing holds the table's lock, so a read that starts meanwhile waits and then finds
        it closed.
        """
        idle_for = self.keep_open if idle_for is None else idle_for
        now = self._clock()
        with self._lock:
            idle = [entry for entry, at in self._last_read.items() if now - at >= idle_for]
            for key, partition in idle:
                del self._last_read[(key, partition)]
                if key in self._by_hub:
                    self._by_hub[key].close_partition(partition)

    def close_all(self) -> None:
        """Close every kept receiver."""
        with self._lock:
            kept = list(self._by_hub.values())
            self._by_hub.clear()
            self._last_read.clear()
        for receivers in kept:
            receivers.close()

    def _being_read(self, key: HubKey, options: EventHubsOptions, partition_id: str) -> Receivers:
        """The receivers of the hub ``key``, with ``partition_id`` marked as being read."""
        with self._lock:
            self._last_read.pop((key, partition_id), None)  # not idle until the read ends
            receivers = self._by_hub.get(key)
            if receivers is None:
                receivers = self._by_hub[key] = self._factory(options)
            if self._reaper is None:
                self._reaper = threading.Thread(
                    target=self._reap, name="eventhubs-kept-receivers", daemon=True
                )
                self._reaper.start()
            return receivers

    def _reap(self) -> None:
        while True:
            time.sleep(self.keep_open / 4)
            self.close_idle()


#: This process's kept receivers.
KEPT = KeptReceivers()
read_range = KEPT.read_range
kept_partitions = KEPT.partitions
close_idle_receivers = KEPT.close_idle
close_kept_receivers = KEPT.close_all
