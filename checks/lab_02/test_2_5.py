"""Checks of exercise 2.5 · Fix the status board.

The diagnosis against a run here of the first try the notebook gives, on its two deliveries;
then the fix: the board holds the latest count per window.
"""

from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery
from story_02 import (
    beat,
    clock_rows,
    hhmmss,
    ran,
    show,
    stream,
    string_tuples,
    table_rows,
)

from streamlab.deadlines import drain
from streamlab.kit import (
    CheckFailed,
    Field,
    deliver_file,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
    window_bounds,
)


def counts_of(heartbeats: DataFrame) -> DataFrame:
    """2.1's counts, the check's own: ten-second windows per machine, no watermark."""
    return (
        heartbeats.groupBy(F.window("event_time", "10 seconds"), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select(*window_bounds(), "machine_name", "heartbeats")
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


#: The shape of DIAGNOSIS_2_5.
BOARD_FIELDS = {
    "output_rows": Field(
        lambda rows: (
            isinstance(rows, dict) and all(is_int(k) and is_int(v) for k, v in rows.items())
        ),
        "a dict from batch id (an int) to that batch's numOutputRows (an int)",
    ),
    "table_rows": Field(is_int, "the number of rows in the table, an int"),
    "repeated": Field(string_tuples(2), "a list of (machine_name, window_start) tuples of strings"),
}


def _board_diagnosis(answer) -> dict:
    diagnosis = expect_answer(answer, "DIAGNOSIS_2_5", BOARD_FIELDS)
    return {
        **diagnosis,
        "output_rows": dict(diagnosis["output_rows"]),
        "repeated": sorted(map(tuple, diagnosis["repeated"])),
    }


#: What a failed fix of 2.5 is about, whatever the diagnosis said.
BOARD_FIX_HINT = (
    "Weigh the three output modes against what your diagnosis found: which of them makes the "
    "memory sink keep one row per window and machine? Append needs a watermark these counts "
    "do not have."
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
    expect_spark_shows(
        _board_diagnosis(nb.DIAGNOSIS_2_5),
        "2.5 the first try",
        lambda: _board_in_spark(spark, tmp_path / "board", str(tmp_path / "first-try")),
        "DIAGNOSIS_2_5 against a run of the first try over the notebook's two deliveries: each "
        "micro-batch's numOutputRows by batch id (its progress report's sink), the rows its "
        "table holds, and the (machine_name, window_start) it holds more than once.",
        hint="Read first_try.recentProgress batch by batch and count the rows of "
        "spark.table('board_first_try'), rather than reasoning from the code alone.",
        check=__file__,
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
