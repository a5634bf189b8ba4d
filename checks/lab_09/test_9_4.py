"""Checks of exercise 9.4 · Predict when each alert comes out.

The learner's prediction against what this file's own join emits for the notebook's story.
"""

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from story_09 import (
    _join_settings,
    _maintenance_join,
    per_batch,
    run,
    streams,
)

from streamlab.deliveries import write_deliveries
from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    spark_facts,
)


def reference_outside_maintenance(nb, changes: DataFrame, windows: DataFrame) -> DataFrame:
    """The alerts as the exercise defines them, with the notebook's delays."""
    left, right, condition = _maintenance_join(
        nb, changes, windows.withWatermark("maintenance_start", nb.WINDOWS_DELAY)
    )
    return (
        left.join(right, condition, "leftOuter")
        .where(F.col("w.machine_name").isNull())
        .select("c.machine_name", "c.last_status_change_time")
    )


def _normalized(prediction) -> dict:
    if not isinstance(prediction, dict):
        raise CheckFailed(
            f"PREDICTED_ALERTS should be a dict from batch id to a list of machine names; it is "
            f"a {type(prediction).__name__}."
        )
    normalized = {}
    for batch, names in prediction.items():
        if not isinstance(batch, int) or isinstance(batch, bool):
            raise CheckFailed(
                f"The keys of PREDICTED_ALERTS are batch ids, ints; one is {batch!r}."
            )
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise CheckFailed(
                f"Each value of PREDICTED_ALERTS is a list of machine names; batch {batch} has "
                f"{names!r}."
            )
        if names:
            normalized[batch] = sorted(names)
    return normalized


@exercise("9.4", timeout=240)
def test_the_prediction_is_what_spark_emits(nb, spark, tmp_path):
    predicted = _normalized(nb.PREDICTED_ALERTS)

    def alerts() -> dict:
        write_deliveries(tmp_path / "story", nb.PREDICT_STORY)
        batches = run(
            reference_outside_maintenance(nb, *streams(spark, tmp_path / "story")),
            tmp_path / "checkpoint",
        )
        return {
            b: [m for (m,) in rows]
            for b, rows in per_batch(batches, lambda r: (r["machine_name"],)).items()
        }

    spark_says = spark_facts(
        "9.4 the alerts", alerts, check=__file__, given=_join_settings(nb, nb.PREDICT_STORY)
    )
    expect_equal(
        predicted,
        spark_says,
        "PREDICTED_ALERTS against what the left outer join emits for PREDICT_STORY, batch by "
        "batch (batches without alerts left out).",
        hint="Write down both streams' watermarks after every batch; the query's is the smaller, "
        "a batch runs with the one from the batch before, and an availableNow run ends with a "
        "batch without data when its last batch moved the watermark.",
    )
