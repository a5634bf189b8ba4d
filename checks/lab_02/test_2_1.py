"""Checks of exercise 2.1 · Count heartbeats in tumbling windows.

The learner's counts on a batch DataFrame, then on a stream over JSON files the check writes,
run to the end with ``availableNow``.
"""

from pyspark.sql import DataFrame
from story_02 import (
    COLUMNS,
    batch,
    beat,
    hhmmss,
    show,
    stream,
    table_rows,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    deliver_file,
    exercise,
    expect_dataframe,
    expect_equal,
)


def run_complete(df: DataFrame, name: str, checkpoint_dir: str) -> list[tuple]:
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .outputMode("complete")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's windowed query to read its input")
    return table_rows(df.sparkSession.table(name))


# Producer 1's clock is 7 s slow: its machine_time falls in other windows than its event_time.
WINDOW_BEATS = [beat("m1", s, skew=-7) for s in (1, 2, 8, 12)] + [
    beat("m2", s) for s in (3, 14, 19)
]


@exercise("2.1", timeout=120)
def test_tumbling_counts_on_a_batch(nb, spark):
    counts = expect_dataframe(
        nb.tumbling_counts(batch(spark, WINDOW_BEATS), "10 seconds"), "tumbling_counts", COLUMNS
    )
    expected = [
        (hhmmss(0), hhmmss(10), "m1", 3),
        (hhmmss(0), hhmmss(10), "m2", 1),
        (hhmmss(10), hhmmss(20), "m1", 1),
        (hhmmss(10), hhmmss(20), "m2", 2),
    ]
    got = table_rows(counts)
    machine_clock = got != expected and any(row[2] == "m1" and row[3] == 2 for row in got)
    expect_equal(
        got,
        expected,
        "Ten-second tumbling windows on event_time, per machine.",
        show=show,
        hint=(
            "The windows follow machine_time, the machine's own clock (here 7 s slow), not "
            "event_time, when the hub stored the heartbeat."
            if machine_clock
            else ""
        ),
    )


@exercise("2.1", timeout=90)
def test_tumbling_counts_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "a", WINDOW_BEATS)
    counts = expect_dataframe(
        nb.tumbling_counts(stream(spark, folder), "5 seconds"), "tumbling_counts"
    )
    got = run_complete(counts, "check_2_1", checkpoint_dir)
    expected = [
        (hhmmss(0), hhmmss(5), "m1", 2),
        (hhmmss(0), hhmmss(5), "m2", 1),
        (hhmmss(5), hhmmss(10), "m1", 1),
        (hhmmss(10), hhmmss(15), "m1", 1),
        (hhmmss(10), hhmmss(15), "m2", 1),
        (hhmmss(15), hhmmss(20), "m2", 1),
    ]
    expect_equal(
        got,
        expected,
        'On a stream, with size "5 seconds".',
        show=show,
        hint="Does the window use the size argument rather than a fixed duration?",
    )
