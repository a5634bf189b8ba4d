"""Checks of exercise 2.4 · Predict which late heartbeats count.

The learner's prediction against a run here of the check's own final_counts on the notebook's
late story.
"""

from pathlib import Path

from story_02 import (
    beat,
    clock_rows,
    reference_final_counts,
    stream,
)

from streamlab.deadlines import drain
from streamlab.kit import (
    deliver_file,
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
)

#: Exercise 2.4's deliveries: (machine, event second) per file, in order.
LATE_STORY = [
    [("Producer 1", 1), ("Producer 1", 2), ("Producer 2", 3)],
    [("Producer 2", 30)],
    [("Producer 1", 3), ("Producer 1", 22), ("Producer 2", 31)],
    [("Producer 2", 41), ("Producer 1", 28)],
    [("Producer 2", 60)],
]


def _late_story_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    """The notebook's run: the query keeps running, one processAllAvailable per delivery."""
    folder.mkdir(parents=True, exist_ok=True)
    query = (
        reference_final_counts(stream(spark, folder))
        .writeStream.format("memory")
        .queryName("check_2_4")
        .outputMode("append")
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )
    for number, beats in enumerate(LATE_STORY):
        deliver_file(folder, str(number), [beat(m, s) for m, s in beats], order=number)
        drain(query, within=240, what="the check's query to process the files written so far")
    query.stop()
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    emitted = clock_rows(spark.table("check_2_4").drop("window_end"))
    return {"emitted": emitted, "dropped": dropped}


@exercise("2.4", timeout=120)
def test_late_data_prediction_matches_spark(nb, spark, tmp_path, checkpoint_dir):
    predicted = expect_keys(
        nb.LATE_DATA,
        "LATE_DATA",
        ["dropped", "emitted"],
        hint="'emitted' is a list of (window_start, machine_name, heartbeats) and 'dropped' an int.",
    )
    answer = {
        "emitted": sorted(tuple(row) for row in predicted["emitted"]),
        "dropped": predicted["dropped"],
    }
    spark_says = spark_facts(
        "2.4 the late story",
        lambda: _late_story_in_spark(spark, tmp_path / "in", checkpoint_dir),
        check=__file__,
    )
    hint = ""
    if answer["dropped"] > spark_says["dropped"]:
        hint = (
            "You drop more than Spark: being older than a watermark is not what drops a row from "
            "a windowed count. For each row you dropped, ask which batch's watermark it is "
            "filtered against, and what that watermark had done to the row's window."
        )
    elif answer["emitted"] != spark_says["emitted"]:
        hint = (
            "A window is written once, when a batch runs with a watermark at or past its end; "
            "windows still open when the deliveries end are not written."
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what Spark wrote and dropped after the five deliveries.",
        hint=hint,
    )
