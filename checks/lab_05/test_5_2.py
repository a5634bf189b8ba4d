"""Checks of exercise 5.2 · An exactly-once sink.

The diagnosis against this file's own run of the notebook's found sink, as Spark shows its
three lives (the batches the restart's progress reports name, the output's rows per batch id);
then the learner's writer, called with batches built here.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from pyspark.sql import functions as F
from story_05 import (
    STATUS_SCHEMA,
    _lab04_beats,
    _reference_changes,
    _write,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    CheckFailed,
    Field,
    crash_before_commit,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
    list_of,
    start_available,
)


def _frame(spark, machines: list[str], status: str = INITIALIZING):
    return spark.createDataFrame([(m, status, None, START) for m in machines], STATUS_SCHEMA)


def _sunk(spark, output: Path) -> list[tuple]:
    df = spark.read.parquet(str(output))
    if "batch_id" not in df.columns:
        raise CheckFailed(
            "Reading the sink's folder with spark.read.parquet() should give a batch_id column: "
            "name each batch's folder batch_id=<id>.",
            expected="folders batch_id=0, batch_id=1, ...",
            actual=sorted(p.name for p in output.iterdir()),
        )
    return sorted((r.batch_id, r.machine_name, r.status) for r in df.collect())


def _writer(nb, output: Path):
    write = nb.batch_writer(str(output))
    if not callable(write):
        raise CheckFailed(
            "batch_writer(output) should return a function write(batch, batch_id) for "
            "foreachBatch.",
            expected="a function",
            actual=repr(write),
        )
    return write


def _first_writer(output: str):
    """The notebook's found sink, as it is given: each batch's rows added to the folder."""

    def write(batch, batch_id: int) -> None:
        batch.withColumn("batch_id", F.lit(batch_id)).write.mode("append").parquet(output)

    return write


#: DIAGNOSIS_5_2's keys and the shape of each.
DIAGNOSIS_5_2_FIELDS = {
    "third_life_ran": Field(
        list_of(is_int), "the list of the batch ids that life 3 ran.", expected="a list of ints"
    ),
    "rows_per_batch": Field(
        list_of(is_int),
        "a list of ints: the output's rows for batch 0, batch 1, ...",
        expected="a list of ints",
    ),
}


def _diagnosis_5_2(answer) -> dict:
    answer = expect_answer(answer, "DIAGNOSIS_5_2", DIAGNOSIS_5_2_FIELDS)
    return {key: list(value) for key, value in answer.items()}


def _first_lives_show(spark, folder: Path) -> dict:
    """The notebook's three lives through the found sink (a: Producers 1 and 2; b: Producers 1,
    2 and 3; the newest commit deleted before life 3), as Spark shows them: the batches life 3's
    progress reports name, and the output's rows per batch id."""
    incoming, checkpoint, output = folder / "incoming", folder / "checkpoint", folder / "output"
    write = _first_writer(str(output))

    def life():
        writer = (
            _reference_changes(spark, incoming, 60_000)
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
        )
        query = start_available(spark, writer)
        finish(query, within=240, what="the check's run of the found sink")
        return query

    _write(incoming, "a", _lab04_beats(["Producer 1", "Producer 2"]))
    life()
    _write(incoming, "b", _lab04_beats(["Producer 1", "Producer 2", "Producer 3"]))
    life()
    crash_before_commit(checkpoint)
    third = life()
    counts = defaultdict(int)
    for row in spark.read.parquet(str(output)).collect():
        counts[row.batch_id] += 1
    return {
        "third_life_ran": sorted(p["batchId"] for p in third.recentProgress),
        "rows_per_batch": [counts[b] for b in range(max(counts) + 1)],
    }


#: What a failed fix of 5.2 is about, whatever the diagnosis said.
FIX_HINT_5_2 = (
    "When Spark runs a batch again after a crash, what does the writer know about it that it "
    "knew the first time? Use that to find what an earlier attempt left, and replace it "
    "instead of adding to it."
)


@exercise("5.2", timeout=300, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_sink(nb, spark, tmp_path):
    expect_spark_shows(
        _diagnosis_5_2(nb.DIAGNOSIS_5_2),
        "5.2 the found sink",
        lambda: _first_lives_show(spark, tmp_path),
        "DIAGNOSIS_5_2 against three lives of lab 04's query through first_writer, the "
        "newest commits/N deleted before life 3: the batch ids that life 3's progress reports "
        "name, and how many rows the output holds for batch 0, batch 1, ...",
        hint="Read first_lives[2].recentProgress for the batches life 3 ran, and count the "
        "output's rows per batch_id with spark.read.parquet, rather than reasoning from the code.",
        check=__file__,
    )


@exercise("5.2", timeout=120, part="fix", hint=FIX_HINT_5_2)
def test_each_batch_lands_in_its_own_folder(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m3"]), 1)
    expect_equal(
        [
            sorted(p.name for p in output.iterdir() if not p.name.startswith(("_", "."))),
            _sunk(spark, output),
        ],
        [
            ["batch_id=0", "batch_id=1"],
            [(0, "m1", INITIALIZING), (0, "m2", INITIALIZING), (1, "m3", INITIALIZING)],
        ],
        "Two batches written: [the folders readers see, what spark.read.parquet(output) reads "
        "as (batch_id, machine, status)].",
    )


@exercise("5.2", timeout=120, part="fix", hint=FIX_HINT_5_2)
def test_a_retried_batch_replaces_the_first_attempt(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m1"], HEALTHY), 1)
    write(_frame(spark, ["m1", "m2"], HEALTHY), 1)  # batch 1 again, after a crash
    write(_frame(spark, []), 2)  # a batch without transitions
    expect_equal(
        [_sunk(spark, output), (output / "batch_id=2").is_dir()],
        [
            [
                (0, "m1", INITIALIZING),
                (0, "m2", INITIALIZING),
                (1, "m1", HEALTHY),
                (1, "m2", HEALTHY),
            ],
            True,
        ],
        "Batch 0; batch 1 with m1; batch 1 again with m1 and m2; an empty batch 2: [what the "
        "sink reads as (batch_id, machine, status), whether batch_id=2 exists].",
        hint="A second attempt replaces the first: only its rows may remain under batch_id=1. "
        "An empty batch still gets its folder.",
    )
