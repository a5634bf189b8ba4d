"""Checks of exercise 7.8 · The windows to a Delta table.

The diagnosis against the writer as found, played here on the notebook's story and read back
from its progress reports and the Delta table's history; then the fix: each closed window lands
once.
"""

from pathlib import Path

from pyspark.sql import DataFrame
from story_07 import (
    EPOCH,
    at,
    counted_windows,
    diagnosis_field,
    reading_line,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    CheckFailed,
    crash_before_commit,
    deliver_file,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
)


def _samples_table(table: Path) -> list[tuple]:
    """(device, window start in seconds after START, readings) per row of the Delta table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(table)):
        return []
    arrow = DeltaTable(str(table)).to_pyarrow_table()
    starts = arrow["window_start"].cast(pa.timestamp("s", tz="UTC")).cast(pa.int64()).to_pylist()
    return sorted(
        (device, start - EPOCH, events)
        for device, start, events in zip(
            arrow["device_id"].to_pylist(), starts, arrow["events"].to_pylist()
        )
    )


#: The shape of DIAGNOSIS_7_8.
DIAGNOSIS_7_8_FIELDS = {
    "appended": diagnosis_field(
        "a dict {batch id: rows it added}, ints, batches that added none left out",
        lambda v: isinstance(v, dict) and all(is_int(k) and is_int(n) for k, n in v.items()),
    ),
    "replayed": diagnosis_field(
        "a sorted list of the batch ids Spark ran more than once",
        lambda v: isinstance(v, list | tuple) and all(map(is_int, v)),
    ),
    "closing_batch": diagnosis_field(
        "the id of the first batch whose watermark is at or past 10:01:00, an int", is_int
    ),
}


SAMPLES_DIAGNOSIS_HINT = (
    "Read the found writer's runs in the notebook: found_progress holds one report per batch run, "
    "in order, and the table's history one commit per call of the writer, in the same order, "
    "each with num_added_rows in its operationMetrics."
)


#: The notebook's story for 7.8: (file, readings) delivered in order; a crash and a restart after
#: every file but the first.
SAMPLES_STORY = [
    ("a", [("d1", 5, 50.0, 1), ("d1", 25, 50.2, 3)]),
    ("b", [("d1", 15, 50.1, 2)]),
    ("c", [("d1", 125, 50.3, 4)]),
]


def _samples_writer_as_found(samples: DataFrame, table: str):
    """The writer as the notebook gives it (samples_writer_as_found)."""
    from deltalake import write_deltalake

    def append(batch: DataFrame, batch_id: int) -> None:
        write_deltalake(table, batch.toArrow(), mode="append")

    return samples.writeStream.outputMode("update").foreachBatch(append)


def _what_the_found_writer_does(spark, root: Path) -> dict:
    """The found writer on the notebook's story, as its progress reports and its table's
    history show it: each batch run's reports and commits, paired in order."""
    from deltalake import DeltaTable

    folder, table, checkpoint = root / "readings", root / "samples", root / "checkpoint"
    folder.mkdir(parents=True)
    samples = counted_windows(spark, folder)
    progress = []

    def run() -> None:
        query = (
            _samples_writer_as_found(samples, str(table))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the found writer to read the notebook's readings")
        progress.extend(query.recentProgress)

    for order, (name, readings) in enumerate(SAMPLES_STORY):
        deliver_file(folder, name, [reading_line(*r) for r in readings], order)
        run()
        if order > 0:
            crash_before_commit(checkpoint)
            run()
    history = sorted(DeltaTable(str(table)).history(), key=lambda entry: entry["version"])
    expect_equal(
        len(history),
        len(progress),
        "The found writer should commit once per batch run (a course bug if not).",
    )
    appended: dict[int, int] = {}
    for report, commit in zip(progress, history):
        added = int(commit.get("operationMetrics", {}).get("num_added_rows", 0))
        if added:
            appended[report["batchId"]] = appended.get(report["batchId"], 0) + added
    ids = [report["batchId"] for report in progress]
    closes = at(60).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "appended": appended,
        "replayed": sorted({batch for batch in ids if ids.count(batch) > 1}),
        "closing_batch": min(
            report["batchId"]
            for report in progress
            if report["eventTime"].get("watermark", "")[:19] >= closes
        ),
    }


@exercise("7.8", timeout=420, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_writer(nb, spark, tmp_path):
    diagnosis = expect_answer(
        nb.DIAGNOSIS_7_8, "DIAGNOSIS_7_8", DIAGNOSIS_7_8_FIELDS, hint=SAMPLES_DIAGNOSIS_HINT
    )
    expect_spark_shows(
        {**diagnosis, "replayed": sorted(diagnosis["replayed"])},
        "7.8 the found writer",
        lambda: _what_the_found_writer_does(spark, tmp_path / "found"),
        "DIAGNOSIS_7_8 against the found writer played on the notebook's story (three files, a "
        "crash and a restart after the second and after the third): the rows each batch added "
        "to the table, all its runs together; the batches Spark ran more than once; and the "
        "first batch that ran with a watermark at or past 10:01:00.",
        hint=SAMPLES_DIAGNOSIS_HINT,
        check=__file__,
    )


@exercise(
    "7.8",
    timeout=420,
    part="fix",
    hint="Two things go wrong, and your diagnosis found both: for each, ask which line of the "
    "writer decides it, what a batch hands over and what a replayed batch writes.",
)
def test_each_closed_window_lands_once(nb, spark, tmp_path, checkpoint_dir):
    from pyspark.sql.streaming import DataStreamWriter

    folder, table = tmp_path / "readings", tmp_path / "samples"
    folder.mkdir()
    samples = counted_windows(spark, folder)

    def run() -> None:
        writer = nb.samples_writer(samples, str(table))
        if not isinstance(writer, DataStreamWriter):
            raise CheckFailed(
                "samples_writer() should return the DataStreamWriter, not started.",
                expected="a DataStreamWriter",
                actual=type(writer).__name__,
            )
        query = (
            writer.option("checkpointLocation", checkpoint_dir).trigger(availableNow=True).start()
        )
        finish(query, within=240, what="the query your samples_writer() defines to read its input")

    deliver_file(folder, "a", [reading_line("d1", 5, 50.0, 1), reading_line("d1", 25, 50.2, 3)], 0)
    run()
    deliver_file(folder, "b", [reading_line("d1", 15, 50.1, 2)], 1)
    run()
    crash_before_commit(checkpoint_dir)
    run()
    deliver_file(folder, "c", [reading_line("d1", 125, 50.3, 4)], 2)
    run()  # its last batch, run without new data, writes the windows 10:02:05 closes
    crash_before_commit(checkpoint_dir)
    run()
    expect_equal(
        _samples_table(table),
        [("d1", -30, 3), ("d1", 0, 3)],
        "After readings at 10:00:05 and :25, then :15 (its batch run again after a crash), then "
        "10:02:05 (the batch that closes the windows run again after a crash), the table should "
        "hold each closed window once, with all its readings, as (device, window start in "
        "seconds after 10:00:00, readings), and no window that is still open.",
    )
