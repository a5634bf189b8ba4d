"""Checks for lab 02 · Event time, windows and watermarks.

Pure-Python checks first (the progress reader, the checkpoint walker on a folder tree the
check builds), then Spark: batch DataFrames for the window arithmetic, and streams over JSON
files the check writes, run to the end with ``availableNow`` or ``processAllAvailable()``.
Timestamps are compared as the strings Spark prints in UTC, never as Python datetimes
(which ``collect()`` turns into the machine's local time).
"""

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamlab.grading import exercise

SCHEMA = "machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP"
COLUMNS = ["window_start", "window_end", "machine_name", "heartbeats"]
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)


def beat(machine, second, enqueued=None, skew=0):
    """A heartbeat enqueued at START + enqueued (default: second); the machine's clock is
    ``skew`` seconds off."""
    stored = START + timedelta(seconds=second if enqueued is None else enqueued)
    sent = START + timedelta(seconds=second + skew)
    return {
        "machine_name": machine,
        "machine_time": sent.isoformat(),
        "event_time": stored.isoformat(),
    }


def deliver(folder: Path, name: str, beats, order: int = 0) -> None:
    """One JSON file, written atomically; ``order`` fixes the order the file source sees."""
    folder.mkdir(parents=True, exist_ok=True)
    hidden = folder / f".{name}.tmp"
    hidden.write_text("".join(json.dumps(b) + "\n" for b in beats))
    stamp = 1_700_000_000 + order
    os.utime(hidden, (stamp, stamp))
    os.replace(hidden, folder / f"{name}.json")


def stream(spark, folder: Path, **options) -> DataFrame:
    return spark.readStream.schema(SCHEMA).options(**options).json(str(folder))


def hhmmss(second: int) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def table_rows(df: DataFrame, columns=COLUMNS) -> list[tuple]:
    """Rows as tuples, timestamps as UTC strings, sorted."""
    cast = [
        F.col(c).cast("string").alias(c) if c.startswith("window") else F.col(c) for c in columns
    ]
    return sorted(tuple(r) for r in df.select(*cast).collect())


def show(rows) -> str:
    """Window rows the way a person reads them: `m1 [10:00:00, 10:00:10) 3`."""

    def clock(text):
        return text[11:] if isinstance(text, str) and len(text) > 11 else text

    return "; ".join(f"{m} [{clock(a)}, {clock(b)}) {n}" for a, b, m, n in rows) or "nothing"


def returned_dataframe(result, name: str) -> DataFrame:
    assert isinstance(result, DataFrame), (
        f"{name}() should return a DataFrame; it returned {type(result).__name__}. "
        "Build the query and return it, without collecting or starting it."
    )
    return result


def has_columns(df: DataFrame, name: str, columns=COLUMNS) -> None:
    assert df.columns == columns, (
        f"{name}() should return the columns {columns}, in that order; it returned {df.columns}."
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
    query.awaitTermination()
    return table_rows(df.sparkSession.table(name))


def watermark_message(error: AnalysisException, name: str) -> str:
    return (
        f"Spark refused to run {name}() in append mode: it sets no watermark on the "
        'column it groups by. Call .withWatermark("event_time", delay) on the heartbeats '
        f"before the groupBy. (Spark said: {str(error).splitlines()[0][:200]})"
    )


# --- pure Python --------------------------------------------------------------------------


@exercise("2.3")
def test_rows_dropped_sums_every_state_operator(nb):
    progress = {
        "batchId": 4,
        "stateOperators": [
            {"operatorName": "dedupeWithinWatermark", "numRowsDroppedByWatermark": 2},
            {"operatorName": "stateStoreSave", "numRowsDroppedByWatermark": 3},
        ],
    }
    dropped = nb.rows_dropped_by_watermark(progress)
    assert isinstance(dropped, int) and not isinstance(dropped, bool), (
        f"rows_dropped_by_watermark() should return an int; it returned {type(dropped).__name__}."
    )
    assert dropped == 5, (
        f"A report whose two state operators dropped 2 and 3 late rows should give 5; "
        f"rows_dropped_by_watermark() returned {dropped}. Sum over every entry of "
        "progress['stateOperators']."
    )


@exercise("2.3")
def test_rows_dropped_is_zero_for_a_stateless_query(nb):
    for progress in ({"batchId": 0, "stateOperators": []}, {"batchId": 0}):
        dropped = nb.rows_dropped_by_watermark(progress)
        assert dropped == 0, (
            f"A report without state operators ({progress}) dropped nothing; "
            f"rows_dropped_by_watermark() returned {dropped!r}. Use progress.get("
            '"stateOperators", []) for reports that have none.'
        )


def _tree(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")


@exercise("2.6")
def test_state_store_dirs_in_a_checkpoint_tree(nb, tmp_path):
    _tree(
        tmp_path,
        "offsets/0",
        "commits/0",
        "metadata",
        "sources/0/0",
        "state/0/_metadata/metadata",
        "state/0/0/1.changelog",
        "state/0/0/_metadata/schema",
        "state/0/1/1.changelog",
        "state/0/1/2.zip",
        "state/1/_metadata/metadata",
        "state/1/0/1.changelog",
        "state/1/1/",
        "state/1/.1.crc",
    )
    found = nb.state_store_dirs(str(tmp_path))
    assert isinstance(found, list), (
        f"state_store_dirs() should return a list of strings; it returned {type(found).__name__}."
    )
    expected = ["state/0/0", "state/0/1", "state/1/0", "state/1/1"]
    assert found == expected, (
        f"In a checkpoint with two operators of two partitions each, expected {expected}; "
        f"got {found}. Each entry is 'state/<operator>/<partition>' with forward slashes, "
        "_metadata and files left out, sorted."
    )


@exercise("2.6")
def test_state_store_dirs_of_a_stateless_query(nb, tmp_path):
    _tree(tmp_path, "offsets/0", "commits/0", "metadata", "sources/0/0")
    found = nb.state_store_dirs(str(tmp_path))
    assert found == [], (
        f"A checkpoint without a state/ folder has no state stores: expected [], got {found!r}."
    )


# --- Spark: windows -----------------------------------------------------------------------

# Producer 1's clock is 7 s slow: its machine_time falls in other windows than its event_time.
WINDOW_BEATS = [beat("m1", s, skew=-7) for s in (1, 2, 8, 12)] + [
    beat("m2", s) for s in (3, 14, 19)
]


@exercise("2.1")
def test_tumbling_counts_on_a_batch(nb, spark):
    heartbeats = spark.createDataFrame(
        [
            (
                b["machine_name"],
                datetime.fromisoformat(b["machine_time"]),
                datetime.fromisoformat(b["event_time"]),
            )
            for b in WINDOW_BEATS
        ],
        SCHEMA,
    )
    counts = returned_dataframe(nb.tumbling_counts(heartbeats, "10 seconds"), "tumbling_counts")
    has_columns(counts, "tumbling_counts")
    expected = [
        (hhmmss(0), hhmmss(10), "m1", 3),
        (hhmmss(0), hhmmss(10), "m2", 1),
        (hhmmss(10), hhmmss(20), "m1", 1),
        (hhmmss(10), hhmmss(20), "m2", 2),
    ]
    got = table_rows(counts)
    if got != expected and any(row[2] == "m1" and row[3] == 2 for row in got):
        raise AssertionError(
            f"The windows should be built on event_time (when the hub stored the heartbeat), "
            f"not machine_time (the machine's own clock, here 7 s slow). Expected {show(expected)}; "
            f"got {show(got)}."
        )
    assert got == expected, (
        f"Ten-second tumbling windows should give {show(expected)}; got {show(got)}."
    )


@exercise("2.1")
def test_tumbling_counts_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "a", WINDOW_BEATS)
    counts = returned_dataframe(
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
    assert got == expected, (
        f'On a stream, with size "5 seconds", expected {show(expected)}; got {show(got)}. Does the '
        "window use the size argument?"
    )


@exercise("2.2")
def test_sliding_counts_on_a_batch(nb, spark):
    heartbeats = spark.createDataFrame(
        [
            (
                b["machine_name"],
                datetime.fromisoformat(b["machine_time"]),
                datetime.fromisoformat(b["event_time"]),
            )
            for b in WINDOW_BEATS
        ],
        SCHEMA,
    )
    counts = returned_dataframe(
        nb.sliding_counts(heartbeats, "10 seconds", "5 seconds"), "sliding_counts"
    )
    has_columns(counts, "sliding_counts")
    got = table_rows(counts)
    m1 = [row for row in got if row[2] == "m1"]
    expected_m1 = [
        (hhmmss(-5), hhmmss(5), "m1", 2),
        (hhmmss(0), hhmmss(10), "m1", 3),
        (hhmmss(5), hhmmss(15), "m1", 2),
        (hhmmss(10), hhmmss(20), "m1", 1),
    ]
    assert m1 == expected_m1, (
        f"Windows of 10 s sliding every 5 s over m1's heartbeats at event times 1, 2, 8 and "
        f"12 s should give {show(expected_m1)}; got {show(m1)}."
    )
    total = sum(row[3] for row in got)
    assert total == 2 * len(WINDOW_BEATS), (
        f"With windows of 10 s every 5 s each heartbeat counts in exactly two windows, so the "
        f"counts should add up to {2 * len(WINDOW_BEATS)}; they add up to {total}."
    )


@exercise("2.2")
def test_sliding_counts_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "a", [beat("m1", s) for s in range(6)])
    counts = returned_dataframe(
        nb.sliding_counts(stream(spark, folder), "4 seconds", "2 seconds"), "sliding_counts"
    )
    got = run_complete(counts, "check_2_2", checkpoint_dir)
    expected = [(hhmmss(s), hhmmss(s + 4), "m1", n) for s, n in ((-2, 2), (0, 4), (2, 4), (4, 2))]
    assert got == expected, (
        f'On a stream, with size "4 seconds" and slide "2 seconds", expected {show(expected)}; '
        f"got {show(got)}. Are both arguments passed to F.window?"
    )


# --- Spark: watermark ---------------------------------------------------------------------


@exercise("2.3", timeout=90)
def test_final_counts_close_windows_and_drop_late_rows(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "0", [beat("m1", 1), beat("m1", 2), beat("m2", 3)], order=0)
    counts = returned_dataframe(
        nb.final_counts(stream(spark, folder), "10 seconds", "5 seconds"), "final_counts"
    )
    has_columns(counts, "final_counts")
    try:
        query = (
            counts.writeStream.format("memory")
            .queryName("check_2_3")
            .outputMode("append")
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise AssertionError(watermark_message(error, "final_counts")) from None

    def table():
        return table_rows(spark.table("check_2_3"))

    query.processAllAvailable()
    assert table() == [], (
        f"After heartbeats up to 10:00:03 the window [10:00:00, 10:00:10) is still open, so "
        f"append mode should have written nothing; the output holds {show(table())}."
    )
    deliver(folder, "1", [beat("m2", 30)], order=1)
    query.processAllAvailable()
    closed = [(hhmmss(0), hhmmss(10), "m1", 2), (hhmmss(0), hhmmss(10), "m2", 1)]
    assert table() == closed, (
        f"A heartbeat at 10:00:30 moves a 5-second watermark to 10:00:25, which closes the "
        f"window [10:00:00, 10:00:10): expected {show(closed)}; got {show(table())}. Is the watermark on "
        "event_time and its delay the delay argument?"
    )
    deliver(folder, "2", [beat("m1", 3), beat("m2", 31)], order=2)
    query.processAllAvailable()
    assert table() == closed, (
        f"m1's heartbeat from 10:00:03 arrives after its window closed: it should be dropped "
        f"and the output should stay {show(closed)}; it is {show(table())}."
    )
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    assert dropped == 1, (
        f"Spark should report 1 row dropped by the watermark; it reports {dropped}."
    )
    yours = sum(nb.rows_dropped_by_watermark(p) for p in query.recentProgress)
    assert yours == 1, (
        f"Over this query's progress reports rows_dropped_by_watermark() should add up to 1; "
        f"it adds up to {yours}."
    )


# --- Spark: output modes ------------------------------------------------------------------


@exercise("2.4", timeout=90)
def test_live_counts_hold_the_latest_count_per_window(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "a", [beat("m1", 1), beat("m1", 2), beat("m2", 3)], order=0)
    deliver(folder, "b", [beat("m1", 4), beat("m2", 12)], order=1)
    heartbeats = stream(spark, folder, maxFilesPerTrigger=1)  # one file per micro-batch
    counts = (
        heartbeats.groupBy(F.window("event_time", "10 seconds"), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "machine_name",
            "heartbeats",
        )
    )
    try:
        query = nb.start_live_counts(counts, "check_2_4", checkpoint_dir)
    except AnalysisException as error:
        text = str(error)
        if "append" in text.lower():
            raise AssertionError(
                "Spark refused append mode: these counts have no watermark, so no window is "
                "ever final. Pick the mode that rewrites the whole table after every batch."
            ) from None
        raise AssertionError(f"Starting the query failed: {text.splitlines()[0][:300]}") from None
    assert isinstance(query, StreamingQuery), (
        f"start_live_counts() should return the StreamingQuery that .start() gives; it returned "
        f"{type(query).__name__}."
    )
    query.processAllAvailable()
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) == 2, (
        f"Expected two micro-batches with data, one per file; the query ran {len(batches)}. "
        "Start it with the default trigger."
    )
    try:
        table = spark.table("check_2_4")
    except AnalysisException:
        raise AssertionError(
            'No in-memory table named like the table argument: write with .format("memory") '
            "and .queryName(table)."
        ) from None
    got = table_rows(table)
    expected = [
        (hhmmss(0), hhmmss(10), "m1", 3),
        (hhmmss(0), hhmmss(10), "m2", 1),
        (hhmmss(10), hhmmss(20), "m2", 1),
    ]
    keys = [row[:3] for row in got]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    assert not repeated, (
        f"The table holds several rows for the same window and machine ({show(r for r in got if r[:3] in repeated)}): the "
        f"memory sink adds every row a batch emits, and update mode emits a window again each "
        f"time its count changes. Which mode replaces the "
        "whole table after each batch?"
    )
    assert got == expected, f"Expected the table {show(expected)}; got {show(got)}."


# --- Spark: replays -----------------------------------------------------------------------


@exercise("2.5", timeout=90)
def test_replayed_heartbeats_are_dropped(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "a", [beat("m1", 1), beat("m2", 1)], order=0)
    deliver(folder, "b", [beat("m1", 1, enqueued=3), beat("m1", 2, enqueued=4)], order=1)
    unique = returned_dataframe(
        nb.drop_replays(stream(spark, folder, maxFilesPerTrigger=1), "30 seconds"), "drop_replays"
    )
    assert unique.columns == ["machine_name", "machine_time", "event_time"], (
        f"drop_replays() should keep the heartbeats' columns [machine_name, machine_time, "
        f"event_time]; it returned {unique.columns}."
    )
    try:
        query = (
            unique.writeStream.format("memory")
            .queryName("check_2_5")
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise AssertionError(
            "Spark refused the query: dropDuplicatesWithinWatermark needs a watermark. Call "
            '.withWatermark("event_time", delay) first. (Spark said: '
            f"{str(error).splitlines()[0][:200]})"
        ) from None
    query.processAllAvailable()
    rows = spark.table("check_2_5").select(
        "machine_name", F.col("machine_time").cast("string"), F.col("event_time").cast("string")
    )
    got = sorted(tuple(r) for r in rows.collect())
    expected = sorted(
        [("m1", hhmmss(1), hhmmss(1)), ("m2", hhmmss(1), hhmmss(1)), ("m1", hhmmss(2), hhmmss(4))]
    )

    def beats(rows):
        return "; ".join(f"{m} sent {t[11:]} stored {e[11:]}" for m, t, e in rows)

    if len(got) == 4:
        raise AssertionError(
            f"The replay of m1's 10:00:01 heartbeat (same body, stored again at 10:00:03) went "
            f"through: got {beats(got)}. Identify a heartbeat by machine_name and machine_time "
            "only: the replay's event_time differs."
        )
    assert got == expected, f"Expected {beats(expected)}; got {beats(got)}."
    operators = [
        op["operatorName"] for p in query.recentProgress for op in p.get("stateOperators", [])
    ]
    assert "dedupeWithinWatermark" in operators, (
        f"The replays are gone, but not with dropDuplicatesWithinWatermark (the query's state "
        f"operators are {sorted(set(operators))}): dropDuplicates keeps every key forever "
        "unless event_time is part of the key."
    )


# --- Spark: the state store on disk -------------------------------------------------------


@exercise("2.6", timeout=90)
def test_state_store_dirs_of_a_real_query(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver(folder, "a", [beat("m1", 1), beat("m2", 2), beat("m1", 1, enqueued=2)])
    # Two stateful operators: a de-duplication, then a windowed count.
    counts = (
        stream(spark, folder)
        .withWatermark("event_time", "10 seconds")
        .dropDuplicatesWithinWatermark(["machine_name", "machine_time"])
        .groupBy(F.window("event_time", "10 seconds"), "machine_name")
        .count()
    )
    query = (
        counts.writeStream.format("memory")
        .queryName("check_2_6")
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    found = nb.state_store_dirs(checkpoint_dir)
    expected = ["state/0/0", "state/0/1", "state/1/0", "state/1/1"]
    assert found == expected, (
        f"A query with two stateful operators and 2 shuffle partitions has the state stores "
        f"{expected}; state_store_dirs() found {found}."
    )
