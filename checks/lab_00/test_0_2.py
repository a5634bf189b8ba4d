"""Checks of exercise 0.2 · Run a stream once and return its progress.

The learner's run_once on a folder of JSON heartbeats, run once and then again on the same
checkpoint with a new file.
"""

from pathlib import Path

from streamlab.kit import CheckFailed, exercise, expect_equal, write_heartbeats

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
    write_heartbeats(incoming, "a", FIRST, order=None)
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
    write_heartbeats(incoming, "a", FIRST, order=None)
    _run(nb, spark, incoming, output, checkpoint_dir)
    if not Path(checkpoint_dir, "commits").is_dir():
        raise CheckFailed(
            "There is no commits/ folder in checkpoint_dir: the query should keep its "
            "checkpoint there."
        )
    write_heartbeats(incoming, "b", SECOND, order=None)
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
