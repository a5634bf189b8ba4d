"""Checks of exercise 6.3 · Predict what the commits leave.

PREDICTED_FILES against the files Spark commits on the same input: two batches in snapshot
mode, a restart, two in changelog mode.
"""

from __future__ import annotations

from pathlib import Path

from story_06 import (
    CHANGELOG,
    _as_spark_did,
    _heartbeats,
    _listing,
    _prediction,
    _run,
)

from streamlab.kit import (
    exercise,
    expect_equal,
)


def _files_spark_writes(spark, tmp_path: Path) -> dict:
    """Two batches in snapshot mode, a restart, two in changelog mode: each partition's files."""
    incoming, checkpoint = tmp_path / "incoming", tmp_path / "checkpoint"
    partition_of_3 = spark.range(1).selectExpr("pmod(hash('machine-3'), 2) AS p").first()["p"]
    expect_equal(
        partition_of_3, 1, "machine-3's key should be in partition 1 (a course bug if not)."
    )
    files = (("a", range(1, 7)), ("b", (1, 4)), ("c", (3,)), ("d", (3,)))
    for order, (name, machines) in enumerate(files[:2]):
        _heartbeats(incoming, name, [f"machine-{m}" for m in machines], order)
    _run(spark, incoming, checkpoint, "lab06_predict_1", {CHANGELOG: "false"})
    for order, (name, machines) in enumerate(files[2:], start=2):
        _heartbeats(incoming, name, [f"machine-{m}" for m in machines], order)
    _run(spark, incoming, checkpoint, "lab06_predict_2", {CHANGELOG: "true"})
    return {p: _listing(checkpoint, 0, p) for p in (0, 1)}


@exercise("6.3", timeout=180)
def test_the_predicted_files_are_what_spark_writes(nb, spark, tmp_path):
    predicted = _prediction(
        nb.PREDICTED_FILES, "PREDICTED_FILES", (0, 1), "each a list of (version, kind) pairs"
    )
    _as_spark_did(
        predicted,
        "6.3 the files",
        lambda: _files_spark_writes(spark, tmp_path),
        __file__,
        "Two batches in snapshot mode, then a restart on the same checkpoint with two batches "
        "in changelog mode: PREDICTED_FILES should be what state_files lists for each "
        "partition (expected: what Spark wrote on the same input).",
        hint="Set your lists beside the batches of both runs: which batch makes each version, "
        "whether a partition without rows in a batch commits, and what decides the kind of "
        "file each commit writes.",
    )
