"""Checks of exercise 7.6 · Start a query in its pool.

Each query's batches run in its pool, and the caller's pool is put back, after a start that
failed too.
"""

from pathlib import Path

from pyspark.sql.streaming import StreamingQuery
from story_07 import (
    READING_DDL,
    reading_line,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    deliver_file,
    exercise,
    expect_equal,
    expect_that,
)

POOL_PROPERTY = "spark.scheduler.pool"


def pool_recording_writer(spark, folder: Path, checkpoint: str, seen: list):
    """A writer whose batches record the scheduler pool they run in."""
    deliver_file(folder, "a", [reading_line("d1", 1, 50.0, 1)])

    def record(batch, batch_id):
        seen.append(batch.sparkSession.sparkContext.getLocalProperty(POOL_PROPERTY))

    return (
        spark.readStream.schema(READING_DDL)
        .json(str(folder))
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )


def started(nb, spark, writer, pool: str) -> StreamingQuery:
    query = nb.start_in_pool(spark, writer, pool)
    expect_that(
        isinstance(query, StreamingQuery),
        "start_in_pool() should return the StreamingQuery that writer.start() returns.",
        expected="a StreamingQuery",
        actual=type(query).__name__,
    )
    finish(query, within=240, what="the query your start_in_pool() started to read its input")
    return query


@exercise("7.6", timeout=90)
def test_each_query_runs_in_its_pool(nb, spark, tmp_path, checkpoint_dir):
    context = spark.sparkContext
    alerts_seen, windows_seen = [], []
    try:
        context.setLocalProperty(POOL_PROPERTY, None)
        started(
            nb,
            spark,
            pool_recording_writer(spark, tmp_path / "a", checkpoint_dir + "-a", alerts_seen),
            "alerts",
        )
        after = context.getLocalProperty(POOL_PROPERTY)
        expect_that(
            after is None,
            "Before start_in_pool() this thread had no pool; afterwards it has one. Put the "
            "property back as it was (setLocalProperty(..., None) removes it), or every job the "
            "notebook runs next lands in that pool.",
            expected="no pool (None)",
            actual=repr(after),
        )
        started(
            nb,
            spark,
            pool_recording_writer(spark, tmp_path / "w", checkpoint_dir + "-w", windows_seen),
            "windows",
        )
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    expect_equal(
        (alerts_seen, windows_seen),
        (["alerts"], ["windows"]),
        "The micro-batches of a query started in pool 'alerts' and of one started in pool "
        "'windows' should run in those pools (shown: the pools the batches of each query ran "
        "in). Set the local property spark.scheduler.pool before calling start(): the query's "
        "thread copies it then.",
    )


@exercise("7.6", timeout=90)
def test_the_callers_pool_is_restored(nb, spark, tmp_path, checkpoint_dir):
    context = spark.sparkContext
    seen = []
    try:
        context.setLocalProperty(POOL_PROPERTY, "notebook")
        started(
            nb, spark, pool_recording_writer(spark, tmp_path / "a", checkpoint_dir, seen), "alerts"
        )
        after = context.getLocalProperty(POOL_PROPERTY)
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    expect_equal(seen, ["alerts"], "The query should run in pool 'alerts'.")
    expect_equal(
        after,
        "notebook",
        "The calling thread was in pool 'notebook' before start_in_pool(), and should be in it "
        "afterwards. Remember the value before setting yours, and put it back.",
    )


@exercise("7.6", timeout=60)
def test_a_failed_start_restores_the_pool_and_raises(nb, spark, tmp_path):
    context = spark.sparkContext
    # No path and no checkpoint location: start() raises.
    writer = spark.readStream.schema(READING_DDL).json(str(tmp_path)).writeStream.format("parquet")
    try:
        context.setLocalProperty(POOL_PROPERTY, "notebook")
        try:
            result = nb.start_in_pool(spark, writer, "alerts")
        except Exception:
            result = None
        else:
            if isinstance(result, StreamingQuery):
                result.stop()
            raise CheckFailed(
                "writer.start() raises for this writer, and start_in_pool() should let the error "
                "reach its caller.",
                expected="the error writer.start() raised",
                actual=f"returned {result!r}",
            )
        after = context.getLocalProperty(POOL_PROPERTY)
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    expect_equal(
        after,
        "notebook",
        "When start() raises, the calling thread's pool should still be put back. Restore it in "
        "a finally: block.",
    )
