"""Checks of exercise 6.8 · Predict what each design rewrites.

PREDICTED_WRITES against the state store's change feed of both designs, a value per machine
and a value per hub partition, over the same input.
"""

from __future__ import annotations

from pathlib import Path

from story_06 import (
    _as_spark_did,
    _prediction,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    ReferenceHeartbeatProcessor,
    deliver_file,
    exercise,
    start_available,
)

PRICE_BATCHES = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], [1], [1, 5])


AHEAD_MS = 4_102_444_800_000  # 2100-01-01: event times no clock reaches during the check


def _price_input(folder: Path) -> None:
    sequence = {"0": 0, "1": 0}
    folder.mkdir(parents=True)
    for batch, machines in enumerate(PRICE_BATCHES):
        rows = []
        for m in machines:
            partition = "0" if m <= 4 else "1"
            rows.append(
                {
                    "partition": partition,
                    "machine_name": f"machine-{m}",
                    "machine_time": None,
                    "event_time": AHEAD_MS + batch * 1000 + m,
                    "sequence_number": sequence[partition],
                    "last_enqueued_sequence_number": None,
                }
            )
            sequence[partition] += 1
        deliver_file(folder, str(batch), rows, order=batch)


def _writes(spark, transitions, checkpoint: Path, variable: str, machines_in_value) -> list:
    from pyspark.sql import functions as F

    writer = transitions.writeStream.format("noop").option("checkpointLocation", str(checkpoint))
    query = start_available(spark, writer)
    finish(query, within=240, what="the check's query over the prices to read its input")
    feed = (
        spark.read.format("statestore")
        .option("stateVarName", variable)
        .option("readChangeFeed", "true")
        .option("changeStartBatchId", 0)
        .load(str(checkpoint))
        .groupBy("batch_id")
        .agg(F.count("*").alias("values"), F.sum(machines_in_value).alias("machines"))
        .orderBy("batch_id")
        .collect()
    )
    return [(r["values"], r["machines"]) for r in feed]


@exercise("6.8", timeout=240)
def test_the_predicted_writes_are_what_spark_writes(nb, spark, tmp_path):
    predicted = _prediction(
        nb.PREDICTED_WRITES,
        "PREDICTED_WRITES",
        ("machine", "partition"),
        "each a list of one (values, machines) pair per batch",
    )
    _as_spark_did(
        predicted,
        "6.8 the writes",
        lambda: _writes_spark_makes(spark, tmp_path),
        __file__,
        "PREDICTED_WRITES should hold, per design and batch, (state values written, machines "
        "they hold) as the change feed shows them (expected: what Spark wrote on the same "
        "input).",
        hint="A value is written whole whenever its key has a row in the batch: one machine "
        "per value for the first design, every machine the partition holds so far for the "
        "second.",
    )


def _writes_spark_makes(spark, tmp_path: Path) -> dict:
    """Both designs over the same input: per batch, (values written, machines they hold)."""
    from pyspark.sql import functions as F

    from streamlab.monitor import reference_solution

    _price_input(tmp_path / "incoming")
    beats = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .schema(
            "partition STRING, machine_name STRING, machine_time TIMESTAMP, event_time LONG, "
            "sequence_number LONG, last_enqueued_sequence_number LONG"
        )
        .json(str(tmp_path / "incoming"))
        .withColumn("event_time", F.timestamp_millis("event_time"))
    )
    per_machine = beats.groupBy("machine_name").transformWithState(
        ReferenceHeartbeatProcessor(timeout_ms=3_600_000),
        "machine_name STRING, status STRING, previous_status STRING, "
        "last_status_change_time TIMESTAMP",
        "Append",
        "ProcessingTime",
    )
    lab05 = reference_solution()
    per_partition = lab05.catch_up_changes(beats, lab05.CatchUpProcessor(timeout_ms=3_600_000))
    return {
        "machine": _writes(spark, per_machine, tmp_path / "machine", "machine", F.lit(1)),
        "partition": _writes(
            spark, per_partition, tmp_path / "partition", "partition", F.size("value.names")
        ),
    }
