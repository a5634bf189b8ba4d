"""Checks of exercise 7.3 · The sliding-window query.

The windows on a batch DataFrame, then on a stream over JSON files the check writes, run twice
with ``trigger(availableNow=True)`` on one checkpoint where the watermark matters.
"""

from pathlib import Path

from pyspark.errors import AnalysisException
from story_07 import (
    READING_DDL,
    SAMPLE_COLUMNS,
    at,
    compare,
    expected_sample,
    reading_line,
    sample_tuples,
    windows_shown,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    deliver_file,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_that,
)


@exercise("7.3", timeout=60)
def test_sliding_windows_on_a_batch(nb, spark):
    readings = spark.createDataFrame(
        [("d1", 50.0, at(s), n) for n, s in enumerate((1, 12, 13, 25))] + [("d2", -1.0, at(9), 0)],
        READING_DDL,
    )
    result = expect_dataframe(
        nb.window_samples(readings, "20 seconds", "10 seconds", "5 seconds"),
        "window_samples",
        SAMPLE_COLUMNS,
    )
    got = [(g[0], g[2], g[3]) for g in sample_tuples(result)]
    expected = sorted(
        [(-10, "d1", 1), (0, "d1", 3), (10, "d1", 3), (20, "d1", 1), (-10, "d2", 1), (0, "d2", 1)]
    )
    expect_equal(
        got,
        expected,
        "Windows of 20 s sliding every 10 s over d1's readings at 1, 12, 13 and 25 s and d2's at "
        "9 s should give these (window start in seconds after 10:00:00, device, readings). Are "
        "size and slide both passed to F.window?",
    )


FROM_PICK_SAMPLES = (
    " (window_samples() collects structs with the fields SAMPLE_FIELDS, in that "
    "order, and ends with your pick_samples(): if exercise 7.2 fails, fix it "
    "first.)"
)


def run_windows(nb, spark, folder: Path, output: Path, checkpoint_dir: str) -> list[tuple]:
    stream = spark.readStream.schema(READING_DDL).json(str(folder))
    samples = expect_dataframe(nb.window_samples(stream), "window_samples", SAMPLE_COLUMNS)
    try:
        query = (
            samples.writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", checkpoint_dir)
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
    except AnalysisException as error:
        raise CheckFailed(
            "Spark refused to run window_samples() in append mode: set a watermark with "
            '.withWatermark("event_time", lateness) before grouping by a window on that same '
            "column.",
            expected="a query Spark runs in append mode",
            actual=f"Spark said: {str(error).splitlines()[0][:200]}",
        ) from None
    finish(
        query, within=240, what="the check's query over your window_samples() to read its events"
    )
    if not any(output.glob("*.parquet")):
        return []
    return sample_tuples(spark.read.parquet(str(output)))


def expected_windows(readings: list[tuple], windows: list[tuple[str, int]]) -> list[tuple]:
    """The samples of ``windows`` (device, start) over ``readings`` (device, s, freq, seq)."""
    return sorted(
        expected_sample(
            device,
            start,
            [(s, n, f) for d, s, f, n in readings if d == device and start <= s < start + 60],
        )
        for device, start in windows
    )


# Run 1: d1 and a single reading of d2, then d1 at 90 s: the watermark becomes 60 s.
RUN_1 = [
    ("d1", 5, 50.0, 1),
    ("d1", 20, -1.0, 2),
    ("d1", 40, 51.0, 3),
    ("d2", 10, 49.0, 1),
    ("d1", 90, 50.5, 4),
]


# Run 2, all late for some window: 35 s (too late for [0, 60), in time for [30, 90)), 25 s
# (too late for both its windows), 60 s exactly (a window boundary), two at 70 s (a tie), and
# d2 at 200 s, which moves the watermark for every device to 170 s.
RUN_2 = [
    ("d1", 35, -2.0, 5),
    ("d1", 25, -3.0, 6),
    ("d1", 60, 0.0, 7),
    ("d1", 70, -0.5, 9),
    ("d1", 70, 1.0, 8),
    ("d2", 200, 49.0, 2),
]


@exercise("7.3", timeout=240)
def test_windows_are_written_once_when_the_watermark_closes_them(
    nb, spark, tmp_path, checkpoint_dir
):
    folder, output = tmp_path / "readings", tmp_path / "samples"
    deliver_file(folder, "run-1", [reading_line(d, s, f, n) for d, s, f, n in RUN_1], order=0)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    closed = expected_windows(RUN_1, [("d1", -30), ("d1", 0), ("d2", -30), ("d2", 0)])
    expect_that(
        got,
        "After readings up to 10:01:30 the watermark is 10:01:00 (30 s of lateness), which closes "
        "the windows ending at 10:00:30 and 10:01:00, but the query wrote no window. Is the "
        "watermark 30 seconds (the lateness argument) on event_time?",
        expected=closed,
        actual=got,
        show=windows_shown,
    )
    compare(
        got,
        closed,
        "After the first run (readings up to 10:01:30, watermark 10:01:00), only "
        "the closed windows are written",
        FROM_PICK_SAMPLES,
    )

    deliver_file(folder, "run-2", [reading_line(d, s, f, n) for d, s, f, n in RUN_2], order=1)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    if any(r[0] == 25 for g in got for r in (g[4], g[5], g[6])):
        raise CheckFailed(
            "The reading from 10:00:25 arrived when the watermark was 10:01:00: both its windows "
            "were closed, so it must be in none. Append mode and a watermark drop it for you.",
            expected="no window holding the reading from 10:00:25",
            actual=[g for g in got if any(r and r[0] == 25 for r in (g[4], g[5], g[6]))],
            show=windows_shown,
        )
    kept = [r for r in RUN_1 + RUN_2 if r[1] != 25]
    expected = closed + expected_windows(kept, [("d1", 30), ("d1", 60), ("d1", 90)])
    compare(
        got,
        sorted(expected),
        "After the second run (late readings, then d2 at 10:03:20: "
        "watermark 10:02:50), each closed window is written once, with the late readings "
        "its window was still open for",
        FROM_PICK_SAMPLES,
    )
