"""Checks of exercise 7.5 · The alerts.

The fix: alerts are the anomalies as JSON, from a query that can run for ever. The diagnosis
against the alerts as found, run here on the notebook's two files and read back from their
progress reports and sink.
"""

import json
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from story_07 import (
    NOTEBOOK_RUN_1,
    NOTEBOOK_RUN_2,
    READING_DDL,
    at,
    diagnosis_field,
    reading_line,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    START,
    CheckFailed,
    deliver_file,
    exercise,
    expect_answer,
    expect_dataframe,
    expect_equal,
    expect_spark_shows,
    expect_that,
    is_int,
)


def alerts_of(nb, readings: DataFrame) -> DataFrame:
    alerts = expect_dataframe(nb.alert_events(readings), "alert_events", ["body", "partitionKey"])
    types = {f.name: f.dataType.simpleString() for f in alerts.schema.fields}
    expect_equal(
        types,
        {"body": "string", "partitionKey": "string"},
        "Both columns should be strings (the eventhubs sink sends `body`).",
    )
    return alerts


def decoded(alerts: DataFrame) -> list[tuple]:
    out = []
    for row in alerts.collect():
        try:
            fields = json.loads(row.body)
        except (TypeError, ValueError):
            raise CheckFailed(
                "An alert's body should be JSON.", expected="a JSON object", actual=repr(row.body)
            ) from None
        expect_that(
            isinstance(fields, dict) and set(fields) == {"device_id", "sensor_freq", "event_time"},
            "An alert's body should be a JSON object with exactly device_id, sensor_freq and "
            "event_time.",
            expected='{"device_id": ..., "sensor_freq": ..., "event_time": ...}',
            actual=repr(row.body),
        )
        when = datetime.fromisoformat(fields["event_time"].replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        out.append(
            (
                fields["device_id"],
                fields["sensor_freq"],
                (when - START).total_seconds(),
                row.partitionKey,
            )
        )
    return sorted(out)


#: What a failed fix of 7.5 is about, whatever the diagnosis said.
FIX_HINT_7_5 = (
    "Hold your query to its two promises one at a time: an alert for an anomaly however late, "
    "and a query that can run for ever. What does each part of your query keep between "
    "micro-batches, and what does it do to a late reading?"
)


@exercise("7.5", part="fix", hint=FIX_HINT_7_5)
def test_alerts_are_the_anomalies_as_json(nb, spark):
    readings = spark.createDataFrame(
        [
            ("sensor-1", 50.0, at(1), 1),
            ("sensor-1", -1.5, at(2.5), 2),
            ("sensor-2", 0.0, at(3), 1),
            ("sensor-2", -0.0, at(4), 2),
            ("sensor-3", -0.001, at(5), 1),
        ],
        READING_DDL,
    )
    got = decoded(alerts_of(nb, readings))
    expected = [("sensor-1", -1.5, 2.5, "sensor-1"), ("sensor-3", -0.001, 5.0, "sensor-3")]
    expect_equal(
        got,
        expected,
        "Alerts should be the readings with sensor_freq < 0 (not 0.0, not -0.0), as "
        "(device_id, sensor_freq, seconds after 10:00:00, partitionKey).",
    )


def _is_clock(value) -> bool:
    return isinstance(value, str) and len(value) == 8 and value[2] == value[5] == ":"


#: The shape of DIAGNOSIS_7_5.
DIAGNOSIS_7_5_FIELDS = {
    "alerts": diagnosis_field("how many alerts the two runs wrote, an int", is_int),
    "dropped_in": diagnosis_field(
        "the id of the micro-batch that dropped rows as too late, an int", is_int
    ),
    "watermark": diagnosis_field(
        "the watermark that micro-batch ran with, as 'HH:MM:SS'", _is_clock
    ),
    "late_rows": diagnosis_field("how many rows it dropped so, an int", is_int),
}


ALERTS_DIAGNOSIS_HINT = (
    "Read the found version's runs in the notebook: count the rows of its sink, then find, in "
    "the runs' recentProgress, the report whose state operator has numRowsDroppedByWatermark "
    "above 0, and read its batchId and eventTime's watermark."
)


def _alert_events_as_found(readings: DataFrame) -> DataFrame:
    """The alerts query as the notebook gives it (alert_events_as_found)."""
    return (
        readings.withWatermark("event_time", "30 seconds")
        .dropDuplicates(["device_id", "event_time"])
        .where(F.col("sensor_freq") < 0)
        .select(
            F.to_json(F.struct("device_id", "sensor_freq", "event_time")).alias("body"),
            F.col("device_id").alias("partitionKey"),
        )
    )


def _what_the_found_alerts_do(spark, root: Path) -> dict:
    """The found alerts over the notebook's two files, one run each, as Spark reports them."""
    folder, output, checkpoint = root / "readings", root / "alerts", root / "checkpoint"
    folder.mkdir(parents=True)
    alerts = _alert_events_as_found(spark.readStream.schema(READING_DDL).json(str(folder)))
    progress = []
    for order, readings in enumerate((NOTEBOOK_RUN_1, NOTEBOOK_RUN_2)):
        deliver_file(folder, f"run-{order}", [reading_line(*r) for r in readings], order=order)
        query = (
            alerts.writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the found alerts to read the notebook's readings")
        progress += query.recentProgress
    dropping = [
        (p["batchId"], p["eventTime"]["watermark"][11:19], dropped)
        for p in progress
        if (dropped := sum(op["numRowsDroppedByWatermark"] for op in p["stateOperators"]))
    ]
    expect_equal(
        len(dropping), 1, "One batch of the found alerts should drop late rows (a course bug)."
    )
    ((batch, watermark, dropped),) = dropping
    return {
        "alerts": spark.read.parquet(str(output)).count(),
        "dropped_in": batch,
        "watermark": watermark,
        "late_rows": dropped,
    }


@exercise("7.5", timeout=180, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_alerts(nb, spark, tmp_path):
    expect_spark_shows(
        expect_answer(
            nb.DIAGNOSIS_7_5, "DIAGNOSIS_7_5", DIAGNOSIS_7_5_FIELDS, hint=ALERTS_DIAGNOSIS_HINT
        ),
        "7.5 the found alerts",
        lambda: _what_the_found_alerts_do(spark, tmp_path / "found"),
        "DIAGNOSIS_7_5 against the found alerts run on the notebook's two files, one run each: "
        "the alerts in its sink, and the one micro-batch whose state operator dropped rows as "
        "too late, with the watermark it ran with and numRowsDroppedByWatermark.",
        hint=ALERTS_DIAGNOSIS_HINT,
        check=__file__,
    )


@exercise(
    "7.5",
    timeout=180,
    part="fix",
    hint=FIX_HINT_7_5,
)
def test_every_anomaly_is_alerted_by_a_query_that_can_run_for_ever(
    nb, spark, tmp_path, checkpoint_dir
):
    folder, output = tmp_path / "readings", tmp_path / "alerts"
    folder.mkdir()
    alerts = alerts_of(nb, spark.readStream.schema(READING_DDL).json(str(folder)))

    def run() -> int:
        query = (
            alerts.writeStream.format("parquet")
            .option("path", str(output))
            .outputMode("append")
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's query over your alerts to read its input")
        last = query.recentProgress[-1] if query.recentProgress else {}
        return sum(op.get("numRowsTotal", 0) for op in last.get("stateOperators", []))

    # Two runs: the first moves any watermark, and its last batch puts it in force for the
    # second, which reads an anomaly from an hour before.
    deliver_file(
        folder,
        "a",
        [
            reading_line("d1", 20, -1.0, 1),
            reading_line("d1", 40, 50.0, 2),
            reading_line("d2", 45, 50.0, 1),
        ],
        order=0,
    )
    kept_first = run()
    deliver_file(folder, "b", [reading_line("d2", -3600, -2.0, 2)], order=1)
    kept_second = run()
    expect_equal(
        decoded(spark.read.parquet(str(output))),
        [("d1", -1.0, 20.0, "d1"), ("d2", -2.0, -3600.0, "d2")],
        "Two runs, the second reading an anomaly from an hour before the first run's: every "
        "anomaly should be alerted, as (device_id, sensor_freq, seconds after 10:00:00, "
        "partitionKey).",
        hint="An anomaly went without an alert: ask which part of your query judges a reading "
        "by its event time, and what it does to one that comes late.",
    )
    expect_that(
        kept_second <= kept_first,
        "What the alerts query keeps between micro-batches grew with the readings it read (the "
        "rows of its state operators, numRowsTotal, after each run): a query that runs for ever "
        "cannot keep more with every reading.",
        expected=f"no more rows after the second run than after the first ({kept_first})",
        actual=f"{kept_second} rows after the second run",
    )
