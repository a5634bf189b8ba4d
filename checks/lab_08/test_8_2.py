"""Checks of exercise 8.2 · Predict the status hub after a crash.

What a replayed batch leaves in an in-process status hub, against the learner's prediction.
"""

import json
import os
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from story_08 import (
    _heartbeat,
    _lab05,
    _run_available,
    _status_events,
)

from streamlab.kit import (
    HUB_ARROW_SCHEMA,
    START,
    TRANSITION_FIELDS,
    CheckFailed,
    crash_before_commit,
    exercise,
    expect_spark_shows,
)


def _contract_events(transitions):
    """The contract's status events, encoded here: 8.2 is graded apart from 8.1."""
    from pyspark.sql import functions as F

    options = {
        "ignoreNullFields": "false",
        "timestampFormat": "yyyy-MM-dd'T'HH:mm:ss.SSSXXX",
        "timeZone": "UTC",
    }
    return transitions.select(
        F.to_json(F.struct(*TRANSITION_FIELDS), options).alias("body"),
        F.col("machine_name").alias("partitionKey"),
    )


def _replayed_heartbeats(incoming: Path) -> None:
    """Two seconds of Producer 1's and Producer 2's heartbeats as the hub holds them: one
    parquet file a second, in the order the file source reads them."""
    from streamlab.hub import partition_for_key

    numbers: dict[str, int] = {}
    for second in (0, 1):
        rows = []
        for machine in ("Producer 1", "Producer 2"):
            partition = str(partition_for_key(machine, 4))
            number = numbers.get(partition, 0)
            numbers[partition] = number + 1
            rows.append(
                {
                    "body": _heartbeat(machine)[1],
                    "partition": partition,
                    "offset": str(number),
                    "sequenceNumber": number,
                    "enqueuedTime": START + timedelta(seconds=second),
                    "publisher": None,
                    "partitionKey": machine,
                    "properties": [],
                }
            )
        incoming.mkdir(parents=True, exist_ok=True)
        path = incoming / f"{second:03d}.parquet"
        pq.write_table(pa.Table.from_pylist(rows, schema=HUB_ARROW_SCHEMA), path)
        os.utime(path, (START.timestamp() + second,) * 2)


def _status_hub_after_a_replay(spark, tmp_path: Path) -> list[tuple]:
    """Lab 05's processor and the contract's events into a status hub, its last batch's
    commit lost, restarted: the (machine_name, status) of every event the hub then holds."""
    from streamlab.hub import Hub

    incoming, checkpoint = tmp_path / "hub-files", tmp_path / "checkpoint"
    _replayed_heartbeats(incoming)
    lab05 = _lab05()
    with Hub(data_dir=tmp_path / "hub", eventhubs={"status": 1}, port=0) as hub:

        def run() -> None:
            from streamlab.eventhubs import SCHEMA

            events = (
                spark.readStream.schema(SCHEMA)
                .option("maxFilesPerTrigger", 1)
                .parquet(str(incoming))
            )
            transitions = lab05.catch_up_changes(
                lab05.parse_heartbeats(events), lab05.CatchUpProcessor(timeout_ms=5_000)
            )
            _run_available(
                spark,
                _contract_events(transitions)
                .writeStream.format("eventhubs")
                .option("connectionString", hub.connection_string)
                .option("eventHubName", "status")
                .option("checkpointLocation", str(checkpoint)),
            )

        run()
        crash_before_commit(checkpoint)
        run()
        events = _status_events(hub.connection_string)
    return sorted(
        (json.loads(e.body_as_str())["machine_name"], json.loads(e.body_as_str())["status"])
        for e in events
    )


@exercise("8.2", timeout=420)
def test_the_status_hub_after_a_replay_is_as_predicted(nb, spark, tmp_path):
    predicted = nb.PREDICTED_STATUS_EVENTS
    if not isinstance(predicted, (list, tuple)) or not all(
        isinstance(e, (list, tuple)) and len(e) == 2 for e in predicted
    ):
        raise CheckFailed(
            "PREDICTED_STATUS_EVENTS should be a list of (machine_name, status) pairs, sorted.",
            expected="a list of pairs",
            actual=predicted,
        )
    expect_spark_shows(
        [tuple(e) for e in predicted],
        "8.2 the replay",
        lambda: _status_hub_after_a_replay(spark, tmp_path),
        "PREDICTED_STATUS_EVENTS should be every event the status hub holds after the crash and "
        "the restart, as sorted (machine_name, status) pairs, repeats included (expected: what "
        "the hub held on the same input).",
        hint="A restarted query runs its last unrecorded batch again from the state of the batch "
        "before it: it computes the same changes and sends them again.",
        check=__file__,
    )
