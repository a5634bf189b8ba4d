"""Checks of exercise 8.4 · The pipeline, unstarted.

The pipeline, with lab 05's ``CatchUpProcessor``, over parquet files in the eventhubs source's
schema, one file per micro-batch, run with ``trigger(availableNow=True)``.
"""

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from story_08 import (
    HOUR_MS,
    _heartbeat,
    _no_query_started,
    _processor,
    _run_available,
    _sortable,
)

from streamlab.kit import (
    HEALTHY,
    HUB_SYSTEM_ARROW_SCHEMA,
    INITIALIZING,
    START,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    is_not_done,
    query_cause,
)


def _stamp(ms: int) -> str:
    """The contract's time format for ``ms`` milliseconds since the epoch."""
    at = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


TRANSITION_COLUMNS = [
    ("machine_name", "string"),
    ("status", "string"),
    ("previous_status", "string"),
    ("last_status_change_time", "timestamp"),
    ("noticed_time", "timestamp"),
]


def _write_events(
    folder: Path, second: int, first_number: int, events: list, last_enqueued: int
) -> int:
    """One file of eventhubs rows on partition 0, enqueued ``second`` s after START.

    ``last_enqueued`` is what the source's systemProperties would say the partition held when
    the batch was planned. Returns the next sequence number.
    """
    rows = [
        {
            "body": body,
            "partition": "0",
            "offset": str(first_number + i),
            "sequenceNumber": first_number + i,
            "enqueuedTime": START + timedelta(seconds=second),
            "publisher": None,
            "partitionKey": key,
            "properties": [],
            "systemProperties": [("lastEnqueuedSequenceNumber", str(last_enqueued))],
        }
        for i, (key, body) in enumerate(events)
    ]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{second:03d}.parquet"
    pq.write_table(pa.Table.from_pylist(rows, schema=HUB_SYSTEM_ARROW_SCHEMA), path)
    stamp = START.timestamp() + second  # the file source takes new files in this order
    os.utime(path, (stamp, stamp))
    return first_number + len(events)


def _events_stream(spark, folder: Path, system_properties: bool = True):
    from streamlab.eventhubs import SCHEMA
    from streamlab.kit import SYSTEM_SCHEMA

    schema = SYSTEM_SCHEMA if system_properties else SCHEMA
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).parquet(str(folder))


def _describe(rows) -> str:
    def name(machine) -> str:
        return machine if isinstance(machine, str) and machine.strip() else repr(machine)

    return (
        "; ".join(f"batch {b} {name(m)}: {p} -> {s} at {t}" for b, m, p, s, t in rows) or "nothing"
    )


def _kind(value) -> str:
    """What a function returned, for a check that wanted a streaming DataFrame."""
    from pyspark.sql import DataFrame

    if isinstance(value, DataFrame):
        return "a streaming DataFrame" if value.isStreaming else "a batch DataFrame"
    return type(value).__name__


@exercise("8.4", timeout=60)
def test_the_pipeline_is_returned_unstarted(nb, spark, tmp_path):
    from pyspark.sql import DataFrame

    for system_properties in (True, False):
        events = _events_stream(spark, tmp_path, system_properties)
        transitions = nb.monitor_transitions(events, _processor(HOUR_MS))
        if not (isinstance(transitions, DataFrame) and transitions.isStreaming):
            raise CheckFailed(
                "monitor_transitions() should return the streaming DataFrame of transitions.",
                expected="a streaming DataFrame",
                actual=_kind(transitions),
            )
        got = [(f.name, f.dataType.simpleString()) for f in transitions.schema.fields]
        expect_equal(
            got,
            TRANSITION_COLUMNS,
            "monitor_transitions() should end with lab 05's catch_up_changes, whose rows have "
            "these columns.",
        )
        df = nb.monitor_stream(events, _processor(HOUR_MS))
        if not (isinstance(df, DataFrame) and df.isStreaming):
            raise CheckFailed(
                "monitor_stream() should return the streaming DataFrame of status events.",
                expected="a streaming DataFrame",
                actual=_kind(df),
            )
        expect_equal(
            [(f.name, f.dataType.simpleString()) for f in df.schema.fields],
            [("body", "string"), ("partitionKey", "string")],
            "monitor_stream() should end with status_events: the columns body and partitionKey.",
        )
    _no_query_started(spark, "monitor_stream() should not start a query: return the DataFrame.")


def _backlog_of_partition_0(incoming: Path) -> None:
    """Five files of partition 0; the partition holds more than the first four (a backlog),
    and the fifth reaches its end."""
    n = _write_events(
        incoming,
        0,
        0,
        [
            _heartbeat("m1"),
            _heartbeat("m2"),
            _heartbeat("m3", machine_time="yesterday"),
            ("m4", b""),
            ("m4", b"{oops"),
            ("m4", b"[1, 2]"),
            ("m4", b'{"machine_time": "2026-11-22T10:00:00Z"}'),
            ("m4", b'{"machine_name": "  ", "machine_time": "2026-11-22T10:00:00Z"}'),
        ],
        last_enqueued=100,
    )
    n = _write_events(incoming, 1, n, [_heartbeat("m1")], last_enqueued=100)
    n = _write_events(incoming, 7, n, [_heartbeat("m1")], last_enqueued=100)
    n = _write_events(incoming, 8, n, [_heartbeat("m2")], last_enqueued=100)
    _write_events(incoming, 9, n, [_heartbeat("m3")], last_enqueued=n)


def _sent(nb, spark, incoming: Path, checkpoint: Path) -> list[tuple]:
    """(batch id, body, partitionKey) of every status event the pipeline sends, 5 s timeout."""
    sent: list[tuple] = []

    def collect(batch, batch_id):
        sent.extend((batch_id, row.body, row.partitionKey) for row in batch.collect())

    df = nb.monitor_stream(_events_stream(spark, incoming), _processor(timeout_ms=5_000))
    try:
        _run_available(
            spark,
            df.writeStream.foreachBatch(collect).option("checkpointLocation", str(checkpoint)),
        )
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(
            "The pipeline failed on a mix of heartbeats and broken events.",
            expected="the query to run to the end of its input",
            actual=query_cause(error),
        ) from None
    return sent


def _status_rows(sent: list[tuple]) -> list[tuple]:
    """(batch id, machine, previous status, status, time) of each event, its body checked."""
    rows = []
    for batch_id, body, key in sent:
        try:
            fields = json.loads(body)
        except (TypeError, ValueError):
            raise CheckFailed(
                "Each status event's body should be JSON (status_events, 8.1).",
                expected="a JSON object",
                actual=f"{body!r:.200}",
            ) from None
        expect_equal(
            key,
            fields.get("machine_name"),
            f"Each status event's partitionKey should be its machine's name (the body: {body}).",
            show=repr,
        )
        rows.append(
            (
                batch_id,
                fields.get("machine_name"),
                fields.get("previous_status"),
                fields.get("status"),
                fields.get("last_status_change_time"),
            )
        )
    return sorted(rows, key=_sortable)


@exercise("8.4", timeout=420)
def test_heartbeats_in_status_events_out(nb, spark, tmp_path):
    incoming, checkpoint = tmp_path / "hub", tmp_path / "checkpoint"
    _backlog_of_partition_0(incoming)  # the timeout is 5 s
    rows = _status_rows(_sent(nb, spark, incoming, checkpoint))

    def at(second: int) -> str:
        return _stamp(int((START + timedelta(seconds=second)).timestamp() * 1000))

    expected = sorted(
        [
            (0, "m1", None, INITIALIZING, at(0)),
            (0, "m2", None, INITIALIZING, at(0)),
            (0, "m3", None, INITIALIZING, at(0)),
            (1, "m1", INITIALIZING, HEALTHY, at(1)),
            (2, "m2", INITIALIZING, UNHEALTHY, at(5)),
            (2, "m3", INITIALIZING, UNHEALTHY, at(5)),
            (2, "m1", HEALTHY, UNHEALTHY, at(6)),
            (2, "m1", UNHEALTHY, HEALTHY, at(7)),
            (3, "m2", UNHEALTHY, HEALTHY, at(8)),
            (4, "m3", UNHEALTHY, HEALTHY, at(9)),
            (4, "m1", HEALTHY, UNHEALTHY, at(12)),
            (4, "m2", HEALTHY, UNHEALTHY, at(13)),
            (4, "m3", HEALTHY, UNHEALTHY, at(14)),
        ],
        key=_sortable,
    )
    expect_equal(
        rows,
        expected,
        f"Five micro-batches of partition 0 with a 5 s timeout (m1, m2, m3 and five broken events "
        f"at 10:00:00; m1 at :01; m1 at :07; m2 at :08; m3 at :09, the partition's last event): "
        f"the pipeline sent {len(rows)} status events where {len(expected)} were expected. Only "
        f"bodies with a non-blank machine_name are heartbeats (m3's unparsable machine_time still "
        f"counts); event_time is the event's enqueuedTime, not its machine_time; and the last "
        f"batch can close the deadlines only if last_enqueued_sequence_number comes from "
        f"systemProperties.",
        show=_describe,
    )
