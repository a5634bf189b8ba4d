"""Ingestion through the ``eventhubs`` Spark source: events/s and micro-batch latency.

1. Throughput: N heartbeat events are sent to the emulator first, then one
   ``trigger(availableNow=True)`` query reads them all into the ``noop`` sink, with and
   without ``maxEventsPerTrigger``; events/s = N / wall time of the query.
2. Latency: a fleet of producers at 1 Hz and a query with a 500 ms trigger; for each
   micro-batch, its duration, and for each event the delay from its enqueue time to the end
   of the batch that read it.

    python bench/eventhubs_ingest.py [--events 50000] [--producers 100] [--seconds 30]

Writes ``build/bench/eventhubs_ingest.json``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as bench
from azure.eventhub import EventData, EventHubProducerClient

from streamlab.deadlines import finish
from streamlab.fleet import Fleet, heartbeat
from streamlab.hub import Hub


def _send(connection_string: str, count: int) -> float:
    start = time.perf_counter()
    with EventHubProducerClient.from_connection_string(
        connection_string, eventhub_name="heartbeats"
    ) as producer:
        now = datetime.now(UTC)
        for first in range(0, count, 100):
            for partition in ("0", "1", "2", "3"):
                batch = producer.create_batch(partition_id=partition)
                for i in range(first, min(first + 100, count)):
                    if i % 4 == int(partition):
                        batch.add(EventData(heartbeat(f"machine-{i % 1000}", now)))
                if len(batch):
                    producer.send_batch(batch)
    return time.perf_counter() - start


def _reader(spark, connection_string: str, starting: str, options: dict | None):
    reader = (
        spark.readStream.format("eventhubs")
        .option("connectionString", connection_string)
        .option("eventHubName", "heartbeats")
        .option("startingPosition", starting)
    )
    for key, value in (options or {}).items():
        reader = reader.option(key, value)
    return reader


def read_all(
    spark, connection_string: str, count: int, limit: int | None, options: dict | None = None
) -> dict:
    """Events/s of one ``availableNow`` read of the ``count`` events in the hub (``options``:
    more options of the source)."""
    reader = _reader(spark, connection_string, "earliest", options)
    if limit:
        reader = reader.option("maxEventsPerTrigger", limit)
    start = time.perf_counter()
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", tempfile.mkdtemp())
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=1800, what="the benchmark's query to read the hub's backlog")
    seconds = time.perf_counter() - start
    rows = sum(p["numInputRows"] for p in query.recentProgress)
    assert rows == count, f"read {rows} of {count} events"
    batches = [p for p in query.recentProgress if p["numInputRows"]]
    return {
        "maxEventsPerTrigger": limit,
        "events": rows,
        "seconds": round(seconds, 2),
        "events_per_second": round(rows / seconds),
        "batches": len(batches),
        "batch_duration_ms": {
            "median": round(bench.median([p["durationMs"]["triggerExecution"] for p in batches]))
        },
    }


def latency(
    spark, connection_string: str, producers: int, seconds: float, options: dict | None = None
) -> dict:
    """A fleet at 1 Hz read with a 500 ms trigger: enqueue to the end of the batch that read
    each event, and the batches' durations (``options``: more options of the source)."""
    from pyspark.sql import functions as F

    events = _reader(spark, connection_string, "latest", options).load()
    delays: list[float] = []

    def measure(df, batch_id):
        stamps = df.select(F.col("enqueuedTime").cast("double").alias("t")).collect()
        done = time.time()
        delays.extend(done - row.t for row in stamps)

    query = (
        events.writeStream.foreachBatch(measure)
        .trigger(processingTime="500 milliseconds")
        .option("checkpointLocation", tempfile.mkdtemp())
        .start()
    )
    while not query.recentProgress:  # the first batch starts the Python workers
        time.sleep(0.2)
    with Fleet(connection_string) as fleet:
        for _ in range(producers):
            fleet.add()
        time.sleep(seconds)
    query.stop()
    durations = [
        p["durationMs"]["triggerExecution"] for p in query.recentProgress if p["numInputRows"]
    ]
    steady = delays[len(delays) // 5 :]  # skip the warm-up
    return {
        "producers": producers,
        "seconds": seconds,
        "events": len(delays),
        "enqueue_to_batch_end_ms": bench.spread(steady, scale=1000),
        "batch_duration_ms": {
            "median": round(bench.median(durations)),
            "max": max(durations, default=None),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--producers", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=30)
    args = parser.parse_args()
    spark = bench.spark()
    with Hub(port=0) as hub:
        sent = _send(hub.connection_string, args.events)
        send = {"events": args.events, "events_per_second": round(args.events / sent)}
        reads = [
            read_all(spark, hub.connection_string, args.events, None),
            read_all(spark, hub.connection_string, args.events, 10_000),
        ]
    with Hub(port=0) as hub:
        live = latency(spark, hub.connection_string, args.producers, args.seconds)
    print(f"  sent to the hub:        {send['events_per_second']:>8,} events/s")
    for read in reads:
        print(
            f"  read into Spark:        {read['events_per_second']:>8,} events/s "
            f"(maxEventsPerTrigger={read['maxEventsPerTrigger']}, {read['batches']} batches)"
        )
    lag = live["enqueue_to_batch_end_ms"]
    print(
        f"  enqueue -> batch end:   p50 {lag['p50']} ms, p99 {lag['p99']} ms "
        f"({args.producers} producers at 1 Hz, 500 ms trigger)"
    )
    chart = bench.bar_chart(
        "eventhubs_ingest",
        "Reading the emulator into Spark (eventhubs source)",
        [
            (f"maxEventsPerTrigger={r['maxEventsPerTrigger']}", r["events_per_second"])
            for r in reads
        ],
        "events/s",
        note=f"{args.events:,} events, availableNow, noop sink; 2 cores, local[2]",
    )
    unlimited, limited = reads
    bench.write_result(
        "eventhubs_ingest",
        "Ingestion through the eventhubs source",
        {
            "events": args.events,
            "producers": args.producers,
            "seconds": args.seconds,
            "trigger_for_latency": "500 milliseconds",
        },
        {"send": send, "read": reads, "latency": live},
        [
            bench.target(
                "events/s into Spark, availableNow, no limit",
                unlimited["events_per_second"],
                "ev/s",
                "report",
                None,
            ),
            bench.target(
                "events/s into Spark, maxEventsPerTrigger=10000",
                limited["events_per_second"],
                "ev/s",
                "report",
                None,
            ),
            bench.target(
                f"enqueue to batch end p50, {args.producers} producers",
                lag["p50"],
                "ms",
                "report",
                None,
            ),
            bench.target(
                f"enqueue to batch end p99, {args.producers} producers",
                lag["p99"],
                "ms",
                "report",
                None,
            ),
            bench.target(
                "micro-batch duration, median",
                live["batch_duration_ms"]["median"],
                "ms",
                "report",
                None,
            ),
        ],
        [chart],
    )


if __name__ == "__main__":
    main()
