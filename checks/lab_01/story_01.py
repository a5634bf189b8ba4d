"""What lab 01's checks share: events in the ``eventhubs`` row schema, as batch
DataFrames and as parquet files written the way the hub would store them (partition from
``streamlab.hub.partition_for_key``, sequence numbers per partition)."""

import os
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlab.deadlines import finish
from streamlab.eventhubs import SCHEMA as EVENTHUBS_SCHEMA
from streamlab.hub import partition_for_key
from streamlab.kit import (
    HUB_ARROW_SCHEMA,
    START,
    CheckFailed,
    heartbeat_line,
)

HEARTBEAT_COLUMNS = ["machine_name", "machine_time", "event_time", "partition", "sequence_number"]


PARTITIONS = 4


def body(machine, second, skew=0) -> bytes:
    sent = (START + timedelta(seconds=second + skew)).isoformat()
    return heartbeat_line(machine, sent).encode()


class HubFiles:
    """Stores events like the hub: partition from the key, sequence numbers per partition."""

    def __init__(self):
        self.sequence = defaultdict(int)
        self.events: list[dict] = []

    def send(self, key, payload, second, partition=None) -> dict:
        partition = str(partition_for_key(key, PARTITIONS) if partition is None else partition)
        number = self.sequence[partition]
        self.sequence[partition] += 1
        event = {
            "body": payload,
            "partition": partition,
            "offset": str(number * 128),
            "sequenceNumber": number,
            "enqueuedTime": START + timedelta(seconds=second),
            "publisher": None,
            "partitionKey": key,
            "properties": [("source", "check")],
        }
        self.events.append(event)
        return event

    def batch(self, spark) -> DataFrame:
        rows = [
            (
                e["body"],
                e["partition"],
                e["offset"],
                e["sequenceNumber"],
                e["enqueuedTime"],
                e["publisher"],
                e["partitionKey"],
                dict(e["properties"]),
            )
            for e in self.events
        ]
        return spark.createDataFrame(rows, EVENTHUBS_SCHEMA)

    def write(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist(self.events, schema=HUB_ARROW_SCHEMA), folder / f".{name}.parquet"
        )
        os.replace(folder / f".{name}.parquet", folder / f"{name}.parquet")
        self.events = []


def stream(spark, folder: Path) -> DataFrame:
    return spark.readStream.schema(EVENTHUBS_SCHEMA).parquet(str(folder))


def run_to_table(df: DataFrame, table: str, checkpoint_dir: str, outcome: str) -> None:
    query = (
        df.writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your parsing to read its input")
    error = query.exception()
    if error is not None:
        raise CheckFailed(
            f"The {outcome} stream failed.",
            expected="the stream to read its input and end",
            actual=str(error),
        )


def heartbeat_rows(df: DataFrame) -> list[tuple]:
    """Heartbeats as tuples, timestamps as UTC strings, sorted."""
    rows = df.select(
        "machine_name",
        F.col("machine_time").cast("string"),
        F.col("event_time").cast("string"),
        "partition",
        "sequence_number",
    )
    return sorted(
        (tuple(r) for r in rows.collect()), key=lambda r: (r[2] or "", r[0] or "", r[4] or 0)
    )
