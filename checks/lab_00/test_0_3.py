"""Checks of exercise 0.3 · Predict the restart after a crash.

The one-line progress summary, then the restart after a crash, run by the check's own query
on the notebook's input and compared with the learner's prediction.
"""

from pathlib import Path

from streamlab.deadlines import finish
from streamlab.kit import (
    HEARTBEAT_DDL,
    CheckFailed,
    crash_before_commit,
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
    write_heartbeats,
)

PROGRESS = {
    "id": "q",
    "batchId": 3,
    "numInputRows": 120,
    "durationMs": {"addBatch": 50, "triggerExecution": 275},
}


@exercise("0.3")
def test_summary_of_a_progress_report(nb):
    summary = nb.summarise_progress(PROGRESS)
    if not isinstance(summary, str):
        raise CheckFailed(
            f"summarise_progress() should return a str; it returned {type(summary).__name__}."
        )
    expect_equal(summary, "batch 3: 120 rows", "A report of batch 3 that read 120 rows.")
    expect_equal(
        nb.summarise_progress({**PROGRESS, "batchId": 0, "numInputRows": 0}),
        "batch 0: 0 rows",
        "A report of batch 0 that read nothing.",
        hint="Read both numbers from the report; write none of them in.",
    )


def _write(folder: Path, name: str, machines: list[str], seconds: int) -> None:
    """The notebook's write_heartbeats: each machine once a second from 10:00:00."""
    beats = [(m, f"2026-11-22T10:00:{s:02d}+00:00") for s in range(seconds) for m in machines]
    write_heartbeats(folder, name, beats, order=None)


def _reference_run(spark, incoming: Path, output: Path, checkpoint: Path):
    query = (
        spark.readStream.schema(HEARTBEAT_DDL)
        .json(str(incoming))
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="your session's query to read the check's heartbeats")
    return query


def _crash_in_spark(spark, tmp_path: Path) -> dict:
    """The notebook's section 3: two runs, commits/1 lost, a third file, a restart."""
    incoming, output, checkpoint = tmp_path / "in", tmp_path / "out", tmp_path / "ck"
    fleet = ["Producer 1", "Producer 2", "Producer 3"]
    _write(incoming, "part-0", fleet, 2)
    _reference_run(spark, incoming, output, checkpoint)
    _write(incoming, "part-1", fleet[:2], 1)
    _reference_run(spark, incoming, output, checkpoint)
    crash_before_commit(checkpoint)  # commits/1 lost
    _write(incoming, "part-2", fleet, 1)
    restart = _reference_run(spark, incoming, output, checkpoint)
    return {
        "reports": [
            f"batch {p['batchId']}: {p['numInputRows']} rows" for p in restart.recentProgress
        ],
        "rows_in_output": spark.read.parquet(str(output)).count(),
    }


@exercise("0.3", timeout=120)
def test_crash_prediction_matches_spark(nb, spark, tmp_path):
    predicted = expect_keys(
        nb.AFTER_THE_CRASH,
        "AFTER_THE_CRASH",
        ["reports", "rows_in_output"],
        hint="'reports' is a list of summaries and 'rows_in_output' an int.",
    )
    spark_says = spark_facts(
        "0.3 the crash", lambda: _crash_in_spark(spark, tmp_path), check=__file__
    )
    answer = {
        "reports": list(predicted["reports"]),
        "rows_in_output": predicted["rows_in_output"],
    }
    hint = ""
    if answer["reports"][:1] != spark_says["reports"][:1]:
        hint = (
            "Which batch does a restart run first when offsets/1 exists and commits/1 does "
            "not, and what does a file sink do with a batch its _spark_metadata already holds?"
        )
    elif answer["rows_in_output"] != spark_says["rows_in_output"]:
        hint = "Does any row end up in the output twice?"
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what the restart after the crash really reported and wrote.",
        hint=hint,
    )
