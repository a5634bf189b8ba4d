"""The asyncio SDK (azure.eventhub.aio) against the emulator, several clients at once."""

from __future__ import annotations

import asyncio
import collections

from azure.eventhub import EventData
from azure.eventhub.aio import EventHubConsumerClient, EventHubProducerClient
from eventhub_clients import DEADLINE

from streamlab.hub import partition_for_key


async def _produce(conn_str: str, name: str, count: int) -> None:
    """One producer: keyed batches, single keyed events, and events to a partition."""
    async with EventHubProducerClient.from_connection_string(
        conn_str, eventhub_name="heartbeats"
    ) as client:
        for start in range(0, count, 50):
            batch = await client.create_batch(partition_key=name)
            for i in range(start, start + 50):
                batch.add(EventData(f"{name}|{i}"))
            await client.send_batch(batch)
        await client.send_event(EventData(f"{name}|single"), partition_key=name)
        await client.send_batch([EventData(f"{name}|to-2")], partition_id="2")


async def _consume(conn_str: str, count: int, **kwargs) -> list[tuple[str, object]]:
    received: list[tuple[str, object]] = []
    done = asyncio.Event()

    async def on_batch(context, events) -> None:
        received.extend((context.partition_id, e) for e in events)
        if len(received) >= count:
            done.set()

    client = EventHubConsumerClient.from_connection_string(
        conn_str, consumer_group="$Default", eventhub_name="heartbeats"
    )
    task = asyncio.create_task(client.receive_batch(on_event_batch=on_batch, **kwargs))
    try:
        await asyncio.wait_for(done.wait(), DEADLINE)
    finally:
        await _stop(client, task)
    return received


async def _stop(client: EventHubConsumerClient, task: asyncio.Task) -> None:
    """Close the client and end its receive task.

    The async SDK's receive() only returns after its load-balancing sleep (30 s by
    default) even once closed, so the task is cancelled rather than awaited.
    """
    await client.close()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)


def test_concurrent_async_producers_and_consumer(conn_str):
    names = [f"producer-{n}" for n in range(4)]

    async def scenario() -> tuple[list, list]:
        # A consumer from "-1" starts while four producers send concurrently.
        consumer = asyncio.create_task(_consume(conn_str, 4 * 502, starting_position="-1"))
        await asyncio.gather(*(_produce(conn_str, name, 500) for name in names))
        async with EventHubProducerClient.from_connection_string(
            conn_str, eventhub_name="heartbeats"
        ) as client:
            partitions = [await client.get_partition_properties(p) for p in ("0", "1", "2", "3")]
        return await consumer, partitions

    received, partitions = asyncio.run(scenario())
    assert len(received) == 4 * 502
    assert sum(p["last_enqueued_sequence_number"] + 1 for p in partitions) == 4 * 502
    bodies = [e.body_as_str() for _, e in received]
    assert len(set(bodies)) == len(bodies)  # exactly once
    per_producer: dict[str, list[int]] = collections.defaultdict(list)
    per_partition: dict[str, list[int]] = collections.defaultdict(list)
    for partition, event in received:
        name, what = event.body_as_str().split("|")
        per_partition[partition].append(event.sequence_number)
        if what == "to-2":
            assert partition == "2"
        else:
            assert partition == str(partition_for_key(name, 4))
            assert event.partition_key == name.encode()
            if what != "single":
                per_producer[name].append(int(what))
    assert all(per_producer[n] == list(range(500)) for n in names)
    assert all(seqs == list(range(len(seqs))) for seqs in per_partition.values())


def test_async_consumer_from_sequence_number_and_properties(conn_str):
    async def scenario() -> tuple[dict, dict, list]:
        async with EventHubProducerClient.from_connection_string(
            conn_str, eventhub_name="status"
        ) as client:
            await client.send_batch([EventData(f"s{i}") for i in range(6)])
            hub_props = await client.get_eventhub_properties()
            part_props = await client.get_partition_properties("0")
        got = await _consume_status(conn_str)
        return hub_props, part_props, got

    hub_props, part_props, got = asyncio.run(scenario())
    assert hub_props["partition_ids"] == ["0"]
    assert part_props["last_enqueued_sequence_number"] == 5
    assert [e.body_as_str() for e in got] == ["s2", "s3", "s4", "s5"]


async def _consume_status(conn_str: str) -> list:
    received: list = []
    done = asyncio.Event()

    async def on_event(context, event) -> None:
        received.append(event)
        if len(received) == 4:
            done.set()

    client = EventHubConsumerClient.from_connection_string(
        conn_str, consumer_group="$Default", eventhub_name="status"
    )
    task = asyncio.create_task(
        client.receive(
            on_event=on_event,
            partition_id="0",
            starting_position=2,
            starting_position_inclusive=True,
        )
    )
    try:
        await asyncio.wait_for(done.wait(), DEADLINE)
    finally:
        await _stop(client, task)
    return received
