"""Checks of exercise 5.3 · Predict: three lives of one query.

The prediction against three lives Spark runs with the course's lab 04 processor.
"""

from __future__ import annotations

from pathlib import Path

from story_05 import (
    _lab04_beats,
    _reference_changes,
    _run_to_batches,
    _write,
)

from streamlab.kit import (
    CheckFailed,
    crash_before_commit,
    exercise,
    expect_equal,
    spark_facts,
)


def _lives(value) -> dict:
    if not isinstance(value, dict) or set(value) != {1, 2, 3}:
        raise CheckFailed(
            "AFTER_LIFE should be a dict {1: [...], 2: [...], 3: [...]}.",
            expected="keys 1, 2 and 3",
            actual=repr(value),
        )
    try:
        return {life: sorted(tuple(row) for row in rows) for life, rows in value.items()}
    except TypeError:
        raise CheckFailed(
            "Each life of AFTER_LIFE should be a list of (batch_id, machine_name, "
            "previous_status, status) tuples.",
            expected="lists of 4-tuples",
            actual=repr(value),
        ) from None


@exercise("5.3", timeout=300)
def test_three_lives_of_one_query(nb, spark, tmp_path, checkpoint_dir):
    predicted = _lives(nb.AFTER_LIFE)
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    checkpoint_dir = Path(checkpoint_dir)

    def life() -> list[tuple]:
        _run_to_batches(spark, _reference_changes(spark, incoming, 60_000), checkpoint_dir, output)
        return sorted(
            (r.batch_id, r.machine_name, r.previous_status, r.status)
            for r in spark.read.parquet(str(output)).collect()
        )

    def measure() -> dict:
        lives = {}
        _write(incoming, "a", _lab04_beats(["Producer 1", "Producer 2", "Producer 3"]))
        lives[1] = life()
        _write(incoming, "b", _lab04_beats(["Producer 1", "Producer 2"]))
        lives[2] = life()
        crash_before_commit(checkpoint_dir)
        _write(incoming, "c", _lab04_beats(["Producer 3"]))  # arrives while the query is down
        lives[3] = life()
        return lives

    expect_equal(
        predicted,
        spark_facts("5.3 three lives", measure, check=__file__),
        "AFTER_LIFE: what the output holds after each life, as (batch_id, machine_name, "
        "previous_status, status), as Spark ran the three lives with the course's processor "
        "(c.json, one heartbeat of Producer 3, written after the staged crash).",
        hint="The state outlives a life; batch ids go on counting; a batch planned but not "
        "committed runs again first, with the input its offsets name and the same state, and the "
        "sink replaces its folder; only then does a new file get a batch of its own.",
    )
