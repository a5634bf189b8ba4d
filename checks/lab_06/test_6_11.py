"""Checks of exercise 6.11 · Predict the alerts of a late night.

PREDICTED_ALERTS against what the Alerter raises on the progress reports of a windowed count
run here.

"""

from __future__ import annotations

from pathlib import Path

from story_06 import (
    _as_spark_did,
    _noop_writer,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEARTBEAT_DDL,
    CheckFailed,
    exercise,
    write_heartbeats,
)

LATE_NIGHT = ["10:00:00", "10:01:40", "10:03:20", "10:05:00", "10:06:40"]


def _alerts_raised(spark, tmp_path: Path, checkpoint_dir: str) -> list[tuple]:
    """The Alerter's (rule, batch_id) on the reports of a windowed count over LATE_NIGHT."""
    from pyspark.sql import functions as F

    from streamlab.alerts import Thresholds
    from streamlab.kit import Alerter

    folder = tmp_path / "incoming"
    for n, on_time in enumerate(LATE_NIGHT):
        times = [on_time] + (["09:00:00"] if n else [])
        write_heartbeats(
            folder, str(n), [("machine-1", f"2026-11-22T{t}Z") for t in times], order=n
        )
    counts = (
        spark.readStream.schema(HEARTBEAT_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .withWatermark("machine_time", "10 seconds")
        .groupBy(F.window("machine_time", "10 seconds"))
        .count()
    )
    query = _noop_writer(counts, "late_night", checkpoint_dir, mode="append").start()
    finish(query, within=240, what="the check's windowed count to read its input")
    alerter = Alerter(Thresholds(max_watermark_lag_s=100, dropped_batches=3, growing_batches=3))
    return [(a.rule, a.batch_id) for p in query.recentProgress for a in alerter.observe(p)]


@exercise("6.11", timeout=150)
def test_the_predicted_alerts_are_what_the_alerter_raises(nb, spark, tmp_path, checkpoint_dir):
    predicted = nb.PREDICTED_ALERTS
    if not isinstance(predicted, list | tuple) or not all(
        isinstance(item, list | tuple) and len(item) == 2 for item in predicted
    ):
        raise CheckFailed(
            "PREDICTED_ALERTS should be a list of (rule, batch_id) pairs.",
            expected="a list such as [('state_growing', 3)]",
            actual=predicted,
        )
    _as_spark_did(
        [tuple(item) for item in predicted],
        "6.11 the alerts",
        lambda: _alerts_raised(spark, tmp_path, checkpoint_dir),
        __file__,
        "PREDICTED_ALERTS should be the (rule, batch_id) of every alert the Alerter raised, in "
        "order (expected: what it raised on the reports of the same query, run here).",
        hint="Write down, batch by batch, the watermark each ran with and whether its late "
        "heartbeat was dropped; an alert is raised only when its rule starts firing.",
    )
