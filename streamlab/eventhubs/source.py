"""``spark.readStream.format("eventhubs")``: Azure Event Hubs as a Python streaming source.

Offsets are per-partition sequence numbers, ``{"0": 42, "1": 17}``: the next event each
partition will give. Spark writes them to the checkpoint before a batch runs, so a
restarted query reads exactly the events after its last committed batch.

Where the events are received is the option ``receiveOn``:

- ``driver`` (the default): the driver keeps one receiver per partition open between
  micro-batches (:mod:`streamlab.eventhubs.receivers`) and ships each batch's events to the
  tasks inside its input partitions: no connection per batch, and a batch is planned from what
  has arrived. Every event passes through the driver. It is the default because on one
  machine a connection per task per batch costs more than shipping the events saves.
- ``executors``: the driver asks the hub for every partition's end (one round of management
  calls per trigger) and plans each input partition as one hub partition's range of sequence
  numbers; the task reads it with its Python worker's receiver for that partition, opened at
  the range's first event unless the worker already has one positioned there (it keeps its
  receivers between tasks: see ``receivers.read_range``). Events never pass through the
  driver: on a cluster the ingest rate grows with the executors, at the price of those
  management calls every batch.

Either way the ranges are in the checkpoint's offsets, so a restart reads the same events.
With ``receiveOn=driver``, a batch of at most ``eventsPerTask`` events (10,000 unless set; 0
turns it off) is read by one task instead of a task per hub partition.

What a batch planned says about the hub, so that a consumer may trust "no rows" as "nothing
to read" (the reference heartbeat monitor does):

- With ``receiveOn=driver``, a connected receiver's buffer is fresh: the hub pushes events
  within milliseconds. When a receiver has just been (re)started (the query's start, a
  restart, a replay), its buffer says nothing yet, so the source asks the hub for every
  partition's real end (one management call) and plans up to it; the reads then wait for
  those events. With ``receiveOn=executors`` every batch is planned up to the ends the hub
  gave when it was planned.
- ``maxEventsPerTrigger`` never starves a partition: every partition with events to read gets
  at least one in every batch, even if that takes the batch a few events over the limit.
- ``trigger(availableNow=True)`` reads up to the ends the hub gave when the query started; each
  batch still learns what arrived since (as above), and its ``latestOffset`` and its rows'
  ``lastEnqueuedSequenceNumber`` say so: a silence after the start is not taken for news.
- Every progress report carries, next to the batch's ``endOffset``, the source's
  ``latestOffset``: per partition, one past the newest event the source knew of when it planned
  the batch (the ends above; nothing is asked of the hub for it). ``latestOffset`` minus
  ``endOffset`` is what a partition holds beyond the batch (:func:`streamlab.progress.backlog`).
  With ``receiveOn=driver`` that is what the receivers have received: it trails the hub only
  while receiving itself falls behind, which the hub's ends at a (re)start make up for.
- With ``.option("systemProperties", "true")`` each row also carries a ``systemProperties``
  map (as the classic connector's column): ``lastEnqueuedSequenceNumber`` is the newest
  sequence number the source knew the partition to hold when it planned the batch. A batch
  replayed after a restart knows the hub's end at the replay, which can only be later: its
  ranges may look cut short that were not, never the reverse.

Events the hub no longer holds. A hub keeps events for a while (its retention); a query down,
or behind, for longer finds that the position its checkpoint holds for a partition is older
than the partition's oldest event (the hub's ``begin_sequence_number``, asked whenever the
ends above are; or the first event a receiver delivers, which the hub starts at its oldest).
With ``failOnDataLoss`` true, the default (as Spark's Kafka source), the batch fails with a
sentence naming the event hub, the partition and the range that is gone, before anything is
planned past it. With ``failOnDataLoss=false`` the source reads on from the oldest event kept,
logs a warning, and records the range in the end offset of the batch that skips it, next to
the partition's position: ``{"2": 2600, "lostFrom.2": 101, "lostTo.2": 2450}``. That offset
is in the query's progress (``sources[0].endOffset``) and in the checkpoint's ``offsets/N``,
so the gap stays on record with the batch that skipped it, and a replay of that batch reads
the same events again. (A Python data source has no custom metrics in PySpark 4.3; its
offsets and its ``latestOffset`` are what the progress shows of it.)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from streamlab.eventhubs.options import EventHubsOptions, data_loss, lost_events, unavailable
from streamlab.eventhubs.receivers import Receivers, Row, read_range

_LOG = logging.getLogger("streamlab.eventhubs")

#: The key of ``systemProperties`` that says how far the partition went when the batch was planned.
LAST_ENQUEUED = "lastEnqueuedSequenceNumber"

#: Keys of an end offset, followed by a partition id: the first and last event of the
#: partition that the batch skipped because the hub no longer held them (failOnDataLoss=false).
LOST_FROM, LOST_TO = "lostFrom.", "lostTo."


def positions(offset: dict) -> dict[str, int]:
    """The per-partition sequence numbers of an offset, without its record of lost events."""
    return {
        str(p): int(s) for p, s in offset.items() if not str(p).startswith((LOST_FROM, LOST_TO))
    }


def skipped(offset: dict) -> dict[str, tuple[int, int]]:
    """Per partition, the (first, last) events an end offset records as skipped."""
    found = {}
    for key, first in offset.items():
        partition_id = str(key)[len(LOST_FROM) :]
        if str(key).startswith(LOST_FROM) and LOST_TO + partition_id in offset:
            found[partition_id] = (int(first), int(offset[LOST_TO + partition_id]))
    return found


class EventsPartition(InputPartition):
    """The events of one event hub partition in one micro-batch."""

    def __init__(self, partition_id: str, rows: list[Row]) -> None:
        super().__init__(partition_id)
        self.partition_id = partition_id
        self.rows = rows


class RangePartition(InputPartition):
    """One event hub partition's range ``[first, last)`` of sequence numbers in one micro-batch.

    Carries no events: the task that reads it receives them (``receiveOn=executors``).
    ``skipped``: the (first, last) events the batch was planned without, gone from the hub.
    """

    def __init__(
        self,
        partition_id: str,
        first: int,
        last: int,
        system: dict | None,
        skipped: tuple[int, int] | None = None,
    ) -> None:
        super().__init__(partition_id)
        self.partition_id = partition_id
        self.first = first
        self.last = last
        self.system = system  # the systemProperties of every row, when asked for
        self.skipped = skipped


def _management(options: EventHubsOptions):
    from azure.eventhub import EventHubConsumerClient

    # Few retries: an unreachable hub should say so in seconds, not minutes.
    return EventHubConsumerClient.from_connection_string(
        consumer_group=options.consumer_group,
        retry_total=1,
        retry_backoff_factor=0.2,
        **options.client_kwargs,
    )


def partition_bounds(
    options: EventHubsOptions, partition_ids: list[str] | None = None
) -> dict[str, tuple[int, int]]:
    """For each partition (every one, or ``partition_ids``), (first sequence number kept, one
    past the last). Each management call of the SDK takes several of its 50 ms polls (about
    0.35 s here), so the calls run side by side, and naming the partitions saves a round."""

    def bounds(client, partition_id: str) -> tuple[int, int]:
        props = client.get_partition_properties(partition_id)
        last = int(props["last_enqueued_sequence_number"])
        first = last + 1 if props["is_empty"] else int(props["beginning_sequence_number"])
        return first, last + 1

    try:
        with _management(options) as client:
            ids = list(partition_ids) if partition_ids is not None else client.get_partition_ids()
            # Each management call is a connection of its own: ask for all partitions at once.
            with ThreadPoolExecutor(max_workers=min(8, len(ids) or 1)) as pool:
                return dict(zip(ids, pool.map(lambda p: bounds(client, p), ids)))
    except Exception as error:  # the SDK raises several types; all mean the same to a learner
        raise unavailable(options, "read", error) from None


def apply_limit(start: dict[str, int], latest: dict[str, int], max_rows: int) -> dict[str, int]:
    """Share ``max_rows`` fairly between partitions: no partition starves another.

    Every partition with events to read gets at least one, even past ``max_rows``: a partition
    left out of a batch would look as if it had nothing to read.
    """
    wanted = {p: latest[p] - start[p] for p in latest}
    granted = dict.fromkeys(latest, 0)
    active = sorted(p for p in wanted if wanted[p] > 0)
    budget = max(max_rows, len(active))
    while budget > 0 and active:
        share = max(1, budget // len(active))
        for partition_id in list(active):
            grant = min(share, wanted[partition_id] - granted[partition_id], budget)
            granted[partition_id] += grant
            budget -= grant
            if granted[partition_id] == wanted[partition_id]:
                active.remove(partition_id)
            if budget == 0:
                break
    return {p: start[p] + granted[p] for p in latest}


def _merged(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Ranges of sequence numbers (first, last), sorted, overlapping or touching ones joined."""
    merged: list[tuple[int, int]] = []
    for first, last in sorted(spans):
        if merged and first <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], last))
        else:
            merged.append((first, last))
    return merged


def _one_task_if_small(
    partitions: list[EventsPartition | RangePartition], events_per_task: int
) -> list[EventsPartition | RangePartition]:
    """The events of a small batch in one input partition, so one task reads them all.

    Every input partition is a task, and every task a round trip to a Python worker; a batch
    of a few hundred heartbeats split over a task per hub partition pays that several times
    for nothing. Rows keep their ``partition`` column, so nothing downstream can tell.
    """
    events = [p for p in partitions if isinstance(p, EventsPartition)]
    if len(events) < 2 or len(events) != len(partitions):
        return partitions
    if sum(len(p.rows) for p in events) > events_per_task:
        return partitions
    return [
        EventsPartition(
            ",".join(p.partition_id for p in events), [row for p in events for row in p.rows]
        )
    ]


class EventHubsStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Reads one event hub. Cheap to construct: Spark builds and pickles throwaway copies."""

    def __init__(self, options: EventHubsOptions) -> None:
        self.options = options
        self._receivers: Receivers | None = None
        self._target: dict[str, int] | None = None
        self._initial: dict[str, int] | None = None
        # Per partition, one past the newest event known to exist when a batch was planned.
        self._known_end: dict[str, int] = {}

    def __getstate__(self) -> dict:
        # Tasks receive this object to call read(); the receivers stay on the driver.
        return {
            "options": self.options,
            "_receivers": None,
            "_target": None,
            "_initial": None,
            "_known_end": {},
        }

    @property
    def receivers(self) -> Receivers:
        if self._receivers is None:
            self._receivers = Receivers(self.options)
        return self._receivers

    def initialOffset(self) -> dict:
        if self._initial is None:  # Spark may ask more than once; the answer must not move
            bounds = partition_bounds(self.options)
            explicit = self.options.starting_sequence_numbers()
            if explicit is not None:
                self._initial = {p: explicit.get(p, first) for p, (first, _) in bounds.items()}
            elif self.options.starting_position == "earliest":
                self._initial = {p: first for p, (first, _) in bounds.items()}
            else:
                self._initial = {p: end for p, (_, end) in bounds.items()}
        return dict(self._initial)

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_events_per_trigger:
            return ReadMaxRows(self.options.max_events_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        # availableNow must read exactly what exists now: ask the hub once, then wait for it.
        self._target = {p: end for p, (_, end) in partition_bounds(self.options).items()}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        given, start = start, positions(start)
        bounds: dict[str, tuple[int, int]] = {}
        if not self._on_executors and self.receivers.ensure(start):
            # A receiver that has just started has delivered nothing yet: ask the hub.
            bounds = partition_bounds(self.options)
            self.receivers.promise({p: end for p, (_, end) in bounds.items() if p in start})
        if self._on_executors:
            # The hub's ends now: every event planned exists, and "no rows" means none to read.
            bounds = partition_bounds(self.options, list(start))
            ends = {p: end for p, (_, end) in bounds.items()}
        else:
            ends = {p: self.receivers.available(p) for p in start}
        gaps = self._gaps(start, bounds)
        if gaps and self.options.fail_on_data_loss:
            raise data_loss(self.options, {p: spans[0] for p, spans in gaps.items()})
        for p, spans in gaps.items():
            first, last = spans[0]
            if first == start[p]:  # read on from the oldest event kept: the limit counts events
                start[p] = last + 1
        if self._target is not None:
            latest = {p: max(start.get(p, 0), end) for p, end in self._target.items()}
            for p in start:
                latest.setdefault(p, start[p])
        else:
            latest = {p: max(s, ends.get(p, s)) for p, s in start.items()}
        # availableNow reads to where the trigger started, but what arrived since is known: a
        # row must not claim that its partition ends at the target.
        self._known_end.update({p: max(end, ends.get(p, end)) for p, end in latest.items()})
        if isinstance(limit, ReadMaxRows):
            latest = apply_limit({p: start.get(p, 0) for p in latest}, latest, limit.max_rows)
        record = self._record_skipped(gaps, latest)
        if not record and latest == start == positions(given):
            # Nothing new. Spark compares offsets as text: the previous batch's record of
            # skipped events, still in ``given``, must not look like news.
            return given
        return {**latest, **record}

    def _gaps(
        self, start: dict[str, int], bounds: dict[str, tuple[int, int]]
    ) -> dict[str, list[tuple[int, int]]]:
        """Per partition, the (first, last) events from ``start`` on that the hub no longer
        holds, in order: before its oldest event, or skipped by a receiver (see the module)."""
        found = {}
        for p, s in start.items():
            spans = []
            if p in bounds and s < bounds[p][0]:
                spans.append((s, bounds[p][0] - 1))
            if not self._on_executors:
                spans += self.receivers.gaps_from(p, s)
            if spans:
                found[p] = _merged(spans)
        return found

    def _record_skipped(
        self, gaps: dict[str, list[tuple[int, int]]], latest: dict[str, int]
    ) -> dict[str, int]:
        """The end offset's record of the events the batch skips (``latest`` is moved past
        them): at most one range per partition and batch; a later gap waits for a later batch."""
        record: dict[str, int] = {}
        for p, spans in gaps.items():
            first, last = spans[0]
            if first >= latest[p]:
                continue  # a gap beyond this batch's range
            latest[p] = max(latest[p], last + 1)
            if len(spans) > 1:
                latest[p] = min(latest[p], spans[1][0])
            record[LOST_FROM + p], record[LOST_TO + p] = first, last
        if record:
            _LOG.warning(
                "failOnDataLoss=false: reading on past %s of event hub %r, which the hub's "
                "retention removed before this query read them; the batch's endOffset records "
                "them (%s)",
                lost_events({p: spans[0] for p, spans in gaps.items() if LOST_FROM + p in record}),
                self.options.eventhub,
                ", ".join(f"{key}: {value}" for key, value in record.items()),
            )
        return record

    @property
    def _on_executors(self) -> bool:
        return self.options.receive_on == "executors"

    def reportLatestOffset(self) -> dict | None:
        # Spark calls this right after latestOffset, every trigger, for the progress report's
        # latestOffset: the ends that call just worked out, before the read limit. No call to
        # the hub of its own: the backlog costs nothing.
        return dict(self._known_end) or None

    def partitions(self, start: dict, end: dict) -> list[EventsPartition | RangePartition]:
        start, lost, end = positions(start), skipped(end), positions(end)
        if self.options.system_properties and any(p not in self._known_end for p in end):
            # A batch replayed after a restart: its planning knowledge is gone; the hub's end
            # now is the best (latest) answer.
            self._known_end.update({p: e for p, (_, e) in partition_bounds(self.options).items()})
        result: list[EventsPartition | RangePartition] = []
        for partition_id in sorted(end, key=lambda p: (len(p), p)):
            first, last = start.get(partition_id, 0), end[partition_id]
            gone = lost.get(partition_id)
            if gone is not None and gone[0] <= first:
                first = max(first, gone[1] + 1)  # planned without them: read from after them
            if last > first:
                system = None
                if self.options.system_properties:
                    known = max(last, self._known_end.get(partition_id, last))
                    system = {LAST_ENQUEUED: str(known - 1)}
                if self._on_executors:
                    result.append(RangePartition(partition_id, first, last, system, gone))
                    continue
                rows = self.receivers.take(
                    partition_id, first, last, self.options.timeout_seconds, skipped=gone
                )
                if system is not None:
                    rows = [row + (system,) for row in rows]
                result.append(EventsPartition(partition_id, rows))
        return _one_task_if_small(result, self.options.events_per_task)

    def read(self, partition: InputPartition) -> Iterator[Row]:
        if isinstance(partition, EventsPartition):
            return iter(partition.rows)
        if not isinstance(partition, RangePartition):  # Spark hands back what partitions() made
            raise TypeError(f"not an eventhubs input partition: {partition!r}")
        rows = read_range(
            self.options,
            partition.partition_id,
            partition.first,
            partition.last,
            skipped=partition.skipped,
        )
        if partition.system is None:
            return rows
        return (row + (partition.system,) for row in rows)

    def commit(self, end: dict) -> None:
        if self._receivers is not None:  # with receiveOn=executors there is nothing to trim
            self._receivers.discard_before(positions(end))

    def stop(self) -> None:
        if self._receivers is not None:
            self._receivers.close()
            self._receivers = None
