"""Management calls ($management READ) and errors for unknown event hubs and partitions."""

from __future__ import annotations

import datetime
import time

import pytest
from azure.eventhub import EventData, EventHubConsumerClient
from azure.eventhub.exceptions import EventHubError
from eventhub_clients import Receiver, producer, send, wait_for

from streamlab.hub import Hub


def test_eventhub_and_partition_properties(tmp_path):
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    with Hub(data_dir=tmp_path, eventhubs={"orders": 3, "status": 1}, port=0) as hub:
        with producer(hub.connection_string, "orders") as client:
            props = client.get_eventhub_properties()
            empty = client.get_partition_properties("1")
            batch = client.create_batch(partition_id="1")
            for i in range(3):
                batch.add(EventData(f"order {i}"))
            client.send_batch(batch)
            full = client.get_partition_properties("1")
        consumer = EventHubConsumerClient.from_connection_string(
            hub.connection_string_for("status"), consumer_group="$Default"
        )
        with consumer:  # EntityPath in the connection string names the hub
            status = consumer.get_eventhub_properties()
    assert props["eventhub_name"] == "orders"
    assert props["partition_ids"] == ["0", "1", "2"]
    assert before <= props["created_at"] <= datetime.datetime.now(datetime.UTC)
    assert empty["is_empty"] is True
    assert empty["last_enqueued_sequence_number"] == -1
    assert empty["beginning_sequence_number"] == 0
    assert full["eventhub_name"] == "orders" and full["id"] == "1"
    assert full["is_empty"] is False
    assert full["beginning_sequence_number"] == 0
    assert full["last_enqueued_sequence_number"] == 2
    assert int(full["last_enqueued_offset"]) > 0
    assert before <= full["last_enqueued_time_utc"]
    assert status["eventhub_name"] == "status" and status["partition_ids"] == ["0"]


def test_unknown_eventhub_raises_promptly(conn_str):
    with producer(conn_str, "no-such-hub", retry_total=0) as client:
        started = time.monotonic()
        with pytest.raises(EventHubError, match="could not be found"):
            client.get_eventhub_properties()
        with pytest.raises(EventHubError, match="could not be found"):
            client.send_event(EventData("lost"))
        assert time.monotonic() - started < 10


def test_unknown_partition_raises_promptly(conn_str):
    with producer(conn_str, retry_total=0) as client:
        started = time.monotonic()
        with pytest.raises(EventHubError, match="does not exist"):
            client.get_partition_properties("7")
        with pytest.raises(EventHubError):
            client.send_event(EventData("lost"), partition_id="7")
        client.send_event(EventData("fine"), partition_id="0")  # the client still works
        assert time.monotonic() - started < 10
    with Receiver(conn_str, partition_id="7", starting_position="-1") as receiver:
        started = time.monotonic()
        wait_for(lambda: receiver.errors, what="on_error for partition 7")
        assert time.monotonic() - started < 10
        assert "7" in str(receiver.errors[0])


def test_runtime_metrics_for_tracking_consumers(conn_str):
    """track_last_enqueued_event_properties: the emulator adds the delivery annotations."""
    send(conn_str, [f"m{i}" for i in range(3)], partition_id="0")
    with Receiver(
        conn_str,
        partition_id="0",
        starting_position="-1",
        track_last_enqueued_event_properties=True,
    ) as receiver:
        events = receiver.wait_count(3)
        info = receiver.last_enqueued["0"]
    assert info["sequence_number"] == 2
    assert info["offset"] == events[-1].offset
    assert info["enqueued_time"] == events[-1].enqueued_time
    assert info["retrieval_time"] >= events[-1].enqueued_time
