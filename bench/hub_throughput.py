"""Throughput of the local Event Hubs emulator with the real azure-eventhub SDK.

Starts ``streamlab-hub`` as a subprocess (as the course runs it), sends heartbeat-sized
events in batches with the sync producer, then receives them all with the sync consumer
(``receive_batch``), and reports events per second for both. Writes
``build/bench/hub_throughput.json``.

    python bench/hub_throughput.py [--events 20000] [--batch-size 100]
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

from streamlab.hub import partition_for_key, start_subprocess


def _balanced_machines(per_partition: int = 5, partitions: int = 4) -> list[str]:
    """Machine names whose keys spread evenly over the partitions.

    The sync consumer waits a socket timeout on every idle partition in each round, so
    uneven partitions would measure the SDK's idle waits rather than the emulator.
    """
    chosen: dict[int, list[str]] = {p: [] for p in range(partitions)}
    n = 0
    while any(len(v) < per_partition for v in chosen.values()):
        n += 1
        name = f"Producer {n}"
        slot = chosen[partition_for_key(name, partitions)]
        if len(slot) < per_partition:
            slot.append(name)
    return [name for group in zip(*chosen.values(), strict=True) for name in group]


MACHINES = _balanced_machines()


def _body(n: int, size: int) -> str:
    """A heartbeat like the course's producers send, padded to ``size`` bytes."""
    text = json.dumps(
        {
            "machine_name": MACHINES[n % len(MACHINES)],
            "machine_time": datetime.datetime.now().isoformat(),
            "n": n,
        }
    )
    return text + " " * max(0, size - len(text))


def send(conn_str: str, events: int, batch_size: int, body_bytes: int) -> float:
    """Send ``events`` in batches, one partition key (machine) per batch; return events/s."""
    with EventHubProducerClient.from_connection_string(
        conn_str, eventhub_name="heartbeats"
    ) as client:
        client.send_batch([EventData("warm-up")])  # connection set-up is not throughput
        started = time.perf_counter()
        for start in range(0, events, batch_size):
            key = MACHINES[(start // batch_size) % len(MACHINES)]
            batch = client.create_batch(partition_key=key)
            for n in range(start, min(start + batch_size, events)):
                batch.add(EventData(_body(n, body_bytes)))
            client.send_batch(batch)
        return events / (time.perf_counter() - started)


def receive(conn_str: str, events: int, timeout: float) -> float:
    """Receive every event from the start of all partitions; return events/s.

    The clock starts at the first delivered batch, so client start-up is excluded.
    """
    client = EventHubConsumerClient.from_connection_string(
        conn_str, consumer_group="$Default", eventhub_name="heartbeats"
    )
    count, first_at, done = 0, [0.0], threading.Event()

    def on_batch(_context, batch) -> None:
        nonlocal count
        if not first_at[0]:
            first_at[0] = time.perf_counter()
        count += len(batch)
        if count >= events:
            done.set()

    thread = threading.Thread(
        target=client.receive_batch,
        daemon=True,
        kwargs={
            "on_event_batch": on_batch,
            "starting_position": "-1",
            "max_batch_size": 300,
            "prefetch": 300,
        },
    )
    thread.start()
    try:
        if not done.wait(timeout):
            raise TimeoutError(f"received {count} of {events} events in {timeout} s")
        return count / (time.perf_counter() - first_at[0])
    finally:
        client.close()
        thread.join(30)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=20_000)
    parser.add_argument("--batch-size", type=int, default=100)
    parser.add_argument("--body-bytes", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    bench.quiet()

    with tempfile.TemporaryDirectory(prefix="hub-bench-") as data_dir:
        hub = start_subprocess(data_dir=data_dir)
        try:
            sent = send(hub.connection_string, args.events, args.batch_size, args.body_bytes)
            received = receive(hub.connection_string, args.events + 1, args.timeout)
        finally:
            hub.stop()

    print(f"  sent:     {sent:10,.0f} events/s (batches of {args.batch_size})")
    print(f"  received: {received:10,.0f} events/s")
    chart = bench.bar_chart(
        "hub_throughput",
        "The emulator with the azure-eventhub SDK",
        [(f"sent (sync, batches of {args.batch_size})", sent), ("received (sync)", received)],
        "events/s",
        note="emulator in its own process, durable log; 2 cores",
    )
    bench.write_result(
        "hub_throughput",
        "Event Hubs emulator throughput",
        {
            "events": args.events,
            "batch_size": args.batch_size,
            "body_bytes": args.body_bytes,
            "eventhub": "heartbeats:4",
            "partition_keys": len(MACHINES),
            "emulator": "subprocess",
            "producer": "sync send_batch",
            "consumer": "sync receive_batch, prefetch 300, all partitions",
        },
        {
            "sent_events_per_second": round(sent, 1),
            "received_events_per_second": round(received, 1),
        },
        [
            bench.target(
                "events sent per second through the SDK", round(sent), "ev/s", "report", None
            ),
            bench.target(
                "events received per second through the SDK",
                round(received),
                "ev/s",
                "report",
                None,
            ),
        ],
        [chart],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
