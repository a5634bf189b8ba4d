"""Checks of exercise 4.5 · Predict: rows or timers first.

The prediction against what ``TwsTester`` emits, then against what a Spark micro-batch emits
with the course's processor, run with ``trigger(availableNow=True)`` on the RocksDB state store.
"""

from __future__ import annotations

from pyspark.sql import Row
from pyspark.sql.streaming.tws_tester import TwsTester
from story_04 import (
    _run,
    _write,
)

from streamlab.kit import (
    HEARTBEAT_DDL,
    TRANSITION_DDL,
    CheckFailed,
    ReferenceHeartbeatProcessor,
    exercise,
    expect_equal,
    spark_facts,
)


def _pairs(value, name: str) -> list[tuple]:
    """The learner's prediction as a list of (previous_status, status) tuples."""
    try:
        pairs = [tuple(pair) for pair in value]
    except TypeError:
        pairs = None
    if pairs is None or not all(len(p) == 2 for p in pairs):
        raise CheckFailed(
            f"{name} should be a list of (previous_status, status) pairs, e.g. "
            f"[(INITIALIZING, HEALTHY)].",
            expected="a list of pairs",
            actual=repr(value),
        )
    return pairs


@exercise("4.5")
def test_what_twstester_emits(nb):
    tester = TwsTester(ReferenceHeartbeatProcessor(timeout_ms=5_000), timeMode="ProcessingTime")
    beat = [Row(machine_name="m1", machine_time=None)]
    tester.test("m1", beat)
    rows = tester.setProcessingTime(5_000) + tester.test("m1", beat)
    expect_equal(
        _pairs(nb.TWSTESTER_EMITS, "TWSTESTER_EMITS"),
        [(r.previous_status, r.status) for r in rows],
        "TWSTESTER_EMITS: what setProcessingTime(5000) and then test('m1', beat) emit, as "
        "(previous_status, status), for a machine that beat once at 0 ms (timeout 5000 ms).",
        hint="Read the two calls as two steps of their own: what can each return by itself, "
        "given what the processor has seen before it?",
    )


@exercise("4.5", timeout=180)
def test_what_spark_emits(nb, spark, tmp_path, checkpoint_dir):
    predicted = _pairs(nb.SPARK_EMITS, "SPARK_EMITS")
    incoming, output = tmp_path / "incoming", tmp_path / "output"

    def run() -> list[Row]:
        heartbeats = spark.readStream.schema(HEARTBEAT_DDL).json(str(incoming))
        # 1 ms: the deadline has passed by the next batch, whatever the wall clock says.
        frame = heartbeats.groupBy("machine_name").transformWithState(
            ReferenceHeartbeatProcessor(timeout_ms=1), TRANSITION_DDL, "Append", "ProcessingTime"
        )
        return _run(spark, frame, output, checkpoint_dir, "the reference processor")

    def measure() -> list[tuple]:
        _write(incoming, "first", ["m1"])
        first = {tuple(r) for r in run()}
        _write(incoming, "second", ["m1"])
        second = sorted(
            (r for r in run() if tuple(r) not in first), key=lambda r: r.last_status_change_time
        )
        return [(r.previous_status, r.status) for r in second]

    expect_equal(
        predicted,
        spark_facts("4.5 what Spark emits", measure, check=__file__),
        "SPARK_EMITS: what a Spark micro-batch emits, as (previous_status, status), when m1's "
        "second heartbeat arrives in the first batch after its deadline.",
        hint="In a Spark micro-batch every key's rows are handled before any timer fires.",
    )
