"""Checks of exercise 1.5 · Predict where a restarted query resumes.

The learner's prediction against the ``eventhubs`` source reading a fresh emulator twice on one
checkpoint.
"""

import json
import logging
from pathlib import Path

from azure.eventhub import EventData, EventHubProducerClient
from story_01 import (
    body,
)

from streamlab.deadlines import finish
from streamlab.hub import Hub
from streamlab.kit import (
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
)


def _send_to(connection_string: str, partition: str, count: int) -> None:
    with EventHubProducerClient.from_connection_string(
        connection_string, eventhub_name="heartbeats"
    ) as producer:
        batch = producer.create_batch(partition_id=partition)
        for second in range(count):
            batch.add(EventData(body("m1", second)))
        producer.send_batch(batch)


def _read_all(spark, connection_string: str, checkpoint_dir: str) -> list[dict]:
    query = (
        spark.readStream.format("eventhubs")
        .option("connectionString", connection_string)
        .option("eventHubName", "heartbeats")
        .option("startingPosition", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your quarantine to read its input")
    return query.recentProgress


def _offsets(text):
    return json.loads(text) if isinstance(text, str) else text


def _restart_in_spark(spark, tmp_path: Path, checkpoint_dir: str) -> dict:
    """Two runs over a hub of two partitions: the second run's progress report."""
    logging.getLogger("azure").setLevel(logging.ERROR)
    with Hub(data_dir=tmp_path / "hub", eventhubs={"heartbeats": 2}) as hub:
        _send_to(hub.connection_string, "0", 3)
        _send_to(hub.connection_string, "1", 2)
        _read_all(spark, hub.connection_string, checkpoint_dir)
        _send_to(hub.connection_string, "1", 4)
        [report] = _read_all(spark, hub.connection_string, checkpoint_dir)
    source = report["sources"][0]
    return {
        "batchId": report["batchId"],
        "endOffset": _offsets(source["endOffset"]),
        "numInputRows": report["numInputRows"],
        "startOffset": _offsets(source["startOffset"]),
    }


@exercise("1.5", timeout=240)
def test_restart_prediction_matches_spark(nb, spark, tmp_path, checkpoint_dir):
    keys = ["batchId", "endOffset", "numInputRows", "startOffset"]
    predicted = expect_keys(nb.RESTART, "RESTART", keys)
    spark_says = spark_facts(
        "1.5 the restart",
        lambda: _restart_in_spark(spark, tmp_path, checkpoint_dir),
        check=__file__,
    )
    answer = {key: predicted[key] for key in keys}
    hint = ""
    if answer["batchId"] != spark_says["batchId"]:
        hint = "Batch ids carry on across restarts: the checkpoint remembers the last one."
    elif answer["endOffset"] != spark_says["endOffset"]:
        hint = (
            "An offset is the next sequence number to read: after events 0 to 5 of a partition, 6."
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against the progress report of the second run.",
        hint=hint,
    )
