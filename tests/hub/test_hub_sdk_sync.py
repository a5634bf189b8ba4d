"""The synchronous azure-eventhub SDK against the emulator: sending, routing, receiving.

The SDK spends about a second opening a consumer and another closing it (mostly
sleeps), so tests that need several consumers run them concurrently.
"""

from __future__ import annotations

import collections
import datetime
import json
import os
import subprocess
import sys

from azure.eventhub import EventData
from eventhub_clients import (
    Receiver,
    producer,
    receive,
    receive_concurrently,
    send,
    wait_for,
)

from streamlab.hub import partition_for_key


def test_batch_events_arrive_unchanged_with_broker_annotations(conn_str):
    sent_at = datetime.datetime.now(datetime.UTC)
    with producer(conn_str) as client:
        batch = client.create_batch(partition_id="2")
        for i in range(5):
            event = EventData(json.dumps({"machine_name": "m", "n": i}))
            event.properties = {"n": i, "kind": "beat", "ratio": 0.5, "ok": True}
            event.content_type = "application/json"
            event.correlation_id = f"corr-{i}"
            event.message_id = f"msg-{i}"
            batch.add(event)
        client.send_batch(batch)
        # Larger than a frame either way: the client splits it to our max frame size,
        # and the emulator splits it to the client's when delivering.
        big = "B" * 1_040_000
        client.send_event(EventData(big), partition_id="2")
    events = receive(conn_str, 6, partition_id="2", starting_position="-1")
    assert events.pop().body_as_str() == big
    assert [e.sequence_number for e in events] == [0, 1, 2, 3, 4]
    offsets = [int(e.offset) for e in events]
    assert offsets == sorted(set(offsets)) and offsets[0] == 0
    for i, event in enumerate(events):
        assert json.loads(event.body_as_str()) == {"machine_name": "m", "n": i}
        assert event.properties == {b"n": i, b"kind": b"beat", b"ratio": 0.5, b"ok": True}
        assert event.content_type == "application/json"
        assert event.correlation_id == f"corr-{i}"
        assert event.message_id == f"msg-{i}"
        assert event.partition_key is None
        assert abs((event.enqueued_time - sent_at).total_seconds()) < 60


def test_routing_by_partition_id_by_key_and_round_robin(conn_str):
    key = "Producer 7"
    keyed_partition = str(partition_for_key(key, 4))
    with producer(conn_str) as client:
        for i in range(3):  # single events with a key
            client.send_event(EventData(f"keyed {i}"), partition_key=key)
        batch = client.create_batch(partition_key=key)
        batch.add(EventData("keyed batch"))
        client.send_batch(batch)
        for i in range(8):  # no key and no partition: round robin
            client.send_event(EventData(f"rr {i}"))
        client.send_event(EventData("to partition 1"), partition_id="1")
    with Receiver(conn_str, starting_position="-1") as receiver:
        receiver.wait_count(13)
        placed = dict(
            zip([e.body_as_str() for e in receiver.events], receiver.partitions, strict=True)
        )
        keys = {e.body_as_str(): e.partition_key for e in receiver.events}
    assert {placed[f"keyed {i}"] for i in range(3)} | {placed["keyed batch"]} == {keyed_partition}
    assert all(keys[b] == key.encode() for b in ("keyed 0", "keyed 1", "keyed 2", "keyed batch"))
    assert placed["to partition 1"] == "1"
    assert sorted(collections.Counter(placed[f"rr {i}"] for i in range(8)).values()) == [2] * 4


def test_partition_key_hash_is_stable_across_processes():
    """Python's hash() is salted per process; the routing hash must not be."""
    code = (
        "from streamlab.hub import partition_for_key;"
        "print([partition_for_key(f'machine-{i}', 4) for i in range(50)])"
    )
    outputs = set()
    for seed in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=seed)
        outputs.add(
            subprocess.run(
                [sys.executable, "-c", code], env=env, check=True, capture_output=True, text=True
            ).stdout
        )
    assert outputs == {str([partition_for_key(f"machine-{i}", 4) for i in range(50)]) + "\n"}


def test_ten_thousand_events_hundred_keys_exactly_once_in_order(conn_str):
    keys = [f"machine-{k:03d}" for k in range(100)]
    with producer(conn_str) as client:
        for round_ in range(2):  # keys interleave: 2 rounds of 50 events per key
            for key in keys:
                batch = client.create_batch(partition_key=key)
                for i in range(50):
                    batch.add(EventData(f"{key}|{round_ * 50 + i}"))
                client.send_batch(batch)
    with Receiver(conn_str, starting_position="-1", prefetch=1000) as receiver:
        events = receiver.wait_count(10_000, timeout=60)
        partitions = list(receiver.partitions)
    assert len(events) == 10_000
    assert len({e.body_as_str() for e in events}) == 10_000  # nothing received twice
    by_partition: dict[str, list] = collections.defaultdict(list)
    per_key: dict[str, list[int]] = collections.defaultdict(list)
    for event, partition in zip(events, partitions, strict=True):
        key, n = event.body_as_str().split("|")
        assert partition == str(partition_for_key(key, 4))  # a key has one partition
        assert event.partition_key == key.encode()
        by_partition[partition].append(event.sequence_number)
        per_key[key].append(int(n))
    assert sorted(by_partition) == ["0", "1", "2", "3"]
    for partition, seqs in by_partition.items():
        assert seqs == list(range(len(seqs))), f"partition {partition} out of order"
    assert all(per_key[k] == list(range(100)) for k in keys)  # per-key order kept


def test_small_prefetch_and_second_consumer_group(conn_str):
    send(conn_str, [f"p{i}" for i in range(40)], partition_id="3")
    one_credit, other_group = receive_concurrently(
        conn_str,
        [
            (40, {"partition_id": "3", "starting_position": "-1", "prefetch": 1}),
            (40, {"partition_id": "3", "starting_position": "-1", "consumer_group": "analytics"}),
        ],
    )
    expected = [f"p{i}" for i in range(40)]
    assert [e.body_as_str() for e in one_credit] == expected
    assert [e.body_as_str() for e in other_group] == expected


def test_every_starting_position_kind(conn_str):
    """-1, sequence number and offset (exclusive and inclusive), enqueued time."""
    with producer(conn_str) as client:
        client.send_batch([EventData(f"first {i}") for i in range(5)], partition_id="0")
        first = client.get_partition_properties("0")  # describes event 4, the last sent
        # The second batch must get a later millisecond: poll the clock, no fixed sleep.
        wait_for(
            lambda: (
                datetime.datetime.now(datetime.UTC)
                > first["last_enqueued_time_utc"] + datetime.timedelta(milliseconds=2)
            ),
            what="the clock to move",
        )
        client.send_batch([EventData(f"second {i}") for i in range(5)], partition_id="0")
    offset_4, time_4 = first["last_enqueued_offset"], first["last_enqueued_time_utc"]
    cases = [  # (starting position, inclusive, first expected sequence number)
        ("-1", False, 0),
        (3, False, 4),
        (3, True, 3),
        (offset_4, False, 5),
        (offset_4, True, 4),
        (time_4, False, 5),
        (time_4, True, 0),  # the first batch shares one timestamp
    ]
    results = receive_concurrently(
        conn_str,
        [
            (
                10 - first_seq,
                {
                    "partition_id": "0",
                    "starting_position": position,
                    "starting_position_inclusive": inclusive,
                },
            )
            for position, inclusive, first_seq in cases
        ],
    )
    bodies = [f"first {i}" for i in range(5)] + [f"second {i}" for i in range(5)]
    assert results[0][4].offset == offset_4
    for (position, inclusive, first_seq), got in zip(cases, results, strict=True):
        case = f"starting_position={position!r} inclusive={inclusive}"
        assert [e.sequence_number for e in got] == list(range(first_seq, 10)), case
        assert [e.body_as_str() for e in got] == bodies[first_seq:], case


def test_starting_position_latest_sees_only_new_events(conn_str):
    send(conn_str, ["old"] * 5, partition_id="0")
    with Receiver(conn_str, partition_id="0", starting_position="@latest", prefetch=10) as receiver:
        with producer(conn_str) as client:
            # Keep sending probes until the receiver is attached and gets one.
            def probe() -> bool:
                client.send_event(EventData("probe"), partition_id="0")
                return bool(receiver.events)

            wait_for(probe, interval=0.1, what="the @latest receiver to get a probe")
        got = [e.body_as_str() for e in receiver.events]
        first_seq = receiver.events[0].sequence_number
    assert set(got) == {"probe"} and first_seq >= 5


def test_enqueued_time_in_the_future_skips_earlier_events(conn_str):
    send(conn_str, ["old"], partition_id="1")
    future = datetime.datetime.now(datetime.UTC) + datetime.timedelta(milliseconds=300)
    with Receiver(conn_str, partition_id="1", starting_position=future, prefetch=10) as receiver:
        with producer(conn_str) as client:

            def later() -> bool:
                client.send_event(EventData("new"), partition_id="1")
                return bool(receiver.events)

            wait_for(later, interval=0.1, what="an event after the requested time")
        first = receiver.events[0]
    assert first.enqueued_time > future and first.body_as_str() == "new"
