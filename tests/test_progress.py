"""A progress report reads the same from a Spark Connect client as from a classic session."""

from __future__ import annotations

import json

from streamlab.progress import as_classic
from streamlab.spark_private import read_progress_as_classic

# A report as a Spark Connect server (PySpark 4.3.0) sent it for a file source's first batch of
# 5 rows: no totals, and an empty eventTime and observedMetrics.
FROM_CONNECT = json.loads(
    '{"id": "b4a81d3f-2546-4995-b218-8c9f4b92614d", "runId": "88003aee-4f82-49af-8ff1-872dd414c0f3",'
    ' "name": "probe", "timestamp": "2026-11-28T14:40:07.313Z", "batchId": 0, "batchDuration": 535,'
    ' "durationMs": {"triggerExecution": 534, "addBatch": 210}, "eventTime": {},'
    ' "stateOperators": [], "sources": [{"description": "FileStreamSource[file:/tmp/in]",'
    ' "startOffset": null, "endOffset": "{\\"logOffset\\":0}", "latestOffset": null,'
    ' "numInputRows": 5, "inputRowsPerSecond": 0.0, "processedRowsPerSecond": 9.25,'
    ' "metrics": {}}], "sink": {"description": "MemorySink", "numOutputRows": 5, "metrics": {}},'
    ' "observedMetrics": {}}'
)


def _with_two_sources(first: dict, second: dict) -> dict:
    source = FROM_CONNECT["sources"][0]
    return {**FROM_CONNECT, "sources": [{**source, **first}, {**source, **second}]}


def test_the_totals_go_back_where_a_classic_report_has_them():
    report = as_classic(FROM_CONNECT)
    assert list(report) == [
        "id",
        "runId",
        "name",
        "timestamp",
        "batchId",
        "batchDuration",
        "numInputRows",
        "inputRowsPerSecond",
        "processedRowsPerSecond",
        "durationMs",
        "stateOperators",
        "sources",
        "sink",
    ]
    assert (report["numInputRows"], report["inputRowsPerSecond"]) == (5, 0.0)
    assert report["processedRowsPerSecond"] == 9.25


def test_the_totals_are_sums_over_the_sources_and_a_missing_rate_stays_out():
    both = _with_two_sources({"numInputRows": 3}, {"numInputRows": 4, "inputRowsPerSecond": 2.5})
    assert (as_classic(both)["numInputRows"], as_classic(both)["inputRowsPerSecond"]) == (7, 2.5)
    both["sources"][0].pop("inputRowsPerSecond")  # NaN in Spark, left out of its JSON
    assert "inputRowsPerSecond" not in as_classic(both)
    assert as_classic({**FROM_CONNECT, "numInputRows": 9})["numInputRows"] == 9


def test_a_connect_clients_report_reads_its_rows_once_the_session_is_the_courses():
    from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryProgress

    read_progress_as_classic()
    read_progress_as_classic()  # a second Connect session in the same process
    report = StreamingQueryProgress.fromJson(FROM_CONNECT)
    assert report["numInputRows"] == 5
    assert json.loads(report.json)["numInputRows"] == 5
    assert f"batch {report['batchId']}: {report['numInputRows']} rows" == "batch 0: 5 rows"
    event = QueryProgressEvent.fromJson({"progress": FROM_CONNECT})
    assert event.progress["numInputRows"] == 5
    assert "eventTime" not in json.loads(event.progress.json)
