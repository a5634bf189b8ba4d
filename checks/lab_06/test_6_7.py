"""Checks of exercise 6.7 · The query, keyed by bucket.

The learner's query with the course's processor, three runs on one checkpoint with
``trigger(availableNow=True)``: the rows, the values in the state store, the timers across
runs.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from story_06 import (
    _cause,
    _heartbeats,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    expect_that,
    load_solution,
    start_available,
)


def _bucketed_changes(nb, spark, folder: Path):
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    schema = StructType(
        [StructField("machine_name", StringType()), StructField("machine_time", TimestampType())]
    )
    heartbeats = spark.readStream.schema(schema).json(str(folder))
    # The course's processor (6.5 and 6.6 are graded on their own). timeout_ms=1: every timer
    # is due by the next run's batch, so timeouts show up without waiting for any clock.
    df = nb.bucketed_status_changes(
        heartbeats, load_solution("06").BucketedHeartbeatProcessor(timeout_ms=1), buckets=2
    )
    expect_that(
        isinstance(df, DataFrame),
        "bucketed_status_changes() should return the DataFrame that transformWithState gives. "
        "Return it without calling writeStream or start().",
        expected="a DataFrame",
        actual=type(df).__name__,
    )
    expect_that(
        df.isStreaming,
        "bucketed_status_changes() returned a batch DataFrame; it should be streaming.",
        expected="a streaming DataFrame (isStreaming True)",
        actual="a batch DataFrame (isStreaming False)",
    )
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expected = [(f.name, f.dataType.simpleString()) for f in nb.STATUS_SCHEMA.fields]
    expect_equal(
        got,
        expected,
        "The query's rows should be lab 04's, STATUS_SCHEMA: (name, type) of each column. Pass "
        "STATUS_SCHEMA as outputStructType: the bucket stays inside the query.",
    )
    return df


def _bucketed_run(nb, spark, incoming: Path, output: Path, checkpoint) -> tuple[list, object]:
    writer = (
        _bucketed_changes(nb, spark, incoming)
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
    )
    query = start_available(spark, writer)
    try:
        finish(
            query, within=240, what="the check's query over your bucketed changes to read its input"
        )
    except Exception as error:
        raise CheckFailed(
            "The query failed. Check the arguments of transformWithState: "
            'STATUS_SCHEMA, "Append" and "ProcessingTime".',
            expected="the query to read its input and stop",
            actual=_cause(error),
        ) from None
    rows = [
        (r.machine_name, r.status, r.previous_status, r.last_status_change_time)
        for r in spark.read.parquet(str(output)).collect()
    ]
    return rows, query


@exercise("6.7", timeout=180)
def test_bucketed_query_runs_on_rocksdb(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    machines = ["m1", "m2", "m3", "m4", "m5", "m6"]

    _heartbeats(incoming, "a", machines + ["m1", "m2", "m1"])
    first, query = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in first)
    expected = [(m, INITIALIZING, None) for m in machines]
    expect_equal(
        got,
        expected,
        "The first run (six machines, m1 three times, m2 twice, in 2 buckets) should emit one "
        "Initializing row per machine, named after the machine, as lab 04's query does.",
    )
    untimed = [r for r in first if not isinstance(r[3], datetime)]
    expect_that(
        not untimed,
        "last_status_change_time should be a timestamp in every row.",
        expected="a datetime in every row",
        actual=untimed,
    )
    keys = query.lastProgress.stateOperators[0].numRowsTotal
    expect_that(
        keys <= 2,
        "Six machines in 2 buckets should leave at most 2 values in the state store, one per "
        "bucket. Group by the bucket column, "
        'F.pmod(F.hash("machine_name"), F.lit(buckets)), not by machine_name.',
        expected="at most 2",
        actual=keys,
    )

    _heartbeats(incoming, "b", ["m1", "m1"])
    second, _ = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in set(second) - set(first))
    expected = [("m1", HEALTHY, INITIALIZING)] + [
        (m, UNHEALTHY, INITIALIZING) for m in machines[1:]
    ]
    expect_equal(
        got,
        expected,
        "The second run on the same checkpoint, with a timeout of 1 ms and only m1 beating, "
        "should add m1's Initializing -> Healthy and an Unhealthy row for each of the five "
        "others. The state and the timers must survive between runs.",
    )

    _heartbeats(incoming, "c", ["m2"])
    third, _ = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in set(third) - set(second))
    expected = [("m1", UNHEALTHY, HEALTHY), ("m2", HEALTHY, UNHEALTHY)]
    expect_equal(
        got,
        expected,
        "The third run, only m2 beating, should add m2's recovery and m1's timeout.",
    )
