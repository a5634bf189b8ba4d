"""streamlab.restart_trials: a restart with a change, on a copy, and what Spark said about it."""

from __future__ import annotations

import json
import time

import pytest
from pyspark.sql import functions as F

from streamlab.deadlines import QueryStalled
from streamlab.restart_trials import (
    IGNORED,
    REFUSED,
    RUNS,
    Trial,
    batches,
    error_class,
    pinned_settings,
    run_available_now,
    try_restart,
)

WRAPPED = (
    "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: "
    "[STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA] Streaming stateful operator name "
    "does not match with the operator in state metadata. This likely to happen when user "
    "adds/removes/changes stateful operator.\nStateful operators in the metadata: [...]. "
    "SQLSTATE: 42K03 SQLSTATE: XXKST\n=== Streaming Query ===\n"
)


def test_the_innermost_error_class_and_its_first_sentence_are_kept():
    assert error_class(RuntimeError(WRAPPED)) == (
        "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA: Streaming stateful operator "
        "name does not match with the operator in state metadata. This likely to happen when "
        "user adds/removes/changes stateful operator."
    )


def test_a_failure_without_a_class_gives_what_the_wrapper_says():
    text = (
        "[STREAM_FAILED] Query [id = 1, runId = 2] terminated with exception: assertion failed: "
        "There are [1] sources in the checkpoint offsets and now there are [2] sources requested "
        "by the query. Cannot continue. SQLSTATE: XXKST\nmore"
    )
    assert error_class(RuntimeError(text)) == (
        "assertion failed: There are [1] sources in the checkpoint offsets and now there are [2] "
        "sources requested by the query. Cannot continue."
    )
    assert error_class(ValueError("plain words\nsecond line")) == "plain words"


def test_an_error_in_a_python_worker_is_named_by_the_jvm_exception_it_reports():
    text = (
        "[STREAM_FAILED] Query [id = 1] terminated with exception: [PYTHON_EXCEPTION] An exception "
        'was thrown from the Python worker: Traceback (most recent call last):\n  File "x.py"\n'
        "pyspark.errors.exceptions.base.PySparkRuntimeError: Error initializing value state: "
        "org.apache.spark.sql.avro.IncompatibleSchemaException: Cannot convert Avro type int to "
        "SQL type STRUCT<a: SMALLINT>.\n"
    )
    assert error_class(RuntimeError(text)) == (
        "IncompatibleSchemaException: Cannot convert Avro type int to SQL type STRUCT<a: SMALLINT>."
    )


def test_an_outcome_says_whether_the_change_took():
    asked = {"spark.sql.shuffle.partitions": "4"}
    assert Trial("x", False, "E: no").outcome == REFUSED
    assert Trial("x", True, pinned={"spark.sql.shuffle.partitions": "2"}, asked=asked).outcome == (
        IGNORED
    )
    assert Trial("x", True, pinned={"spark.sql.shuffle.partitions": "4"}, asked=asked).outcome == (
        RUNS
    )
    assert Trial("x", False, "E: no").error_class == "E"


def test_pinned_settings_come_from_the_newest_plan(tmp_path):
    assert pinned_settings(tmp_path) == {} and batches(tmp_path / "offsets") == []
    for batch, partitions in ((0, "2"), (1, "2"), (10, "5")):
        meta = {"batchWatermarkMs": 0, "conf": {"spark.sql.shuffle.partitions": partitions}}
        (tmp_path / "offsets").mkdir(exist_ok=True)
        (tmp_path / "offsets" / str(batch)).write_text(f"v1\n{json.dumps(meta)}\n{{}}")
        (tmp_path / "offsets" / f".{batch}.crc").write_text("")
    assert batches(tmp_path / "offsets") == [0, 1, 10]
    assert pinned_settings(tmp_path) == {"spark.sql.shuffle.partitions": "5"}


def test_a_trial_restarts_a_copy_and_leaves_the_checkpoint_alone(spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
    incoming.mkdir()
    (incoming / "a.json").write_text('{"k": "a", "v": "x"}\n{"k": "b", "v": "x"}\n')

    def firsts(source):
        return source.dropDuplicates(["k"])

    def source():
        return spark.readStream.schema("k STRING, v STRING").json(str(incoming))

    run_available_now(firsts(source()), checkpoint, output)
    before = sorted(p.name for p in (checkpoint / "offsets").iterdir())
    (incoming / "b.json").write_text('{"k": "c", "v": "y"}\n')

    ignored = try_restart(
        "partitions",
        lambda: firsts(source()),
        checkpoint,
        output,
        tmp_path / "trials",
        conf={"spark.sql.shuffle.partitions": "3"},
    )
    refused = try_restart(
        "dedup", lambda: firsts(source()).dropDuplicates(["v"]), checkpoint, output, tmp_path
    )
    assert (ignored.outcome, ignored.pinned["spark.sql.shuffle.partitions"]) == (IGNORED, "2")
    assert (ignored.folder / "checkpoint" / "offsets" / "1").exists()
    assert refused.outcome == REFUSED
    assert refused.error_class == "STREAMING_STATEFUL_OPERATOR_NOT_MATCH_IN_STATE_METADATA"
    assert sorted(p.name for p in (checkpoint / "offsets").iterdir()) == before
    assert spark.conf.get("spark.sql.shuffle.partitions") == "2"


def test_a_restart_that_stalls_is_stopped_and_reported_not_taken_for_a_refusal(spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
    incoming.mkdir()
    (incoming / "a.json").write_text('{"k": "a", "v": "x"}\n')

    def source():
        return spark.readStream.schema("k STRING, v STRING").json(str(incoming))

    run_available_now(source(), checkpoint, output)
    (incoming / "b.json").write_text('{"k": "b", "v": "y"}\n')
    # A task that never answers, as a stuck Python worker does.
    held = F.udf(lambda v: time.sleep(600) or v, "string")
    with pytest.raises(
        QueryStalled, match="Waited 3 s for the query on checkpoint .* to read its input"
    ):
        try_restart(
            "a stuck task",
            lambda: source().withColumn("v", held("v")),
            checkpoint,
            output,
            tmp_path / "trials",
            within=3,
        )
    assert not spark.streams.active
