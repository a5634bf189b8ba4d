"""A query that reads the emulator's ``heartbeats`` hub from its start, a few events a batch,
into the ``noop`` sink: what the backlog's tests watch fall to zero."""

from __future__ import annotations

from typing import Any


def start_reading(spark, hub, checkpoint, *, trigger: dict[str, Any], **options: Any):
    """Started; ``maxEventsPerTrigger`` 4 unless ``options`` say otherwise."""
    reader = (
        spark.readStream.format("eventhubs")
        .option("connectionString", hub.connection_string)
        .option("eventHubName", "heartbeats")
        .option("startingPosition", "earliest")
        .option("maxEventsPerTrigger", 4)
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(checkpoint))
        .trigger(**trigger)
        .start()
    )
