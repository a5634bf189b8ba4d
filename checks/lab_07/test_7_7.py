"""Checks of exercise 7.7 · Each batch once.

The writer appends a batch with its transaction id and skips a replayed one, per app id, over
a query restarted after a crash before its commit, stateless and with state.
"""

from pathlib import Path

from pyspark.sql import DataFrame
from story_07 import (
    READING_DDL,
    at,
    reading_line,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    crash_before_commit,
    deliver_file,
    exercise,
    expect_equal,
    expect_that,
    query_cause,
)


def batch_writer(nb, table: Path, app_id: str):
    write = nb.once_per_batch(str(table), app_id)
    expect_that(
        callable(write),
        "once_per_batch(path, app_id) should return the function write(batch, batch_id) for "
        "foreachBatch.",
        expected="a function",
        actual=type(write).__name__,
    )
    return write


def readings_batch(spark, first: int, count: int) -> DataFrame:
    return spark.createDataFrame(
        [("d1", 50.0, at(n), n) for n in range(first, first + count)], READING_DDL
    )


def table_readings(table: Path) -> list[int]:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(table)):
        raise CheckFailed(
            f"After write(batch, batch_id) there should be a Delta table at {table}. Append the "
            "batch with write_deltalake(path, batch.toArrow(), mode='append', ...).",
            expected="a Delta table (a folder with a _delta_log)",
            actual=f"a folder holding {sorted(p.name for p in table.iterdir())}"
            if table.is_dir()
            else "no folder",
        )
    return sorted(DeltaTable(str(table)).to_pyarrow_table()["sequence_number"].to_pylist())


def recorded(table: Path, app_id: str):
    from deltalake import DeltaTable

    return DeltaTable(str(table)).transaction_version(app_id)


@exercise("7.7", timeout=60)
def test_a_batch_is_appended_with_its_transaction_id(nb, spark, tmp_path):
    table = tmp_path / "samples"
    write = batch_writer(nb, table, "sampler")
    write(readings_batch(spark, 0, 3), 0)
    expect_equal(
        table_readings(table),
        [0, 1, 2],
        "The first batch held the readings [0, 1, 2]: the table should hold them.",
    )
    write(readings_batch(spark, 3, 2), 1)
    expect_equal(
        table_readings(table),
        [0, 1, 2, 3, 4],
        "Batches 0 and 1 held the readings 0 to 4. Append each new batch to the table.",
    )
    expect_equal(
        recorded(table, "sampler"),
        1,
        "After batch 1, the table's transaction version for the app id 'sampler' should be 1. "
        "Commit each batch with "
        "CommitProperties(app_transactions=[Transaction(app_id=..., version=batch_id)]).",
    )


@exercise("7.7", timeout=60)
def test_a_replayed_batch_is_not_written_again(nb, spark, tmp_path):
    table = tmp_path / "samples"
    write = batch_writer(nb, table, "sampler")
    first, second = readings_batch(spark, 0, 3), readings_batch(spark, 3, 2)
    write(first, 0)
    write(first, 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2],
        "Batch 0 was handed to write() twice, as Spark does after a crash; the table should hold "
        "its readings once. Skip a batch whose id the table has already recorded for the app id "
        "(DeltaTable(path).transaction_version(app_id)).",
    )
    write(second, 1)
    write(second, 1)
    write(first, 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2, 3, 4],
        "After batches 0, 1, 1 again and 0 again, the table should hold the readings 0 to 4 "
        "once each. Skip every batch at or below the recorded version.",
    )


@exercise("7.7", timeout=60)
def test_each_app_id_counts_its_own_batches(nb, spark, tmp_path):
    table = tmp_path / "samples"
    batch_writer(nb, table, "sampler")(readings_batch(spark, 0, 2), 0)
    batch_writer(nb, table, "backfill")(readings_batch(spark, 10, 1), 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 10],
        "Two writers with different app ids each wrote their batch 0; the table should hold "
        "both. Compare the batch id with the version recorded for this writer's app id only.",
    )


@exercise("7.7", timeout=120)
def test_a_restarted_query_writes_its_replayed_batch_once(nb, spark, tmp_path, checkpoint_dir):
    folder, table = tmp_path / "readings", tmp_path / "samples"
    write = batch_writer(nb, table, "file-query")

    def run() -> None:
        query = (
            spark.readStream.schema(READING_DDL)
            .option("maxFilesPerTrigger", 1)
            .json(str(folder))
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's query over your batch writer to read its files")

    deliver_file(folder, "a", [reading_line("d1", n, 50.0, n) for n in range(3)], order=0)
    deliver_file(folder, "b", [reading_line("d1", n, 50.0, n) for n in range(3, 5)], order=1)
    run()
    crash_before_commit(checkpoint_dir)  # after write() returned for batch 1
    run()
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2, 3, 4],
        "A query wrote batches 0 and 1, crashed before Spark recorded batch 1 as done, and "
        "restarted: Spark ran batch 1 again. The table should hold the readings 0 to 4 once "
        "each.",
    )


def _deepest_cause(query, error: BaseException) -> str:
    """The first line of the JVM's innermost reason for a failed query, e.g. a state store's."""
    try:
        cause = query._jsq.exception().get()
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.getMessage()).splitlines()[0]
    except Exception:  # an internal API: if it moves, Spark's own sentence will do
        return query_cause(error)


@exercise(
    "7.7",
    timeout=180,
    hint="In a query with state, the batch's state is committed as its DataFrame is computed: "
    "compute the batch (its Arrow table) before you decide to skip writing it.",
)
def test_a_stateful_query_replays_its_batch_once(nb, spark, tmp_path, checkpoint_dir):
    folder, table = tmp_path / "readings", tmp_path / "counts"
    folder.mkdir()
    write = batch_writer(nb, table, "counts")
    counts = spark.readStream.schema(READING_DDL).json(str(folder)).groupBy("device_id").count()

    def run() -> None:
        query = (
            counts.writeStream.outputMode("update")
            .foreachBatch(write)
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        try:
            finish(query, within=240, what="the check's stateful query to read its input")
        except Exception as error:
            raise CheckFailed(
                "A query that counts readings per device (it keeps state) failed when Spark ran "
                "its last batch again after a crash.",
                expected="the replayed batch skipped, the query ending normally",
                actual=_deepest_cause(query, error),
            ) from None

    deliver_file(folder, "a", [reading_line("d1", 1, 50.0, 1), reading_line("d2", 2, 50.0, 1)], 0)
    run()
    crash_before_commit(checkpoint_dir)
    run()
    from deltalake import DeltaTable

    rows = sorted(DeltaTable(str(table)).to_pyarrow_table()["device_id"].to_pylist())
    expect_equal(rows, ["d1", "d2"], "The table should hold the batch's counts once.")
