"""How the ``eventhubs`` source spreads a batch over tasks.

``receiveOn=driver``: a small batch is one task (each task is a round trip to a Python worker),
a large one a task per hub partition.

``receiveOn=executors``: a task's receiver outlives its range in the Python worker. Spark reuses Python workers between tasks, so the receiver a task opened for its range of a
partition stays open, positioned just past that range; the next batch's range of the same
partition, when it lands on the same worker, reads on without a new connection. A range the
kept receiver does not cover (a replay after a restart) starts a new one. A receiver nobody
reads from is closed after a while, so a worker does not buffer a partition it no longer serves.
"""

from __future__ import annotations

import pickle

import pytest
from eventhub_clients import send

import streamlab.hub.connection
from streamlab.eventhubs import EventHubsOptionError
from streamlab.eventhubs import receivers as receivers_module
from streamlab.eventhubs.options import parse_options
from streamlab.eventhubs.source import (
    LAST_ENQUEUED,
    EventHubsStreamReader,
    EventsPartition,
    RangePartition,
)


@pytest.fixture
def partition_links(monkeypatch) -> list[str]:
    """The address of every receiver link that attaches to a hub partition, in order."""
    seen: list[str] = []
    attach = streamlab.hub.connection.attach

    def watched(conn, session, perf) -> None:
        source = perf.get(5)
        address = str(source.value[0]) if hasattr(source, "value") else ""
        if perf.get(2, False) and "/Partitions/" in address:
            seen.append(address.rsplit("/", 1)[-1])
        attach(conn, session, perf)

    monkeypatch.setattr(streamlab.hub.connection, "attach", watched)
    return seen


@pytest.fixture
def task(hub):
    """A task's copy of an executors-mode reader, as Spark pickles it; kept receivers closed after."""
    options = parse_options(
        {
            "connectionString": hub.connection_string,
            "eventHubName": "heartbeats",
            "receiveOn": "executors",
            "timeoutSeconds": "5",
        }
    )
    yield pickle.loads(pickle.dumps(EventHubsStreamReader(options)))
    receivers_module.close_kept_receivers()


def _read(task, first: int, last: int) -> list[tuple[str, int, bytes]]:
    partition = pickle.loads(pickle.dumps(RangePartition("0", first, last, None)))
    return [(r[1], r[3], r[0]) for r in task.read(partition)]


def _events(first: int, last: int) -> list[tuple[str, int, bytes]]:
    return [("0", i, f"e{i}".encode()) for i in range(first, last)]


def test_the_next_range_of_a_partition_reads_on_with_the_same_receiver(hub, task, partition_links):
    send(hub.connection_string, [f"e{i}" for i in range(5)], partition_id="0")
    assert _read(task, 0, 3) == _events(0, 3)
    send(hub.connection_string, [f"e{i}" for i in range(5, 12)], partition_id="0")
    assert _read(task, 3, 8) == _events(3, 8)
    assert _read(task, 8, 12) == _events(8, 12)
    assert partition_links == ["0"]  # one connection for three batches


def test_a_range_the_kept_receiver_does_not_cover_starts_a_new_one(hub, task, partition_links):
    send(hub.connection_string, [f"e{i}" for i in range(10)], partition_id="0")
    assert _read(task, 0, 6) == _events(0, 6)
    assert _read(task, 2, 6) == _events(2, 6)  # a batch replayed after a restart
    assert _read(task, 6, 10) == _events(6, 10)
    assert partition_links == ["0", "0"]


def test_a_receiver_nobody_reads_from_is_closed(hub, task, partition_links):
    send(hub.connection_string, [f"e{i}" for i in range(6)], partition_id="0")
    assert _read(task, 0, 3) == _events(0, 3)
    assert receivers_module.kept_partitions() == {"0"}
    receivers_module.close_idle_receivers(idle_for=0.0)
    assert receivers_module.kept_partitions() == set()
    assert _read(task, 3, 6) == _events(3, 6)
    assert partition_links == ["0", "0"]


def test_a_receiver_being_read_is_not_idle(hub, task, partition_links):
    send(hub.connection_string, [f"e{i}" for i in range(5)], partition_id="0")
    assert _read(task, 0, 3) == _events(0, 3)
    reading = task.read(pickle.loads(pickle.dumps(RangePartition("0", 3, 6, None))))
    first = next(reading)  # a read has begun long after the last one ended, its end to come
    receivers_module.close_idle_receivers(idle_for=0.0)
    send(hub.connection_string, ["e5"], partition_id="0")
    assert [(r[1], r[3], r[0]) for r in [first, *reading]] == _events(3, 6)
    assert partition_links == ["0"]


def test_a_failed_range_closes_its_receiver(hub, task):
    send(hub.connection_string, [f"e{i}" for i in range(4)], partition_id="0")
    with pytest.raises(receivers_module.ReceiveTimeout, match="needs up to 5"):
        _read(task, 0, 6)
    assert receivers_module.kept_partitions() == set()


def _driver_reader(hub, **options) -> EventHubsStreamReader:
    return EventHubsStreamReader(
        parse_options(
            {
                "connectionString": hub.connection_string,
                "eventHubName": "heartbeats",
                "timeoutSeconds": "10",
                **options,
            }
        )
    )


@pytest.mark.parametrize(
    "options, tasks",
    [
        ({}, [["0", "0", "0", "1", "1", "2"]]),  # 6 events: one task
        ({"eventsPerTask": "6"}, [["0", "0", "0", "1", "1", "2"]]),
        (
            {"eventsPerTask": "5"},
            [["0", "0", "0"], ["1", "1"], ["2"]],
        ),  # more: a task per partition
        ({"eventsPerTask": "0"}, [["0", "0", "0"], ["1", "1"], ["2"]]),
    ],
)
def test_on_the_driver_a_small_batch_is_one_task(hub, options, tasks):
    for partition, count in (("0", 3), ("1", 2), ("2", 1)):
        send(
            hub.connection_string,
            [f"p{partition}-{i}" for i in range(count)],
            partition_id=partition,
        )
    reader = _driver_reader(hub, **options)
    try:
        start = {p: 0 for p in "0123"}
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {"0": 3, "1": 2, "2": 1, "3": 0}
        planned = reader.partitions(start, end)
        assert all(isinstance(p, EventsPartition) for p in planned)
        read = [list(reader.read(pickle.loads(pickle.dumps(p)))) for p in planned]
        assert [[row[1] for row in rows] for rows in read] == tasks
        assert sorted(row[0] for rows in read for row in rows) == sorted(
            f"p{p}-{i}".encode()
            for p, count in (("0", 3), ("1", 2), ("2", 1))
            for i in range(count)
        )
    finally:
        reader.stop()


def test_events_per_task_must_be_a_whole_number():
    with pytest.raises(
        EventHubsOptionError, match="eventsPerTask must be a whole number, 0 or more; got 'many'"
    ):
        parse_options(
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "eventsPerTask": "many"}
        )


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_available_now_reads_to_its_start_and_its_rows_know_what_came_after(hub, receive_on):
    # A row that claimed its partition ends where the trigger started would make a silence
    # after the start look like news: the catch-up processor would call a sending machine
    # Unhealthy.
    send(hub.connection_string, ["a0", "a1"], partition_id="0")
    reader = _driver_reader(hub, systemProperties="true", receiveOn=receive_on)
    try:
        reader.prepareForTriggerAvailableNow()
        send(hub.connection_string, ["b0", "b1", "b2"], partition_id="0")
        start = {p: 0 for p in "0123"}
        end = reader.latestOffset(start, reader.getDefaultReadLimit())
        assert end == {"0": 2, "1": 0, "2": 0, "3": 0}
        assert reader.reportLatestOffset()["0"] == 5
        rows = (
            [
                row
                for planned in reader.partitions(start, end)
                for row in pickle.loads(pickle.dumps(reader)).read(
                    pickle.loads(pickle.dumps(planned))
                )
            ]
            if receive_on == "executors"
            else [row for planned in reader.partitions(start, end) for row in reader.read(planned)]
        )
        assert [row[0] for row in rows] == [b"a0", b"a1"]
        assert [row[-1][LAST_ENQUEUED] for row in rows] == ["4", "4"]
    finally:
        reader.stop()
