"""Checks of exercise 2.3 · Close windows with a watermark.

The progress reader on reports the check writes, then final_counts() on streams the check
writes: windows closed by the watermark, late rows dropped, the delay argument used.
"""

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql.streaming import StreamingQuery
from story_02 import (
    COLUMNS,
    beat,
    hhmmss,
    show,
    stream,
    table_rows,
)

from streamlab.deadlines import drain
from streamlab.kit import (
    CheckFailed,
    deliver_file,
    exercise,
    expect_dataframe,
    expect_equal,
)


def start_append(counts: DataFrame, name: str, checkpoint_dir: str) -> StreamingQuery:
    """final_counts() run in append mode to the memory sink, or a sentence why Spark refused."""
    try:
        return (
            counts.writeStream.format("memory")
            .queryName(name)
            .outputMode("append")
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise CheckFailed(
            "Spark refused to run final_counts() in append mode: it sets no watermark on the "
            "column it groups by, so no window is ever final. (Spark said: "
            f"{str(error).splitlines()[0][:200]})",
            hint="withWatermark goes on the heartbeats, before the groupBy, on the column "
            "the windows are built on.",
        ) from None


@exercise("2.3")
def test_rows_dropped_sums_every_state_operator(nb):
    progress = {
        "batchId": 4,
        "stateOperators": [
            {"operatorName": "dedupeWithinWatermark", "numRowsDroppedByWatermark": 2},
            {"operatorName": "stateStoreSave", "numRowsDroppedByWatermark": 3},
        ],
    }
    dropped = nb.rows_dropped_by_watermark(progress)
    if not isinstance(dropped, int) or isinstance(dropped, bool):
        raise CheckFailed(
            f"rows_dropped_by_watermark() should return an int; it returned "
            f"{type(dropped).__name__}."
        )
    expect_equal(
        dropped,
        5,
        "A report whose two state operators dropped 2 and 3 late rows dropped 5 in all.",
        hint="Add up the counter of every entry of progress['stateOperators'], not only the "
        "first or the last.",
    )


@exercise("2.3")
def test_rows_dropped_is_zero_for_a_stateless_query(nb):
    for progress in ({"batchId": 0, "stateOperators": []}, {"batchId": 0}):
        expect_equal(
            nb.rows_dropped_by_watermark(progress),
            0,
            f"A report without state operators dropped nothing: {progress}.",
            hint="A stateless query's report may have no stateOperators key at all: read it "
            "with a default.",
        )


@exercise("2.3", timeout=90)
def test_final_counts_close_windows_and_drop_late_rows(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "0", [beat("m1", 1), beat("m1", 2), beat("m2", 3)], order=0)
    counts = expect_dataframe(
        nb.final_counts(stream(spark, folder), "10 seconds", "5 seconds"), "final_counts", COLUMNS
    )
    query = start_append(counts, "check_2_3", checkpoint_dir)

    def table():
        return table_rows(spark.table("check_2_3"))

    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table(),
        [],
        "After heartbeats up to 10:00:03 the window [10:00:00, 10:00:10) is still open, so "
        "append mode writes nothing yet.",
        show=show,
    )
    deliver_file(folder, "1", [beat("m2", 30)], order=1)
    drain(query, within=240, what="the check's query to process the files written so far")
    closed = [(hhmmss(0), hhmmss(10), "m1", 2), (hhmmss(0), hhmmss(10), "m2", 1)]
    expect_equal(
        table(),
        closed,
        "A heartbeat at 10:00:30 moves a 5-second watermark to 10:00:25, which closes "
        "[10:00:00, 10:00:10).",
        show=show,
        hint="Is the watermark on event_time, with the delay argument as its delay?",
    )
    deliver_file(folder, "2", [beat("m1", 3), beat("m2", 31)], order=2)
    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table(),
        closed,
        "m1's heartbeat from 10:00:03 arrives after its window closed: it is dropped and the "
        "output does not change.",
        show=show,
    )
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    expect_equal(dropped, 1, "Spark should report 1 row dropped by the watermark.")
    expect_equal(
        sum(nb.rows_dropped_by_watermark(p) for p in query.recentProgress),
        1,
        "Over this query's progress reports, rows_dropped_by_watermark() should add up to 1.",
    )


@exercise("2.3", timeout=90)
def test_final_counts_use_the_delay_argument(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "0", [beat("m1", 1), beat("m1", 14)], order=0)
    counts = expect_dataframe(
        nb.final_counts(stream(spark, folder), "10 seconds", "2 seconds"), "final_counts"
    )
    query = start_append(counts, "check_2_3_delay", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table_rows(spark.table("check_2_3_delay")),
        [(hhmmss(0), hhmmss(10), "m1", 1)],
        "With a delay of 2 seconds, a heartbeat at 10:00:14 moves the watermark to 10:00:12 "
        "and closes [10:00:00, 10:00:10).",
        show=show,
        hint="Is the delay argument the watermark's delay, rather than a fixed duration?",
    )
