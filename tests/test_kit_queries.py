"""The kit starts a check's query to read its input and stop, processing-time timers or not."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator

from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle

from streamlab.deadlines import finish
from streamlab.kit import NO_DATA_BATCHES, start_available

# Spark's Python workers cannot import this module: they receive its processor by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])


class _Waiting(StatefulProcessor):
    """Every key arms a processing-time timer an hour away and emits its name once."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        self.handle.registerTimer(timerValues.getCurrentProcessingTimeInMs() + 3_600_000)
        yield Row(machine_name=key[0])


def test_a_query_with_processing_time_timers_reads_its_input_and_stops(spark, tmp_path):
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    (incoming / "a.json").write_text(
        "".join(json.dumps({"machine_name": m}) + "\n" for m in ("m1", "m2", "m1"))
    )
    before = spark.conf.get(NO_DATA_BATCHES, None)
    writer = (
        spark.readStream.schema("machine_name STRING")
        .json(str(incoming))
        .groupBy("machine_name")
        .transformWithState(_Waiting(), "machine_name STRING", "Update", "ProcessingTime")
        .writeStream.format("noop")
        .outputMode("update")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
    )
    query = start_available(spark, writer)
    finish(query, within=120, what="a query with timers an hour away to read its input")
    assert not query.isActive
    assert [p.numInputRows for p in query.recentProgress] == [3]
    assert spark.conf.get(NO_DATA_BATCHES, None) == before
