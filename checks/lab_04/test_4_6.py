"""Checks of exercise 4.6 · Debug: counts that outlive a micro-batch.

The learner's diagnosis of the notebook's found counter against this file's own run of it on
Spark (each progress report's input rows and state rows, the state variables the checkpoint's
metadata lists); then a counter whose counts must outlive a micro-batch, on ``TwsTester`` and
on Spark across micro-batches and a restart.
"""

from __future__ import annotations

import json
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester
from story_04 import (
    _run,
    _write,
)

from streamlab.deadlines import finish
from streamlab.kit import (
    HEARTBEAT_DDL,
    CheckFailed,
    Field,
    exercise,
    expect_answer,
    expect_equal,
    expect_spark_shows,
    is_int,
    is_str,
    list_of,
)

MILESTONE_SCHEMA = "machine_name STRING, heartbeats LONG"


def _milestones(batches: list[dict], every: int) -> list[tuple]:
    """What a right counter emits for ``batches`` (machine -> heartbeats in the batch)."""
    totals: dict = {}
    out = []
    for batch in batches:
        for machine, count in sorted(batch.items()):
            before = totals.get(machine, 0)
            totals[machine] = before + count
            if totals[machine] // every > before // every:
                out.append((machine, totals[machine]))
    return sorted(out)


def _counter(nb, every: int):
    counter = nb.HeartbeatCounter(every=every)
    if not isinstance(counter, StatefulProcessor):
        raise CheckFailed(
            "HeartbeatCounter should be a StatefulProcessor.",
            expected="a StatefulProcessor",
            actual=type(counter).__name__,
        )
    return counter


class MilestoneCounter(StatefulProcessor):
    """The notebook's found counter, as it is given: its counts in a dict on the object."""

    def __init__(self, every: int = 5):
        self.every = every

    def init(self, handle) -> None:
        self.counts = {}

    def handleInputRows(self, key, rows, timerValues):
        before = self.counts.get(key[0], 0)
        after = before + sum(1 for _ in rows)
        self.counts[key[0]] = after
        if after // self.every > before // self.every:
            yield Row(machine_name=key[0], heartbeats=after)


_COUNTS = Field(
    list_of(is_int),
    "a list of ints, one per micro-batch in batch order.",
    expected="a list of ints",
)
#: DIAGNOSIS_4_6's keys and their shapes.
DIAGNOSIS_FIELDS = {
    "input_rows": _COUNTS,
    "state_rows": _COUNTS,
    "state_variables": Field(
        list_of(is_str, (list, tuple, set)),
        "a list of the state variables' names (strings), empty if there are none.",
        expected="a list of strings",
    ),
}


def _diagnosis(answer) -> dict:
    """DIAGNOSIS_4_6 in one shape: lists of ints for the counts, a sorted list of names."""
    answer = expect_answer(answer, "DIAGNOSIS_4_6", DIAGNOSIS_FIELDS)
    return {
        "input_rows": list(answer["input_rows"]),
        "state_rows": list(answer["state_rows"]),
        "state_variables": sorted(answer["state_variables"]),
    }


def _found_counter_shows(spark, folder: Path) -> dict:
    """The notebook's run of MilestoneCounter (3, 3 and 4 heartbeats of m1, one file per
    micro-batch), read back as Spark shows it: each progress report's input rows and state
    rows, and the state variables the checkpoint's metadata lists."""
    incoming, checkpoint = folder / "incoming", folder / "checkpoint"
    for name, count in (("a", 3), ("b", 3), ("c", 4)):
        _write(incoming, name, ["m1"] * count)
    heartbeats = (
        spark.readStream.schema(HEARTBEAT_DDL).option("maxFilesPerTrigger", 1).json(str(incoming))
    )
    counted = heartbeats.groupBy("machine_name").transformWithState(
        MilestoneCounter(every=5), MILESTONE_SCHEMA, "Append", "None"
    )
    query = (
        counted.writeStream.format("parquet")
        .option("path", str(folder / "output"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's run of MilestoneCounter")
    reports = sorted(query.recentProgress, key=lambda p: p["batchId"])
    variables = []
    for operator in spark.read.format("state-metadata").load(str(checkpoint)).collect():
        properties = json.loads(operator.operatorProperties or "{}")
        variables += [v["stateName"] for v in properties.get("stateVariables", [])]
    return {
        "input_rows": [p["numInputRows"] for p in reports],
        "state_rows": [p["stateOperators"][0]["numRowsTotal"] for p in reports],
        "state_variables": sorted(variables),
    }


#: What a failed fix of 4.6 is about, whatever the diagnosis said.
FIX_HINT_4_6 = (
    "Compare where the counter keeps its counts with what section 3 says about init: how long "
    "does a processor object live on Spark, and how long in TwsTester?"
)


@exercise("4.6", timeout=240, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_counter(nb, spark, tmp_path):
    expect_spark_shows(
        _diagnosis(nb.DIAGNOSIS_4_6),
        "4.6 the found counter",
        lambda: _found_counter_shows(spark, tmp_path / "found"),
        "DIAGNOSIS_4_6 against a run of MilestoneCounter on Spark over 3, 3 and 4 heartbeats of "
        "m1, one micro-batch each: the input rows and the rows in the operator's state store "
        "after each micro-batch (its progress reports), and the state variables that the "
        "checkpoint's state-metadata lists.",
        hint="Read found_query.recentProgress (numInputRows, stateOperators[0]['numRowsTotal']) "
        "and the stateVariables of the operatorProperties that state-metadata gives for the "
        "checkpoint, rather than reasoning from the code.",
        check=__file__,
    )


@exercise("4.6", part="fix", hint=FIX_HINT_4_6)
def test_the_counter_counts_in_one_tester(nb):
    batches = [{"m1": 3, "m2": 6}, {"m1": 3}, {"m1": 4, "m2": 1}, {"m2": 2}]
    for every in (5, 3):
        # The constructor's default is MilestoneCounter's: every=5.
        tester = TwsTester(_counter(nb, every) if every != 5 else nb.HeartbeatCounter())
        emitted = []
        for batch in batches:
            for machine, count in sorted(batch.items()):
                rows = tester.test(machine, [Row(machine_name=machine, machine_time=None)] * count)
                emitted += [tuple(r) for r in rows]
        expect_equal(
            sorted(emitted),
            _milestones(batches, every),
            f"HeartbeatCounter(every={every}) on TwsTester, batches {batches}: rows as "
            f"(machine_name, heartbeats).",
        )


@exercise("4.6", timeout=240, part="fix", hint=FIX_HINT_4_6)
def test_the_counts_outlive_micro_batches_and_restarts(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"

    def run(every: int):
        heartbeats = (
            spark.readStream.schema(HEARTBEAT_DDL)
            .option("maxFilesPerTrigger", 1)
            .json(str(incoming))
        )
        frame = heartbeats.groupBy("machine_name").transformWithState(
            _counter(nb, every), MILESTONE_SCHEMA, "Append", "None"
        )
        return _run(spark, frame, output, checkpoint_dir, "HeartbeatCounter")

    _write(incoming, "a", ["m1"] * 3 + ["m2"] * 6)
    _write(incoming, "b", ["m1"] * 3)
    run(5)  # two micro-batches
    _write(incoming, "c", ["m1"] * 4 + ["m2"])
    rows = run(5)  # a restart on the same checkpoint
    expect_equal(
        sorted(tuple(r) for r in rows),
        _milestones([{"m1": 3, "m2": 6}, {"m1": 3}, {"m1": 4, "m2": 1}], 5),
        "HeartbeatCounter(every=5) on Spark: m1 sends 3, 3 and 4 heartbeats in three "
        "micro-batches, m2 6 and then 1; the third batch runs after a restart on the same "
        "checkpoint. Rows as (machine_name, heartbeats).",
        hint="The counts do not carry from one micro-batch to the next as Spark runs them: "
        "ask how long a processor object lives on Spark, and where Spark keeps what must "
        "outlive a batch and a restart.",
    )
