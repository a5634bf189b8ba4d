"""Checks for lab 00 · Orientation.

Pure-Python checks first: the settings a checkpoint pins, read from offsets files written
the way Spark writes them (a version line, the batch's metadata as JSON, one line per
source), and the one-line progress summary. Then Spark: the learner's run_once on a folder
of JSON files, and the restart after a crash, run by the check's own query on the
notebook's input and compared with the learner's prediction.
"""

import json
from pathlib import Path

from streamlab.deadlines import finish
from streamlab.kit import (
    ROCKSDB_PROVIDER,
    STATE_PROVIDER,
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
    write_heartbeats,
)

PARTITIONS = "spark.sql.shuffle.partitions"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
TIME_ZONE = "spark.sql.session.timeZone"


def _offsets(checkpoint: Path, batch: int, conf: dict[str, str]) -> None:
    """offsets/<batch> as Spark writes it, with its hidden checksum beside it."""
    folder = checkpoint / "offsets"
    folder.mkdir(parents=True, exist_ok=True)
    metadata = {"batchWatermarkMs": 0, "batchTimestampMs": 1795000000000 + batch, "conf": conf}
    (folder / str(batch)).write_text(
        "v1\n" + json.dumps(metadata, separators=(",", ":")) + '\n{"logOffset":' + f"{batch}}}"
    )
    (folder / f".{batch}.crc").write_text("crc")


PINNED = {STATE_PROVIDER: ROCKSDB_PROVIDER, PARTITIONS: "2", ENCODING: "unsaferow"}


def _effective(nb, conf, checkpoint) -> dict:
    given = dict(conf)
    result = nb.effective_settings(conf, str(checkpoint))
    if not isinstance(result, dict):
        raise CheckFailed(
            f"effective_settings() should return a dict of settings; it returned "
            f"{type(result).__name__}."
        )
    expect_equal(
        conf,
        given,
        "effective_settings() changed the dict it was given; return a new one instead.",
        hint="Copy conf before you change anything, or build the answer as a new dict.",
    )
    return result


@exercise("0.1")
def test_a_new_checkpoint_runs_with_the_sessions_settings(nb, tmp_path):
    conf = {PARTITIONS: "4", TIME_ZONE: "UTC"}
    expect_equal(
        _effective(nb, conf, tmp_path / "never-started"),
        conf,
        "A checkpoint folder that does not exist pins nothing: the session's settings hold.",
    )
    (tmp_path / "empty" / "offsets").mkdir(parents=True)
    (tmp_path / "empty" / "metadata").write_text('{"id":"q"}')
    expect_equal(
        _effective(nb, conf, tmp_path / "empty"),
        conf,
        "A checkpoint whose query never planned a batch (no offsets/N file) pins nothing.",
    )


@exercise("0.1")
def test_the_checkpoint_wins_over_the_session(nb, tmp_path):
    for batch in range(3):
        _offsets(tmp_path, batch, PINNED)
    conf = {PARTITIONS: "4", TIME_ZONE: "UTC"}
    expect_equal(
        _effective(nb, conf, tmp_path),
        {
            PARTITIONS: "2",
            TIME_ZONE: "UTC",
            STATE_PROVIDER: ROCKSDB_PROVIDER,
            ENCODING: "unsaferow",
        },
        "Every setting the newest offsets file pins replaces or adds to the session's; the "
        "others keep their values.",
        hint="The settings are in the 'conf' of the JSON on the second line of offsets/N.",
    )


@exercise("0.1")
def test_the_newest_offsets_file_is_the_largest_number(nb, tmp_path):
    # Batches 0 to 9 ran with 2 partitions; the checkpoint was then repartitioned offline to
    # 8, which wrote offsets/10 with the new count. "10" sorts before "9" as text.
    for batch in range(10):
        _offsets(tmp_path, batch, PINNED)
    _offsets(tmp_path, 10, {**PINNED, PARTITIONS: "8"})
    (tmp_path / "offsets" / ".11.1a2b3c.tmp").write_text("v1\n{half written")
    expect_equal(
        _effective(nb, {PARTITIONS: "2"}, tmp_path)[PARTITIONS],
        "8",
        "offsets/10 is the newest of offsets/0 to offsets/10; files whose name is not a number "
        "(checksums, temporary files) are not offsets files.",
        hint="Compare the file names as numbers: as text, '9' comes after '10'.",
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


def _heartbeats(folder: Path, name: str, rows: list[tuple[str, str]]) -> None:
    write_heartbeats(folder, name, rows, order=None)


FIRST = [
    ("m1", "2026-11-22T10:00:00Z"),
    ("m2", "2026-11-22T10:00:00Z"),
    ("m1", "2026-11-22T10:00:01Z"),
    ("m2", "2026-11-22T10:00:01Z"),
    ("m3", "2026-11-22T10:00:02Z"),
]
SECOND = [("m1", "2026-11-22T10:00:05Z"), ("m3", "2026-11-22T10:00:05Z")]


def _run(nb, spark, incoming, output, checkpoint_dir):
    progress = nb.run_once(spark, str(incoming), str(output), checkpoint_dir)
    if not isinstance(progress, dict):
        raise CheckFailed(
            f"run_once() should return the query's last progress report (a dict); it returned "
            f"{type(progress).__name__}. Did you forget the return, or return before the query "
            "ended?",
            hint="Start the query, wait until it has ended (a StreamingQuery has a method that "
            "blocks until then), and only then return its last progress report.",
        )
    if spark.streams.active:
        raise CheckFailed(
            "The query is still running after run_once() returned: it should process what is "
            "in the folder, stop by itself, and be waited for.",
            hint="A trigger can process what is in the folder and then stop the query by itself; "
            "wait for that end before you return.",
        )
    return progress


def _output_rows(spark, output):
    if not Path(output, "_spark_metadata").is_dir():
        raise CheckFailed("run_once() wrote no parquet output, by the file sink, in output_dir.")
    return sorted(
        (r.machine_name, r.machine_time.strftime("%H:%M:%S"))
        for r in spark.read.parquet(str(output)).collect()
    )


def _expected(rows):
    return sorted((m, t[11:19]) for m, t in rows)


@exercise("0.2", timeout=120)
def test_run_once_reads_every_heartbeat(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    _heartbeats(incoming, "a", FIRST)
    progress = _run(nb, spark, incoming, output, checkpoint_dir)
    expect_equal(
        _output_rows(spark, output),
        _expected(FIRST),
        "The output should hold the heartbeats of the input, with machine_name and "
        "machine_time parsed.",
    )
    expect_equal(
        progress.get("numInputRows"),
        len(FIRST),
        "The returned report should be of the batch that read the folder's one file.",
    )


@exercise("0.2", timeout=120)
def test_run_once_resumes_from_its_checkpoint(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    _heartbeats(incoming, "a", FIRST)
    _run(nb, spark, incoming, output, checkpoint_dir)
    if not Path(checkpoint_dir, "commits").is_dir():
        raise CheckFailed(
            "There is no commits/ folder in checkpoint_dir: the query should keep its "
            "checkpoint there."
        )
    _heartbeats(incoming, "b", SECOND)
    progress = _run(nb, spark, incoming, output, checkpoint_dir)
    expect_equal(
        (progress.get("batchId"), progress.get("numInputRows")),
        (1, len(SECOND)),
        "A second run on the same checkpoint is batch 1 and reads only the new file: "
        "(batchId, numInputRows).",
    )
    expect_equal(
        _output_rows(spark, output),
        _expected(FIRST + SECOND),
        "After two runs the output should hold every heartbeat exactly once.",
    )


def _write(folder: Path, name: str, machines: list[str], seconds: int) -> None:
    """The notebook's write_heartbeats: each machine once a second from 10:00:00."""
    _heartbeats(
        folder,
        name,
        [(m, f"2026-11-22T10:00:{s:02d}+00:00") for s in range(seconds) for m in machines],
    )


def _reference_run(spark, incoming: Path, output: Path, checkpoint: Path):
    query = (
        spark.readStream.schema("machine_name STRING, machine_time TIMESTAMP")
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
    for name in ("1", ".1.crc"):
        (checkpoint / "commits" / name).unlink()
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
    answer = {"reports": list(predicted["reports"]), "rows_in_output": predicted["rows_in_output"]}
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
