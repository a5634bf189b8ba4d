"""Long-lived receivers, one per partition, that buffer events between batches.

Each partition has one ``EventHubConsumerClient`` receiving in a background thread from a
given sequence number on. Micro-batches take contiguous ranges of sequence numbers out of
the buffer, so a steady stream pays for its connections once, not once per batch, and a
batch is planned from what has already arrived instead of a management call per partition.
The driver keeps one :class:`Receivers` per query; with ``receiveOn=executors`` a task's
Python worker keeps its own (:mod:`streamlab.eventhubs.kept`).

For measurement, the environment variable ``STREAMLAB_EVENTHUBS_RECEIVE_LOG`` names a file to
which every receiver appends ``partition sequence_number enqueued_time received_time`` (epoch
seconds) for each event it gets: how long an event took from the hub to the source; and
``STREAMLAB_EVENTHUBS_SOCKET_TIMEOUT`` overrides the receive loop's socket timeout
(:data:`SOCKET_TIMEOUT_S`).

A receiver asked for sequence number *n* that gets a later one first (or, later on, any jump
in the sequence) was told by the hub that the events in between are gone: the hub delivers
every event it holds, in order, so its retention removed them. The buffer records each such
gap. Reading a range that a gap falls into raises
:class:`~streamlab.eventhubs.options.EventHubsDataLoss`; with ``failOnDataLoss=false`` it logs
a warning and reads on. Events a batch was planned without (its end offset records them: see
:mod:`streamlab.eventhubs.source`) are no news and say nothing.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Iterator
from typing import Any

from streamlab import processes
from streamlab.eventhubs.options import EventHubsOptions, data_loss, endpoint, lost_events

_LOG = logging.getLogger("streamlab.eventhubs")

#: A range of sequence numbers, first and last included.
Span = tuple[int, int]

#: A row of the source: see ``options.SCHEMA``.
Row = tuple

#: How long the SDK's receive loop blocks on a quiet socket, in seconds. The loop hands its
#: events over only when a read times out (or the link's credit is used up), so every event
#: waits this long after the last one before it arrives: with the SDK's default, 0.2 s, that
#: was most of the time from the hub to a batch. An idle receiver wakes this often: about
#: 2 % of a core for four partitions at 0.01 s.
SOCKET_TIMEOUT_S = 0.01

#: The environment variable that overrides :data:`SOCKET_TIMEOUT_S` (to measure the difference).
SOCKET_TIMEOUT_ENV = "STREAMLAB_EVENTHUBS_SOCKET_TIMEOUT"

#: The environment variable naming the receive log (see the module's docstring).
RECEIVE_LOG = "STREAMLAB_EVENTHUBS_RECEIVE_LOG"


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, bytearray)) else str(value)


def event_row(partition_id: str, event: Any) -> Row:
    """One received ``EventData`` as a row of the source's schema."""
    body = (
        b"".join(bytes(part) for part in event.body)
        if not isinstance(event.body, bytes)
        else event.body
    )
    properties = {_text(k): _text(v) for k, v in (event.properties or {}).items()}
    return (
        body,
        partition_id,
        _text(event.offset),
        int(event.sequence_number),
        event.enqueued_time,
        None,
        _text(event.partition_key),
        properties,
    )


class ReceiveTimeout(RuntimeError):
    """Events that must exist did not arrive in time."""


class _Partition:
    """The buffer and receiver of one partition. Guarded by ``Receivers._lock``."""

    def __init__(self) -> None:
        self.rows: deque[Row] = deque()
        self.next_sequence = 0  # one past the last buffered event
        self.promised = 0  # one past the last event the hub said it holds (may be unreceived)
        self.verified = False  # promised was asked of the hub since the receiver (re)started
        self.generation = 0  # bumped on every restart; callbacks of older receivers are ignored
        self.client: Any = None
        self.thread: threading.Thread | None = None
        self.error: BaseException | None = None
        # Events the hub skipped when delivering: (first, last) of each gap, in order.
        self.gaps: list[Span] = []

    @property
    def first_sequence(self) -> int:
        return self.rows[0][3] if self.rows else self.next_sequence


class Receivers:
    """Buffers the events of every partition of one event hub for one query."""

    def __init__(self, options: EventHubsOptions) -> None:
        self._options = options
        self._lock = threading.Condition()
        self._partitions: dict[str, _Partition] = {}
        self._closed = False

    def ensure(self, start: dict[str, int]) -> list[str]:
        """Make sure every partition in ``start`` is receiving from its sequence number on.

        Returns the partitions whose receiver (re)started since the hub was last asked for
        their end: until it has caught up, such a buffer says nothing about what the hub holds.
        """
        with self._lock:
            for partition_id, sequence in start.items():
                state = self._partitions.get(partition_id)
                if state is None or not self._covers(state, sequence):
                    self._restart(partition_id, sequence)
            return [p for p in start if not self._partitions[p].verified]

    def promise(self, ends: dict[str, int]) -> None:
        """Record that the hub holds events up to ``ends`` (exclusive), received or not."""
        with self._lock:
            for partition_id, end in ends.items():
                state = self._partitions.get(partition_id)
                if state is not None:
                    state.promised = max(state.promised, end)
                    state.verified = True

    def available(self, partition_id: str) -> int:
        """One past the last event known to exist: buffered, or promised by the hub."""
        with self._lock:
            state = self._partitions[partition_id]
            return max(state.next_sequence, state.promised)

    def wait_until(self, target: dict[str, int], timeout: float) -> None:
        """Block until every partition has buffered events up to ``target`` (exclusive)."""

        def missing() -> dict[str, int]:
            return {p: s for p, s in target.items() if self._partitions[p].next_sequence < s}

        with self._lock:  # the receivers notify it with every event they buffer
            processes.wait_until(
                lambda: not missing(),
                timeout=timeout,
                sleep=self._lock.wait,
                expired=lambda: ReceiveTimeout(self._timeout_message(missing())),
            )

    def take(
        self,
        partition_id: str,
        start: int,
        end: int,
        timeout: float,
        *,
        skipped: Span | None = None,
    ) -> list[Row]:
        """The events with ``start <= sequence number < end``, receiving them if needed.

        ``skipped``: events the batch was planned to go without (gone from the hub when it was
        planned). Any other event of the range the hub no longer holds is reported (see the
        module's docstring).
        """
        with self._lock:
            state = self._partitions.get(partition_id)
            if state is None or not self._covers(state, start):
                # A batch replayed after a restart, or one planned elsewhere: read it again.
                self._restart(partition_id, start)
        self.wait_until({partition_id: end}, timeout)
        with self._lock:
            state = self._partitions[partition_id]
            self._report_gaps(partition_id, state, start, end, skipped)
            return [row for row in state.rows if start <= row[3] < end]

    def gaps_from(self, partition_id: str, start: int) -> list[Span]:
        """The events from ``start`` on that the partition's receiver found gone, in order."""
        with self._lock:
            state = self._partitions.get(partition_id)
            if state is None:
                return []
            return [(max(first, start), last) for first, last in state.gaps if last >= start]

    def drain(
        self,
        partition_id: str,
        end: int,
        timeout: float,
        *,
        start: int | None = None,
        skipped: Span | None = None,
    ) -> Iterator[Row]:
        """Yield and forget the partition's events before ``end`` as they arrive.

        Gives up with :class:`ReceiveTimeout` when ``timeout`` seconds pass without an event.
        With ``start``, events of ``[start, end)`` the hub no longer holds are reported before
        any event after them is yielded (``skipped`` as for :meth:`take`).
        """
        deadline = time.monotonic() + timeout
        while True:
            with self._lock:
                state = self._partitions[partition_id]
                if start is not None:
                    self._report_gaps(partition_id, state, start, end, skipped)
                    start = max(start, state.next_sequence)  # each gap reported once
                arrived = []
                while state.rows and state.rows[0][3] < end:
                    arrived.append(state.rows.popleft())
                done = state.next_sequence >= end
                if not arrived and not done:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise ReceiveTimeout(self._timeout_message({partition_id: end}))
                    self._lock.wait(min(left, 0.5))
                    continue
            # Yield outside the lock: the receiver thread keeps filling the buffer meanwhile.
            yield from arrived
            if done:
                return
            deadline = time.monotonic() + timeout

    def discard_before(self, committed: dict[str, int]) -> None:
        """Forget events that a committed batch has read."""
        with self._lock:
            for partition_id, sequence in committed.items():
                rows = self._partitions.get(partition_id)
                while rows is not None and rows.rows and rows.rows[0][3] < sequence:
                    rows.rows.popleft()
                if rows is not None:
                    rows.gaps = [gap for gap in rows.gaps if gap[1] >= sequence]

    def reuse_or_restart(self, partition_id: str, first: int) -> None:
        """Receive the partition from ``first`` on, reusing its open receiver when it can.

        The receiver is kept when it is alive and its buffer starts at or before ``first``
        with nothing missing up to it; what it buffered before ``first`` is dropped.
        """
        with self._lock:
            state = self._partitions.get(partition_id)
            if (
                state is None  # no receiver
                or state.error is not None  # a dead one
                or state.thread is None
                or not state.thread.is_alive()
                or not state.first_sequence <= first <= state.next_sequence
            ):
                self._restart(partition_id, first)
                return
            while state.rows and state.rows[0][3] < first:
                state.rows.popleft()

    def open_partitions(self) -> set[str]:
        """The partitions with a receiver running."""
        with self._lock:
            return {
                p
                for p, state in self._partitions.items()
                if state.thread is not None and state.thread.is_alive()
            }

    def close_partition(self, partition_id: str) -> None:
        """Stop the partition's receiver and forget its buffer."""
        with self._lock:
            state = self._partitions.get(partition_id)
            if state is None:
                return
            state.generation += 1  # its callbacks are ignored from now on
            state.rows.clear()
            state.next_sequence = state.promised = 0
        self._close_client(state)
        state.thread = None

    def close(self) -> None:
        with self._lock:
            self._closed = True
            states = list(self._partitions.values())
            for state in states:
                state.generation += 1
        for state in states:
            self._close_client(state)

    # -- internals --------------------------------------------------------------------------

    def _report_gaps(
        self, partition_id: str, state: _Partition, start: int, end: int, skipped: Span | None
    ) -> None:
        """Raise for events of ``[start, end)`` the hub skipped, or log them (see the module)."""
        missing = _missing(state.gaps, start, end, skipped)
        if missing is None:
            return
        if self._options.fail_on_data_loss:
            raise data_loss(self._options, {partition_id: missing})
        _LOG.warning(
            "failOnDataLoss=false: reading on past %s of event hub %r, which the hub's "
            "retention removed before this query read them",
            lost_events({partition_id: missing}),
            self._options.eventhub,
        )

    @staticmethod
    def _covers(state: _Partition, sequence: int) -> bool:
        """Whether the partition's receiver will deliver ``sequence`` without a restart."""
        return state.first_sequence <= sequence <= max(state.next_sequence, state.promised)

    def _timeout_message(self, missing: dict[str, int]) -> str:
        parts = []
        for partition_id, sequence in sorted(missing.items()):
            state = self._partitions[partition_id]
            error = f" (last error: {state.error})" if state.error else ""
            parts.append(
                f"partition {partition_id} has events up to {state.next_sequence - 1}, "
                f"needs up to {sequence - 1}{error}"
            )
        return (
            f"waited {self._options.timeout_seconds:g} s for event hub "
            f"{self._options.eventhub!r} at {endpoint(self._options.connection_string)}: "
            + "; ".join(parts)
            + ". Is the hub running?"
        )

    def _restart(self, partition_id: str, sequence: int) -> None:
        state = self._partitions.setdefault(partition_id, _Partition())
        state.generation += 1
        old_client = state.client
        state.rows.clear()
        state.next_sequence = sequence
        state.promised = sequence
        state.verified = False
        state.error = None
        state.gaps = []
        state.client = None
        if old_client is not None:
            threading.Thread(target=old_client.close, daemon=True).start()
        if self._closed:
            return
        state.thread = threading.Thread(
            target=self._receive,
            args=(partition_id, sequence, state.generation),
            name=f"eventhubs-{self._options.eventhub}-{partition_id}",
            daemon=True,
        )
        state.thread.start()

    @staticmethod
    def _close_client(state: _Partition) -> None:
        client, state.client = state.client, None
        if client is not None:
            client.close()
        if state.thread is not None and state.thread is not threading.current_thread():
            state.thread.join(10)

    def _receive(self, partition_id: str, sequence: int, generation: int) -> None:
        from azure.eventhub import EventHubConsumerClient

        client = EventHubConsumerClient.from_connection_string(
            consumer_group=self._options.consumer_group,
            socket_timeout=_socket_timeout(),
            **self._options.client_kwargs,
        )
        with self._lock:
            state = self._partitions[partition_id]
            if state.generation != generation:
                client.close()
                return
            state.client = client

        def on_batch(context, events) -> None:
            self._on_events(partition_id, generation, events)

        def on_error(context, error) -> None:
            with self._lock:
                if self._partitions[partition_id].generation == generation:
                    self._partitions[partition_id].error = error

        try:
            client.receive_batch(
                on_event_batch=on_batch,
                on_error=on_error,
                partition_id=partition_id,
                starting_position=sequence,
                starting_position_inclusive=True,
                max_batch_size=1000,
                max_wait_time=None,
                prefetch=2000,
            )
        except Exception as error:  # reported by wait_until's timeout message
            with self._lock:
                if self._partitions[partition_id].generation == generation:
                    self._partitions[partition_id].error = error

    def _on_events(self, partition_id: str, generation: int, events: list) -> None:
        received = time.time()
        with self._lock:
            state = self._partitions[partition_id]
            if state.generation != generation:
                return
            for event in events:
                if event.sequence_number > state.next_sequence:
                    # The hub delivers every event it holds in order: those in between are gone.
                    state.gaps.append((state.next_sequence, event.sequence_number - 1))
                if event.sequence_number >= state.next_sequence:
                    state.rows.append(event_row(partition_id, event))
                    state.next_sequence = event.sequence_number + 1
            self._lock.notify_all()
        log = os.environ.get(RECEIVE_LOG)
        if log:
            _log_receipts(log, partition_id, events, received)


def _missing(gaps: list[Span], start: int, end: int, skipped: Span | None) -> Span | None:
    """The span of the ``gaps`` in ``[start, end)`` that are not within ``skipped``, or None.

    The span runs to the last event of its last gap, past ``end`` if the gap does: every event
    from the first missing one that the hub no longer holds.
    """
    found = [(max(first, start), last) for first, last in gaps if last >= start and first < end]
    if skipped is not None:
        found = [(f, t) for f, t in found if not skipped[0] <= f <= t <= skipped[1]]
    if not found:
        return None
    return min(f for f, _ in found), max(t for _, t in found)


def _socket_timeout() -> float:
    return float(os.environ.get(SOCKET_TIMEOUT_ENV) or SOCKET_TIMEOUT_S)


def _log_receipts(path: str, partition_id: str, events: list, received: float) -> None:
    """Append one line per event to the receive log; one write, so lines never interleave."""
    lines = "".join(
        f"{partition_id} {event.sequence_number} "
        f"{event.enqueued_time.timestamp():.6f} {received:.6f}\n"
        for event in events
    )
    with open(path, "a") as log:
        log.write(lines)
