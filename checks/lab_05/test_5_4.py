"""Checks of exercise 5.4 · The state data source.

The learner's readers on a checkpoint of the course's lab 04 processor.
"""

from __future__ import annotations

import json

from story_05 import (
    _lab04_beats,
    _reference_changes,
    _run_to_parquet,
    _write,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    exercise,
    expect_dataframe,
    expect_equal,
)

_STATE_CHECKPOINT: dict = {}


def _state_checkpoint(spark, tmp_path_factory) -> tuple[str, int, int]:
    """A reference query's checkpoint: run 1 sees m1 and m2; run 2 sees m1 and m3, and m2's
    1 ms timeout has passed. Returns the path and both batches' processing times."""
    if "path" not in _STATE_CHECKPOINT:
        root = tmp_path_factory.mktemp("lab05-state")
        incoming, checkpoint = root / "incoming", root / "checkpoint"
        _write(incoming, "a", _lab04_beats(["m1", "m2"]))
        _run_to_parquet(spark, _reference_changes(spark, incoming, 1), checkpoint, root / "out")
        _write(incoming, "b", _lab04_beats(["m1", "m3"]))
        _run_to_parquet(spark, _reference_changes(spark, incoming, 1), checkpoint, root / "out")
        times = [
            json.loads((checkpoint / "offsets" / str(b)).read_text().splitlines()[1])[
                "batchTimestampMs"
            ]
            for b in (0, 1)
        ]
        _STATE_CHECKPOINT.update(path=str(checkpoint), times=times)
    return _STATE_CHECKPOINT["path"], *_STATE_CHECKPOINT["times"]


#: The columns of each reader's DataFrame.
MACHINE_STATES = ["machine_name", "status", "last_seen_ms"]
MACHINE_TIMERS = ["machine_name", "expires_at_ms"]
STATE_HISTORY = ["batch_id", "change_type", "machine_name", "status"]


def _rows(result, name: str, columns: list[str]) -> list[tuple]:
    """The rows of a reader's DataFrame, sorted, once it has the reader's columns."""
    return sorted(tuple(r) for r in expect_dataframe(result, name, columns).collect())


@exercise("5.4", timeout=300)
def test_state_variables(nb, spark, tmp_path_factory):
    checkpoint, _, _ = _state_checkpoint(spark, tmp_path_factory)
    metadata = spark.read.format("state-metadata").load(checkpoint).first()
    expected = {
        v["stateName"]: v["stateVariableType"]
        for v in json.loads(metadata.operatorProperties)["stateVariables"]
    }
    expect_equal(
        nb.state_variables(spark, checkpoint),
        expected,
        "state_variables() on a checkpoint of lab 04's processor: a value state called machine, "
        "and the processing-time timers under Spark's internal name.",
    )


@exercise("5.4", timeout=300)
def test_machine_states(nb, spark, tmp_path_factory):
    checkpoint, first, second = _state_checkpoint(spark, tmp_path_factory)
    expect_equal(
        _rows(nb.machine_states(spark, checkpoint), "machine_states", MACHINE_STATES),
        [("m1", HEALTHY, second), ("m2", UNHEALTHY, first), ("m3", INITIALIZING, second)],
        "machine_states() after two runs: m2 timed out; last_seen_ms is the processing time of "
        "the batch that last saw each machine.",
    )


@exercise("5.4", timeout=300)
def test_machine_timers(nb, spark, tmp_path_factory):
    checkpoint, first, second = _state_checkpoint(spark, tmp_path_factory)
    expect_equal(
        _rows(nb.machine_timers(spark, checkpoint), "machine_timers", MACHINE_TIMERS),
        [("m1", second + 1), ("m2", first + 3_600_000), ("m3", second + 1)],
        "machine_timers(): the pending timers (m2's is its retirement timer, an hour after it "
        "was last seen).",
    )


@exercise("5.4", timeout=300)
def test_state_history(nb, spark, tmp_path_factory):
    checkpoint, _, _ = _state_checkpoint(spark, tmp_path_factory)
    expected = [
        (0, "update", "m1", INITIALIZING),
        (0, "update", "m2", INITIALIZING),
        (1, "update", "m1", HEALTHY),
        (1, "update", "m2", UNHEALTHY),
        (1, "update", "m3", INITIALIZING),
    ]
    expect_equal(
        [
            _rows(nb.state_history(spark, checkpoint), "state_history", STATE_HISTORY),
            sorted(tuple(r) for r in nb.state_history(spark, checkpoint, 1).collect()),
        ],
        [expected, expected[2:]],
        "[state_history(spark, checkpoint), state_history(spark, checkpoint, 1)]: the change "
        "feed of machine from batch 0, then from batch 1.",
        hint="Pass since_batch as changeStartBatchId.",
    )
