"""Checks of exercise 10.5 · Predict: what a repartition writes.

The repartition the learner predicts, run by Spark, against the prediction.
"""

from __future__ import annotations

from pathlib import Path

from story_10 import (
    _monitor,
    _source,
    _write,
    _wrong_predictions,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    NO_DATA_BATCHES,
    SparkChanged,
    exercise,
    expect_equal,
    session_conf,
)
from streamlab.restart_trials import (
    batches,
)
from streamlab.spark_private import repartition_state

_REPARTITION: dict = {}


def _repartition_facts(spark, root: Path) -> dict:
    """A file-sink query of the reference pipeline: two batches, a repartition to 4, a restart;
    what the checkpoint and the output say (once per process)."""
    if _REPARTITION:
        return dict(_REPARTITION)
    incoming, checkpoint, output = root / "incoming", root / "checkpoint", root / "output"
    machines = {f"m{n}": str(n % 4) for n in range(8)}

    def run():
        with session_conf(spark, {NO_DATA_BATCHES: "false"}):
            query = (
                _monitor(_source(spark, incoming))
                .writeStream.format("parquet")
                .option("path", str(output))
                .option("checkpointLocation", str(checkpoint))
                .trigger(availableNow=True)
                .start()
            )
        finish(query, within=240, what="the check's query to read its heartbeats")

    for second in (0, 1):
        _write(incoming, [second], machines)
        run()
    try:
        repartition_state(spark, checkpoint, 2)
        same_count_raises = False
    except SparkChanged:
        raise
    except Exception:
        same_count_raises = True
    before = set(batches(checkpoint / "offsets"))
    repartition_state(spark, checkpoint, 4)
    (repartition_batch,) = set(batches(checkpoint / "offsets")) - before
    partitions = spark.read.format("state-metadata").load(str(checkpoint)).first().numPartitions
    before = set(batches(checkpoint / "offsets"))
    _write(incoming, [2], machines)
    run()
    first_after = min(set(batches(checkpoint / "offsets")) - before)
    try:
        spark.read.parquet(str(output)).count()
        readable = True
    except Exception:
        readable = False
    _REPARTITION.update(
        repartition_batch=repartition_batch,
        state_partitions=partitions,
        first_batch_after=first_after,
        same_count_raises=same_count_raises,
        file_sink_readable=readable,
    )
    return dict(_REPARTITION)


REPARTITION_KEYS = (
    "repartition_batch",
    "state_partitions",
    "first_batch_after",
    "same_count_raises",
    "file_sink_readable",
)


@exercise("10.5", timeout=420)
def test_repartition_predictions_match_what_spark_does(nb, spark, tmp_path_factory):
    wrong, spark_did = _wrong_predictions(
        nb,
        "PREDICTED_REPARTITION",
        REPARTITION_KEYS,
        "10.5 repartition",
        lambda: _repartition_facts(spark, tmp_path_factory.mktemp("lab10-repartition")),
        __file__,
    )
    expect_equal(
        wrong,
        spark_did,
        f"Spark ran two batches (0 and 1), repartitioned to 4 and restarted; {len(wrong)} of "
        f"your {len(REPARTITION_KEYS)} predictions differ from what it did. Shown: those.",
        hint="A repartition is a batch of its own, after the newest committed one; the file "
        "sink's log has a file for every batch that wrote output.",
    )
