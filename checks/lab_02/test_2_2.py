"""Checks of exercise 2.2 · Predict the sliding windows.

The learner's prediction against what Spark's sliding windows make of the notebook's fleet.
"""

from pyspark.sql import functions as F
from story_02 import (
    batch,
    beat,
    clock_rows,
)

from streamlab.kit import (
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
)

#: The notebook's fleet: Producers 1 and 2 every second from 10:00:00 to 10:00:11,
#: Producer 3 from 10:00:07 to 10:00:11.
FLEET_BEATS = [beat(m, s) for s in range(12) for m in ("Producer 1", "Producer 2")] + [
    beat("Producer 3", s) for s in range(7, 12)
]


PREDICTED = ("Producer 1", "Producer 3")


def _sliding_in_spark(spark) -> dict:
    rows = clock_rows(
        batch(spark, FLEET_BEATS)
        .groupBy(F.window("event_time", "10 seconds", "5 seconds"), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select("window.start", "window.end", "machine_name", "heartbeats")
    )
    return {m: [(a, b, n) for a, b, name, n in rows if name == m] for m in PREDICTED}


@exercise("2.2", timeout=120)
def test_sliding_prediction_matches_spark(nb, spark):
    predicted = expect_keys(
        nb.SLIDING,
        "SLIDING",
        sorted(PREDICTED),
        hint="Each key's value is the list of that machine's windows.",
    )
    spark_says = spark_facts("2.2 sliding", lambda: _sliding_in_spark(spark), check=__file__)
    answer = {m: [tuple(row) for row in predicted[m]] for m in PREDICTED}
    first = spark_says["Producer 1"][0]
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what Spark counts in windows of 10 s that start every 5 s.",
        hint=(
            "Windows start at multiples of the slide counted from the epoch, not at the "
            "first heartbeat: is there a window that starts before 10:00:00?"
            if first not in answer["Producer 1"]
            else "Each heartbeat falls in size / slide windows; count Producer 3's beats "
            "window by window."
        ),
    )
