"""Checks of exercise 7.4 · Predict the second run.

The learner's prediction against the notebook's second run, played here on the check's own
query.
"""

from pathlib import Path

from pyspark.sql import functions as F
from story_07 import (
    NOTEBOOK_RUN_1,
    NOTEBOOK_RUN_2,
    counted_windows,
    reading_line,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    deliver_file,
    exercise,
    expect_equal,
    spark_facts,
)


def _predicted_windows(value) -> list[tuple]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(w, (list, tuple)) and len(w) == 3 for w in value
    ):
        raise CheckFailed(
            "PREDICTED_WINDOWS should be a list of (device_id, window start as 'HH:MM:SS', "
            "readings) tuples.",
            expected="a list of 3-tuples",
            actual=value,
        )
    return sorted(tuple(w) for w in value)


def _second_run(spark, tmp_path: Path, checkpoint_dir: str) -> tuple[list, int]:
    """The notebook's two runs on one checkpoint: the second's windows and late rows."""
    folder, output = tmp_path / "readings", tmp_path / "samples"

    def run(order: int, readings) -> tuple[list, int]:
        deliver_file(folder, f"run-{order}", [reading_line(*r) for r in readings], order=order)
        query = (
            counted_windows(spark, folder)
            .withColumn("run", F.lit(order))
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", checkpoint_dir)
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's second run to read its events")
        dropped = sum(
            op["numRowsDroppedByWatermark"]
            for p in query.recentProgress
            for op in p["stateOperators"]
        )
        windows = (
            spark.read.parquet(str(output))
            .where(F.col("run") == order)
            .select("device_id", F.date_format("window_start", "HH:mm:ss").alias("start"), "events")
            .collect()
        )
        return sorted((w.device_id, w.start, w.events) for w in windows), dropped

    run(0, NOTEBOOK_RUN_1)
    return run(1, NOTEBOOK_RUN_2)


@exercise("7.4", timeout=180)
def test_the_second_run_is_as_predicted(nb, spark, tmp_path, checkpoint_dir):
    predicted = (_predicted_windows(nb.PREDICTED_WINDOWS), nb.PREDICTED_LATE_ROWS)
    actual = spark_facts(
        "7.4 the second run",
        lambda: _second_run(spark, tmp_path, checkpoint_dir),
        check=__file__,
    )
    expect_equal(
        predicted,
        actual,
        "(PREDICTED_WINDOWS, PREDICTED_LATE_ROWS) should be the windows the second run writes, "
        "sorted, and the late rows its batches drop (expected: what Spark does on the notebook's "
        "readings).",
        hint="Go batch by batch with two watermarks, the one a batch runs with and the one it "
        "leaves. For each new reading, ask of each of its windows on its own whether it was "
        "already closed, and ask what numRowsDroppedByWatermark counts: readings, or the rows "
        "Spark makes of them.",
    )
