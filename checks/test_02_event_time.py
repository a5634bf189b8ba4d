"""Checks for lab 02 · Event time, windows and watermarks.

Pure-Python checks first (the progress reader, the checkpoint walker on a folder tree the
check builds), then Spark: batch DataFrames for the window arithmetic, and streams over JSON
files the check writes, run to the end with ``availableNow`` or ``processAllAvailable()``.
The predictions (2.2, 2.4) are compared with what Spark does on the notebook's input, run
here with the check's own queries; so are the diagnoses of the debug exercises (2.5, 2.6), from
a run here of the query the notebook gives, before their fixes are graded. Timestamps are compared as the strings Spark prints in
UTC, never as Python datetimes (which ``collect()`` turns into the machine's local time).
"""

from datetime import datetime, timedelta
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamlab.deadlines import drain, finish
from streamlab.grading import (
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
)
from streamlab.grading.facts import spark_facts
from streamlab.kit.stories import START, deliver_file

SCHEMA = "machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP"
COLUMNS = ["window_start", "window_end", "machine_name", "heartbeats"]


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


def stream(spark, folder: Path, **options) -> DataFrame:
    return spark.readStream.schema(SCHEMA).options(**options).json(str(folder))


def batch(spark, beats) -> DataFrame:
    return spark.createDataFrame(
        [
            (
                b["machine_name"],
                datetime.fromisoformat(b["machine_time"]),
                datetime.fromisoformat(b["event_time"]),
            )
            for b in beats
        ],
        SCHEMA,
    )


def hhmmss(second: int) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def table_rows(df: DataFrame, columns=COLUMNS) -> list[tuple]:
    """Rows as tuples, timestamps as UTC strings, sorted."""
    cast = [
        F.col(c).cast("string").alias(c) if c.startswith("window") else F.col(c) for c in columns
    ]
    return sorted(tuple(r) for r in df.select(*cast).collect())


def clock_rows(df: DataFrame) -> list[tuple]:
    """Rows as sorted tuples, timestamps as "HH:MM:SS" (the notebook's clock_rows)."""
    shown = [
        F.date_format(c, "HH:mm:ss").alias(c) if t == "timestamp" else F.col(c)
        for c, t in df.dtypes
    ]
    return sorted(tuple(row) for row in df.select(*shown).collect())


def show(rows) -> str:
    """Window rows the way a person reads them: `m1 [10:00:00, 10:00:10) 3`."""

    def clock(text):
        return text[11:] if isinstance(text, str) and len(text) > 11 else text

    return "\n".join(f"{m} [{clock(a)}, {clock(b)}) {n}" for a, b, m, n in rows) or "nothing"


def run_complete(df: DataFrame, name: str, checkpoint_dir: str) -> list[tuple]:
    query = (
        df.writeStream.format("memory")
        .queryName(name)
        .outputMode("complete")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's windowed query to read its input")
    return table_rows(df.sparkSession.table(name))


def start_append(counts: DataFrame, name: str, checkpoint_dir: str) -> StreamingQuery:
    """final_counts() run in append mode to the memory sink, or a sentence why Spark refused."""
    try:
        return (
            counts.writeStream.format("memory")
            .queryName(name)
            .outputMode("append")
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise CheckFailed(
            "Spark refused to run final_counts() in append mode: it sets no watermark on the "
            "column it groups by, so no window is ever final. (Spark said: "
            f"{str(error).splitlines()[0][:200]})",
            hint="withWatermark goes on the heartbeats, before the groupBy, on the column "
            "the windows are built on.",
        ) from None


def reference_final_counts(heartbeats, size="10 seconds", delay="5 seconds"):
    """What 2.3 asks for: the check's own, so 2.4 and 2.8 do not depend on the learner's."""
    return (
        heartbeats.withWatermark("event_time", delay)
        .groupBy(F.window("event_time", size), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "machine_name",
            "heartbeats",
        )
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
    if not isinstance(dropped, int) or isinstance(dropped, bool):
        raise CheckFailed(
            f"rows_dropped_by_watermark() should return an int; it returned "
            f"{type(dropped).__name__}."
        )
    expect_equal(
        dropped,
        5,
        "A report whose two state operators dropped 2 and 3 late rows dropped 5 in all.",
        hint="Add up the counter of every entry of progress['stateOperators'], not only the "
        "first or the last.",
    )


@exercise("2.3")
def test_rows_dropped_is_zero_for_a_stateless_query(nb):
    for progress in ({"batchId": 0, "stateOperators": []}, {"batchId": 0}):
        expect_equal(
            nb.rows_dropped_by_watermark(progress),
            0,
            f"A report without state operators dropped nothing: {progress}.",
            hint="A stateless query's report may have no stateOperators key at all: read it "
            "with a default.",
        )


def _tree(root: Path, *paths: str) -> None:
    for path in paths:
        target = root / path
        if path.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text("x")


@exercise("2.7")
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
        "state/0/1/SSTs/000008.sst",
        "state/1/_metadata/metadata",
        "state/1/0/1.changelog",
        "state/1/1/",
        "state/1/.1.crc",
    )
    found = nb.state_store_dirs(str(tmp_path))
    if not isinstance(found, list):
        raise CheckFailed(
            f"state_store_dirs() should return a list of strings; it returned "
            f"{type(found).__name__}."
        )
    expect_equal(
        found,
        ["state/0/0", "state/0/1", "state/1/0", "state/1/1"],
        "A checkpoint with two operators of two partitions each has these stores: "
        "'state/<operator>/<partition>' with forward slashes, _metadata, SSTs and files left out.",
    )


@exercise("2.7")
def test_state_stores_are_ordered_as_numbers(nb, tmp_path):
    _tree(
        tmp_path,
        "state/0/_metadata/metadata",
        "state/0/2/",
        "state/0/10/",
        "state/0/notes/",
        "state/0/7",  # a file, not a folder
        "state/5",  # a file too
        "state/2/1/",
        "state/10/0/",
        "state/_stateSchema/default/",
    )
    expect_equal(
        nb.state_store_dirs(str(tmp_path)),
        ["state/0/2", "state/0/10", "state/2/1", "state/10/0"],
        "Stores are ordered by operator number, then partition number, as numbers; only "
        "numbered folders are stores.",
        hint="Sorting the strings puts 'state/0/10' before 'state/0/2': sort by the two numbers.",
    )


@exercise("2.7")
def test_state_store_dirs_of_a_stateless_query(nb, tmp_path):
    _tree(tmp_path, "offsets/0", "commits/0", "metadata", "sources/0/0")
    expect_equal(
        nb.state_store_dirs(str(tmp_path)),
        [],
        "A checkpoint without a state/ folder has no state stores.",
    )


# --- Spark: windows -----------------------------------------------------------------------

# Producer 1's clock is 7 s slow: its machine_time falls in other windows than its event_time.
WINDOW_BEATS = [beat("m1", s, skew=-7) for s in (1, 2, 8, 12)] + [
    beat("m2", s) for s in (3, 14, 19)
]


@exercise("2.1", timeout=120)
def test_tumbling_counts_on_a_batch(nb, spark):
    counts = expect_dataframe(
        nb.tumbling_counts(batch(spark, WINDOW_BEATS), "10 seconds"), "tumbling_counts", COLUMNS
    )
    expected = [
        (hhmmss(0), hhmmss(10), "m1", 3),
        (hhmmss(0), hhmmss(10), "m2", 1),
        (hhmmss(10), hhmmss(20), "m1", 1),
        (hhmmss(10), hhmmss(20), "m2", 2),
    ]
    got = table_rows(counts)
    machine_clock = got != expected and any(row[2] == "m1" and row[3] == 2 for row in got)
    expect_equal(
        got,
        expected,
        "Ten-second tumbling windows on event_time, per machine.",
        show=show,
        hint=(
            "The windows follow machine_time, the machine's own clock (here 7 s slow), not "
            "event_time, when the hub stored the heartbeat."
            if machine_clock
            else ""
        ),
    )


@exercise("2.1", timeout=90)
def test_tumbling_counts_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "a", WINDOW_BEATS)
    counts = expect_dataframe(
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
    expect_equal(
        got,
        expected,
        'On a stream, with size "5 seconds".',
        show=show,
        hint="Does the window use the size argument rather than a fixed duration?",
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


# --- Spark: watermark ---------------------------------------------------------------------


@exercise("2.3", timeout=90)
def test_final_counts_close_windows_and_drop_late_rows(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "0", [beat("m1", 1), beat("m1", 2), beat("m2", 3)], order=0)
    counts = expect_dataframe(
        nb.final_counts(stream(spark, folder), "10 seconds", "5 seconds"), "final_counts", COLUMNS
    )
    query = start_append(counts, "check_2_3", checkpoint_dir)

    def table():
        return table_rows(spark.table("check_2_3"))

    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table(),
        [],
        "After heartbeats up to 10:00:03 the window [10:00:00, 10:00:10) is still open, so "
        "append mode writes nothing yet.",
        show=show,
    )
    deliver_file(folder, "1", [beat("m2", 30)], order=1)
    drain(query, within=240, what="the check's query to process the files written so far")
    closed = [(hhmmss(0), hhmmss(10), "m1", 2), (hhmmss(0), hhmmss(10), "m2", 1)]
    expect_equal(
        table(),
        closed,
        "A heartbeat at 10:00:30 moves a 5-second watermark to 10:00:25, which closes "
        "[10:00:00, 10:00:10).",
        show=show,
        hint="Is the watermark on event_time, with the delay argument as its delay?",
    )
    deliver_file(folder, "2", [beat("m1", 3), beat("m2", 31)], order=2)
    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table(),
        closed,
        "m1's heartbeat from 10:00:03 arrives after its window closed: it is dropped and the "
        "output does not change.",
        show=show,
    )
    dropped = sum(
        op.get("numRowsDroppedByWatermark", 0)
        for p in query.recentProgress
        for op in p.get("stateOperators", [])
    )
    expect_equal(dropped, 1, "Spark should report 1 row dropped by the watermark.")
    expect_equal(
        sum(nb.rows_dropped_by_watermark(p) for p in query.recentProgress),
        1,
        "Over this query's progress reports, rows_dropped_by_watermark() should add up to 1.",
    )


@exercise("2.3", timeout=90)
def test_final_counts_use_the_delay_argument(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "0", [beat("m1", 1), beat("m1", 14)], order=0)
    counts = expect_dataframe(
        nb.final_counts(stream(spark, folder), "10 seconds", "2 seconds"), "final_counts"
    )
    query = start_append(counts, "check_2_3_delay", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        table_rows(spark.table("check_2_3_delay")),
        [(hhmmss(0), hhmmss(10), "m1", 1)],
        "With a delay of 2 seconds, a heartbeat at 10:00:14 moves the watermark to 10:00:12 "
        "and closes [10:00:00, 10:00:10).",
        show=show,
        hint="Is the delay argument the watermark's delay, rather than a fixed duration?",
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


# --- Spark: output modes ------------------------------------------------------------------


def ran(query: StreamingQuery) -> list[dict]:
    """The progress reports of micro-batches that ran (not of triggers that found nothing)."""
    return [p for p in query.recentProgress if "addBatch" in p.get("durationMs", {})]


def counts_of(heartbeats: DataFrame) -> DataFrame:
    """2.1's counts, the check's own: ten-second windows per machine, no watermark."""
    return (
        heartbeats.groupBy(F.window("event_time", "10 seconds"), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "machine_name",
            "heartbeats",
        )
    )


#: The notebook's board: two deliveries of (machine, second), read one per micro-batch.
BOARD_STORY = [
    [("Producer 1", 1), ("Producer 1", 2), ("Producer 2", 3)],
    [("Producer 1", 4), ("Producer 2", 12)],
]


def start_live_counts_first_try(counts: DataFrame, table: str, checkpoint_dir: str):
    """The board's first try, as the notebook gives it."""
    return (
        counts.writeStream.format("memory")
        .queryName(table)
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _rows(name: str, value, width: int, what: str) -> list[tuple]:
    """A list of tuples of ``width`` strings, sorted, or a sentence saying what it is."""
    if not isinstance(value, list | tuple) or not all(
        isinstance(r, list | tuple) and len(r) == width and all(isinstance(v, str) for v in r)
        for r in value
    ):
        raise CheckFailed(f"{name} should be a list of {what} tuples of strings; it is {value!r}.")
    return sorted(tuple(r) for r in value)


def _board_diagnosis(answer) -> dict:
    name = "DIAGNOSIS_2_5"
    expect_keys(answer, name, ["output_rows", "table_rows", "repeated"])
    rows = answer["output_rows"]
    if not isinstance(rows, dict) or not all(_is_int(k) and _is_int(v) for k, v in rows.items()):
        raise CheckFailed(
            f"{name}['output_rows'] should be a dict from batch id (an int) to that batch's "
            f"numOutputRows (an int); it is {rows!r}."
        )
    if not _is_int(answer["table_rows"]):
        raise CheckFailed(
            f"{name}['table_rows'] should be the number of rows in the table, an int; it is "
            f"{answer['table_rows']!r}."
        )
    repeated = _rows(f"{name}['repeated']", answer["repeated"], 2, "(machine_name, window_start)")
    return {"output_rows": dict(rows), "table_rows": answer["table_rows"], "repeated": repeated}


#: What a failed fix of 2.5 is about, whatever the diagnosis said.
BOARD_FIX_HINT = (
    "Weigh the three output modes against what your diagnosis found: which of them makes the "
    "memory sink keep one row per window and machine? Append needs a watermark these counts "
    "do not have."
)
#: What a failed fix of 2.6 is about.
REPLAY_FIX_HINT = (
    "Set a replay beside the heartbeat it repeats: which of their columns tell them apart? Then "
    "read, in the documentation of section 5's two operators, when each forgets a key."
)


def _board_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    """The notebook's first try on its two deliveries, and what Spark shows of the run."""
    for number, beats in enumerate(BOARD_STORY):
        deliver_file(folder, str(number), [beat(m, s) for m, s in beats], order=number)
    query = start_live_counts_first_try(
        counts_of(stream(spark, folder, maxFilesPerTrigger=1)),
        "check_2_5_first_try",
        checkpoint_dir,
    )
    drain(query, within=240, what="the check's run of the first try to process its two files")
    query.stop()
    table = clock_rows(spark.table("check_2_5_first_try"))
    windows = [(machine, start) for start, _, machine, _ in table]
    return {
        "output_rows": {p["batchId"]: p["sink"]["numOutputRows"] for p in ran(query)},
        "table_rows": len(table),
        "repeated": sorted({w for w in windows if windows.count(w) > 1}),
    }


@exercise("2.5", timeout=180, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_first_try(nb, spark, tmp_path):
    diagnosis = _board_diagnosis(nb.DIAGNOSIS_2_5)
    spark_shows = spark_facts(
        "2.5 the first try",
        lambda: _board_in_spark(spark, tmp_path / "board", str(tmp_path / "first-try")),
        check=__file__,
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS_2_5 against a run of the first try over the notebook's two deliveries: each "
        "micro-batch's numOutputRows by batch id (its progress report's sink), the rows its "
        "table holds, and the (machine_name, window_start) it holds more than once.",
        hint="Read first_try.recentProgress batch by batch and count the rows of "
        "spark.table('board_first_try'), rather than reasoning from the code alone.",
    )


@exercise("2.5", timeout=180, part="fix", hint=BOARD_FIX_HINT)
def test_live_counts_hold_the_latest_count_per_window(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "a", [beat("m1", 1), beat("m1", 2), beat("m2", 3)], order=0)
    deliver_file(folder, "b", [beat("m1", 4), beat("m2", 12)], order=1)
    counts = counts_of(stream(spark, folder, maxFilesPerTrigger=1))  # one file per micro-batch
    try:
        query = nb.start_live_counts(counts, "check_2_5", checkpoint_dir)
    except AnalysisException as error:
        text = str(error)
        if "append" in text.lower():
            raise CheckFailed(
                "Spark refused append mode: these counts have no watermark, so no window is "
                "ever final, and append mode writes only final rows."
            ) from None
        raise CheckFailed(f"Starting the query failed: {text.splitlines()[0][:300]}") from None
    if not isinstance(query, StreamingQuery):
        raise CheckFailed(
            "start_live_counts() should return the StreamingQuery that .start() gives; it "
            f"returned {type(query).__name__}."
        )
    drain(query, within=240, what="the check's query to process the files written so far")
    expect_equal(
        sorted(p.name for p in Path(checkpoint_dir, "commits").glob("[0-9]*")),
        ["0", "1"],
        "The query should keep its checkpoint in checkpoint_dir, with a commit per batch.",
    )
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    expect_equal(
        len(batches),
        2,
        "Two files, read one per micro-batch, make two micro-batches with data.",
        hint="Start the query with the default trigger: the caller waits for it.",
    )
    try:
        table = spark.table("check_2_5")
    except AnalysisException:
        raise CheckFailed(
            "No in-memory table is named like the table argument: the query should write to "
            "the memory sink under the name it is given."
        ) from None
    got = table_rows(table)
    keys = [row[:3] for row in got]
    repeated = sorted({k for k in keys if keys.count(k) > 1})
    expect_equal(
        got,
        [
            (hhmmss(0), hhmmss(10), "m1", 3),
            (hhmmss(0), hhmmss(10), "m2", 1),
            (hhmmss(10), hhmmss(20), "m2", 1),
        ],
        "After two micro-batches the table holds one row per window and machine, with the "
        "latest count.",
        show=show,
        hint=(
            "The table holds a window twice: weigh each output mode against what your "
            "diagnosis found the sink does with the rows a batch hands it."
            if repeated
            else ""
        ),
    )


# --- Spark: replays -----------------------------------------------------------------------


def _dedup_rows(spark, table: str) -> list[tuple]:
    rows = spark.table(table).select(
        "machine_name", F.col("machine_time").cast("string"), F.col("event_time").cast("string")
    )
    return sorted(tuple(r) for r in rows.collect())


def _beats(rows) -> str:
    return "\n".join(f"{m} sent {t[11:]} stored {e[11:]}" for m, t, e in rows) or "nothing"


def _start_dedup(nb, spark, folder, delay, name, checkpoint_dir) -> StreamingQuery:
    unique = expect_dataframe(
        nb.drop_replays(stream(spark, folder, maxFilesPerTrigger=1), delay), "drop_replays"
    )
    expect_equal(
        unique.columns,
        ["machine_name", "machine_time", "event_time"],
        "drop_replays() should keep the heartbeats' columns.",
    )
    try:
        return (
            unique.writeStream.format("memory")
            .queryName(name)
            .option("checkpointLocation", checkpoint_dir)
            .start()
        )
    except AnalysisException as error:
        raise CheckFailed(
            "Spark refused the query drop_replays() builds. "
            f"(Spark said: {str(error).splitlines()[0][:200]})"
        ) from None


#: The notebook's replays: two deliveries of (machine, second sent, second stored), read in
#: one micro-batch; the second holds a replay of Producer 1's first heartbeat.
REPLAY_STORY = [
    [("Producer 1", 1, 1), ("Producer 2", 1, 1)],
    [("Producer 1", 1, 3), ("Producer 1", 2, 4)],
]


def drop_replays_first_try(heartbeats: DataFrame, delay: str = "30 seconds") -> DataFrame:
    """The de-duplication's first version, as the notebook gives it."""
    return heartbeats.withWatermark("event_time", delay).dropDuplicates(
        ["machine_name", "event_time"]
    )


def _replay_diagnosis(answer) -> dict:
    name = "DIAGNOSIS_2_6"
    expect_keys(answer, name, ["dropped", "through", "state_rows"])
    for key, what in (("dropped", "rows dropped as repeats"), ("state_rows", "keys in the state")):
        if not _is_int(answer[key]):
            raise CheckFailed(
                f"{name}[{key!r}] should be the number of {what}, an int; it is {answer[key]!r}."
            )
    through = _rows(
        f"{name}['through']", answer["through"], 3, "(machine_name, machine_time, event_time)"
    )
    return {"dropped": answer["dropped"], "through": through, "state_rows": answer["state_rows"]}


def _replays_in_spark(spark, folder: Path, checkpoint_dir: str) -> dict:
    """The notebook's first version on its two deliveries, and what Spark shows of the run."""
    for number, beats in enumerate(REPLAY_STORY):
        deliver_file(folder, str(number), [beat(m, s, e) for m, s, e in beats], order=number)
    query = (
        drop_replays_first_try(stream(spark, folder))
        .writeStream.format("memory")
        .queryName("check_2_6_first_try")
        .option("checkpointLocation", checkpoint_dir)
        .start()
    )
    drain(query, within=240, what="the check's run of the first version to process its files")
    query.stop()
    table = sorted(clock_rows(spark.table("check_2_6_first_try")), key=lambda r: (r[2], r[0], r[1]))
    through = [row for i, row in enumerate(table) if any(seen[:2] == row[:2] for seen in table[:i])]
    return {
        "dropped": sum(
            op.get("customMetrics", {}).get("numDroppedDuplicateRows", 0)
            for p in ran(query)
            for op in p.get("stateOperators", [])
        ),
        "through": sorted(through),
        "state_rows": spark.read.format("statestore").load(checkpoint_dir).count(),
    }


@exercise("2.6", timeout=180, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_first_version(nb, spark, tmp_path):
    diagnosis = _replay_diagnosis(nb.DIAGNOSIS_2_6)
    spark_shows = spark_facts(
        "2.6 the first version",
        lambda: _replays_in_spark(spark, tmp_path / "replays", str(tmp_path / "first-try")),
        check=__file__,
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS_2_6 against a run of the first version over the notebook's two deliveries: "
        "the rows its progress reports count as dropped repeats (numDroppedDuplicateRows), the "
        "rows of its table that repeat an earlier row's machine_name and machine_time, and the "
        "keys its state holds after the run (the state reader).",
        hint="Read first_try.recentProgress, the table replays_first_try and the state reader "
        "on its checkpoint, rather than reasoning from the code alone.",
    )


@exercise("2.6", timeout=180, part="fix", hint=REPLAY_FIX_HINT)
def test_replayed_heartbeats_are_dropped(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    replay = beat("m1", 1, enqueued=3)
    # m3's clock runs a minute behind the hub's: its heartbeat is no replay, and on time. It
    # comes a batch after the others, which ran with the watermark they moved.
    behind = beat("m3", -50, enqueued=5)
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 1)], order=0)
    deliver_file(folder, "b", [replay, beat("m1", 2, enqueued=4)], order=1)
    deliver_file(folder, "c", [behind], order=2)
    query = _start_dedup(nb, spark, folder, "30 seconds", "check_2_6", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    got = _dedup_rows(spark, "check_2_6")
    expected = [("m1", hhmmss(1), hhmmss(1)), ("m2", hhmmss(1), hhmmss(1))]
    expected += [("m1", hhmmss(2), hhmmss(4)), ("m3", hhmmss(-50), hhmmss(5))]
    expect_equal(
        got,
        sorted(expected),
        "The replay of m1's 10:00:01 heartbeat (same body, stored again at 10:00:03) is "
        "dropped; every other heartbeat stays, m3's too, whose clock runs a minute behind.",
        show=_beats,
        hint=(
            "The replay went through: set it beside the heartbeat it repeats, and ask which of "
            "their columns your de-duplication compares."
            if ("m1", hhmmss(1), hhmmss(3)) in got
            else "m3's heartbeat is no replay, and the hub stored it on time; only its "
            "machine's clock runs behind."
            if ("m3", hhmmss(-50), hhmmss(5)) not in got
            else ""
        ),
    )


@exercise("2.6", timeout=120, part="fix", hint=REPLAY_FIX_HINT)
def test_the_state_forgets_a_heartbeat_once_past_the_delay(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    # With a delay of 2 s, m2's heartbeat stored at 10:00:10 takes the stream's event time 8 s
    # past the heartbeats stored at 10:00:01 plus the delay: no replay of them can come within
    # the delay any more, and the batches after it may hold only the two latest.
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 1)], order=0)
    deliver_file(folder, "b", [beat("m2", 10)], order=1)
    deliver_file(folder, "c", [beat("m2", 11)], order=2)
    query = _start_dedup(nb, spark, folder, "2 seconds", "check_2_6_delay", checkpoint_dir)
    drain(query, within=240, what="the check's query to process the files written so far")
    reports = ran(query)
    held = sum(op.get("numRowsTotal", 0) for op in reports[-1].get("stateOperators", []))
    expect_that(
        held <= 2,
        "With a delay of 2 seconds, once m2's heartbeat stored at 10:00:10 has been read, the "
        "heartbeats stored at 10:00:01 can have no replay within the delay: the state, after "
        "the last batch, should hold no more than the two heartbeats stored since 10:00:10.",
        expected="at most 2 rows in the state (numRowsTotal over the state operators)",
        actual=f"{held} rows",
        hint="Does the query forget by event time, with the delay argument as its delay?",
    )


# --- Spark: the state store on disk -------------------------------------------------------


@exercise("2.7", timeout=90)
def test_state_store_dirs_of_a_real_query(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    deliver_file(folder, "a", [beat("m1", 1), beat("m2", 2), beat("m1", 1, enqueued=2)])
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
        .queryName("check_2_7")
        .outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your deduplication to read its input")
    expect_equal(
        nb.state_store_dirs(checkpoint_dir),
        ["state/0/0", "state/0/1", "state/1/0", "state/1/1"],
        "A query with two stateful operators and 2 shuffle partitions has four state stores.",
    )


# --- Spark: the learner's test ------------------------------------------------------------


def _by_machine_clock(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(
        heartbeats.withColumn("event_time", F.col("machine_time")), size, delay
    )


def _without_the_delay(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(heartbeats, size, "0 seconds")


def _size_and_delay_swapped(heartbeats, size="10 seconds", delay="5 seconds"):
    return reference_final_counts(heartbeats, delay, size)


def _machines_mixed_up(heartbeats, size="10 seconds", delay="5 seconds"):
    return (
        heartbeats.withWatermark("event_time", delay)
        .groupBy(F.window("event_time", size))
        .agg(F.min("machine_name").alias("machine_name"), F.count("*").alias("heartbeats"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "machine_name",
            "heartbeats",
        )
    )


BROKEN = [
    ("windows by machine_time, the machine's own clock", _by_machine_clock),
    ("ignores delay (a watermark of 0 seconds)", _without_the_delay),
    ("uses size as the delay and delay as the size", _size_and_delay_swapped),
    ("counts every machine of a window together", _machines_mixed_up),
]


class _Watched:
    """Wraps a final_counts: remembers whether it was given a stream."""

    def __init__(self, function):
        self.function = function
        self.calls: list[bool] = []

    def __call__(self, heartbeats, *args, **kwargs):
        self.calls.append(isinstance(heartbeats, DataFrame) and heartbeats.isStreaming)
        return self.function(heartbeats, *args, **kwargs)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:300] if text else ''}"


@exercise("2.8", timeout=240)
def test_your_test_passes_a_right_final_counts(nb, spark, tmp_path):
    right = _Watched(reference_final_counts)
    try:
        nb.test_final_counts(right, spark, str(tmp_path / "right"))
    except NotImplementedError:
        raise
    except AssertionError as failure:
        raise CheckFailed(
            "Your test failed on a right final_counts (the one 2.3 asks for), so it would "
            f"fail a learner who got it right. It said: {_first_line(failure)}",
            hint="Work out the expected table batch by batch: which watermark each batch runs "
            "with, and the one-batch lag of the late-row filter when data batches follow each "
            "other.",
        ) from None
    except Exception as error:
        raise CheckFailed(
            f"Your test raised an error on a right final_counts: {_first_line(error)}"
        ) from None
    expect_equal(
        right.calls[:1],
        [True],
        "Your test should call final_counts on a streaming DataFrame (spark.readStream): a "
        "batch aggregation has no watermark to test.",
    )


@exercise("2.8", timeout=300)
def test_your_test_fails_each_broken_final_counts(nb, spark, tmp_path):
    passed = []
    for number, (flaw, broken) in enumerate(BROKEN):
        try:
            nb.test_final_counts(broken, spark, str(tmp_path / f"broken-{number}"))
        except NotImplementedError:
            raise
        except Exception:  # any failure of the learner's test catches the flaw
            continue
        passed.append(flaw)
    expect_equal(
        passed,
        [],
        "Your test should fail on each broken final_counts; it passed these.",
        hint="Give each flaw input that shows it: two machines in one window, a machine "
        "whose clock is off by enough to change its window, a late heartbeat whose window is "
        "still open, and a size different from the delay.",
    )
