"""Checks of exercise 6.2 · Collect state metrics with a listener.

The listener fed with progress reports captured from real queries (PySpark 4.3.0, local[2]),
wrapped in a ``QueryProgressEvent`` exactly as Spark wraps them; then on the reports of a real
query, and registered with the session to hear every batch.
"""

from __future__ import annotations

import json
import time

from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryProgressEvent
from story_06 import (
    _expected,
    _heartbeats,
    _run,
)

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    expect_that,
)

#: The metrics a listener collects by default (the notebook's CUSTOM_METRICS).
CUSTOM_METRICS = (
    "rocksdbCommitCheckpointLatency",
    "rocksdbChangeLogWriterCommitLatencyMs",
    "rocksdbSaveZipFilesLatencyMs",
    "rocksdbSstFileSize",
    "rocksdbPinnedBlocksMemoryUsage",
)


# Progress reports captured from real queries (PySpark 4.3.0, local[2]): custom metrics
# trimmed to a few, everything else as Spark reported it.


def _source(rows):
    return {
        "description": "FileStreamSource[file:/tmp/heartbeats]",
        "startOffset": {"logOffset": 0},
        "endOffset": {"logOffset": 1},
        "latestOffset": None,
        "numInputRows": rows,
        "inputRowsPerSecond": 0.4,
        "processedRowsPerSecond": 2.3,
    }


def _operator(name, total, updated, commit_ms, memory, custom):
    return {
        "operatorName": name,
        "numRowsTotal": total,
        "numRowsUpdated": updated,
        "allUpdatesTimeMs": 90,
        "numRowsRemoved": 0,
        "allRemovalsTimeMs": 0,
        "commitTimeMs": commit_ms,
        "memoryUsedBytes": memory,
        "numRowsDroppedByWatermark": 0,
        "numShufflePartitions": 2,
        "numStateStoreInstances": 2,
        "customMetrics": custom,
    }


def _report(name, batch_id, duration_ms, rows, operators):
    return {
        "id": "07c2bc0a-3ef2-438e-8a93-c39871e0ef64",
        "runId": "cabfdb6d-638b-4a6c-9bc2-97ccf0315ec0",
        "name": name,
        "timestamp": "2026-11-22T08:21:16.300Z",
        "batchId": batch_id,
        "batchDuration": duration_ms,
        "numInputRows": rows,
        "inputRowsPerSecond": 0.4,
        "processedRowsPerSecond": 2.3,
        "durationMs": {
            "addBatch": 836,
            "commitOffsets": 167,
            "getBatch": 14,
            "latestOffset": 149,
            "queryPlanning": 84,
            "triggerExecution": duration_ms,
            "walCommit": 62,
        },
        "stateOperators": operators,
        "sources": [_source(rows)],
        "sink": {"description": "NoopTable", "numOutputRows": rows},
    }


def _on_rocksdb(changelog_commit_ms: int, **more: int) -> dict:
    """A RocksDB operator's custom metrics in the batch below: the same for both operators
    but for the changelog's commit latency and what an operator adds of its own."""
    return {
        "SnapshotLastUploaded.partition_0_default": -1,
        **more,
        "rocksdbChangeLogWriterCommitLatencyMs": changelog_commit_ms,
        "rocksdbCommitCheckpointLatency": 0,
        "rocksdbGetCount": 6,
        "rocksdbPinnedBlocksMemoryUsage": 176,
        "rocksdbPutCount": 3,
        "rocksdbSaveZipFilesLatencyMs": 0,
        "rocksdbSstFileSize": 0,
    }


# dropDuplicates(...).groupBy("machine_name").agg(count) on RocksDB with changelog checkpointing.
ROCKSDB_REPORT = _report(
    "heartbeats",
    1,
    1320,
    3,
    [
        _operator("stateStoreSave", 3, 3, 143, 4272, _on_rocksdb(140)),
        _operator("dedupe", 6, 3, 131, 4272, _on_rocksdb(126, numDroppedDuplicateRows=0)),
    ],
)


# groupBy("machine_name").count() on the HDFS-backed provider.
HDFS_REPORT = _report(
    "on_hdfs",
    1,
    860,
    3,
    [
        _operator(
            "stateStoreSave",
            3,
            3,
            203,
            1976,
            {
                "SnapshotLastUploaded.partition_0_default": -1,
                "loadedMapCacheHitCount": 4,
                "stateOnCurrentVersionSizeBytes": 912,
            },
        ),
    ],
)


# select("machine_name"), unnamed: a stateless query.
STATELESS_REPORT = _report(None, 1, 223, 3, [])


def _event(report: dict) -> QueryProgressEvent:
    # What Spark hands a Python listener: the report parsed into a StreamingQueryProgress.
    return QueryProgressEvent.fromJson({"progress": json.loads(json.dumps(report))})


def _listener(nb, *args, **kwargs):
    listener = nb.StateMetricsListener(*args, **kwargs)
    expect_that(
        isinstance(listener, StreamingQueryListener),
        "StateMetricsListener should be a subclass of StreamingQueryListener, so that "
        "spark.streams.addListener accepts it.",
        expected="a StreamingQueryListener subclass",
        actual=f"class {type(listener).__name__}"
        f"({', '.join(b.__name__ for b in type(listener).__bases__)})",
    )
    return listener


def _feed(listener, *reports) -> list[dict]:
    for report in reports:
        try:
            result = listener.onQueryProgress(_event(report))
        except KeyError as error:
            raise CheckFailed(
                f"onQueryProgress raised KeyError {error} on a batch of the "
                f"{'HDFS-backed' if report is HDFS_REPORT else 'RocksDB'} provider. A provider reports "
                f"only its own custom metrics: read them with op.customMetrics.get(name), which "
                f"gives None for a missing one.",
                expected="a row with None for each metric the provider does not report",
                actual=f"KeyError {error}",
            ) from None
        expect_that(
            result is None,
            "onQueryProgress should append to self.rows and return nothing. (A method that "
            "yields is a generator: Spark would never run it.)",
            expected="None",
            actual=type(result).__name__,
        )
    rows = listener.rows
    if not (isinstance(rows, list) and all(isinstance(r, dict) for r in rows)):
        raise CheckFailed(
            "self.rows should stay a list of dicts, one per state operator per batch.",
            expected="a list of dicts",
            actual=type(rows).__name__
            if not isinstance(rows, list)
            else "a list holding "
            + ", ".join(sorted({type(r).__name__ for r in rows if not isinstance(r, dict)})),
        )
    return rows


def _compare(got: list[dict], expected: list[dict], what: str) -> None:
    """Fail with the rows the listener added against the rows the reports call for."""
    expect_equal(
        got,
        expected,
        f"{what} should add one row per state operator, with exactly the keys of the table "
        f"and the report's values.",
    )


@exercise("6.2")
def test_listener_starts_empty_with_its_custom_metrics(nb):
    listener = _listener(nb)
    expect_equal(listener.rows, [], "A new StateMetricsListener should have no rows yet.")
    expect_equal(
        tuple(listener.custom_metrics),
        CUSTOM_METRICS,
        "By default the listener should collect the metrics in CUSTOM_METRICS. Did you edit the "
        "constructor or the graded-setup cell?",
    )


@exercise("6.2")
def test_one_row_per_state_operator(nb):
    rows = _feed(_listener(nb), ROCKSDB_REPORT)
    _compare(
        rows,
        _expected(ROCKSDB_REPORT, CUSTOM_METRICS),
        "A batch of a query with two state operators (dedupe, then an aggregation)",
    )


@exercise("6.2")
def test_custom_metrics_come_from_the_constructor(nb):
    custom = ["rocksdbPutCount", "rocksdbGetCount"]
    rows = _feed(_listener(nb, custom_metrics=custom), ROCKSDB_REPORT)
    _compare(
        rows,
        _expected(ROCKSDB_REPORT, custom),
        "A listener built with custom_metrics=['rocksdbPutCount', 'rocksdbGetCount']",
    )


@exercise("6.2")
def test_a_metric_the_provider_does_not_report_is_none(nb):
    rows = _feed(_listener(nb), HDFS_REPORT)
    _compare(
        rows,
        _expected(HDFS_REPORT, CUSTOM_METRICS),
        "A batch on the HDFS-backed provider (no rocksdb... metrics: each should be None)",
    )


@exercise("6.2")
def test_a_stateless_batch_adds_no_row_and_rows_accumulate(nb):
    listener = _listener(nb)
    rows = _feed(listener, STATELESS_REPORT)
    expect_equal(
        rows,
        [],
        "A batch of a stateless query has no state operators, so it adds no row.",
    )
    rows = _feed(listener, ROCKSDB_REPORT, HDFS_REPORT)
    expect_equal(
        [r.get("query") for r in rows],
        ["heartbeats", "heartbeats", "on_hdfs"],
        "Rows should accumulate in self.rows across calls, in the order the batches arrive "
        "(two from the first report, one from the second): the query of each row.",
    )


def _wait_for_listener(spark, listener, query, timeout_s: float = 30.0) -> None:
    """Wait until Spark's listener bus has delivered every event posted so far."""
    try:
        # The bus the progress events travel on; returns once every queue is empty.
        spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(int(timeout_s * 1000))
        return
    except Exception:  # an internal API: if it moves, fall back to a bounded poll
        pass
    last = query.lastProgress["batchId"]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if any(
            isinstance(r, dict) and r.get("query") == query.name and r.get("batch_id") == last
            for r in listener.rows
        ):
            return
        time.sleep(0.1)


@exercise("6.2", timeout=120)
def test_listener_reads_real_progress_reports(nb, spark, tmp_path, checkpoint_dir):
    incoming = tmp_path / "incoming"
    _heartbeats(incoming, "a", ["m1", "m2", "m3"])
    _heartbeats(incoming, "b", ["m1", "m4"])
    query = _run(spark, incoming, checkpoint_dir, "lab06_progress")
    reports = query.recentProgress
    listener = _listener(nb)
    for progress in reports:
        listener.onQueryProgress(QueryProgressEvent(progress=progress))
    expected = [row for p in reports for row in _expected(json.loads(p.json), CUSTOM_METRICS)]
    _compare(listener.rows, expected, f"The {len(reports)} batches of a real query on RocksDB")


@exercise("6.2", timeout=120)
def test_registered_listener_hears_every_batch(nb, spark, tmp_path, checkpoint_dir):
    incoming = tmp_path / "incoming"
    for name, machines in (("a", ["m1", "m2"]), ("b", ["m2", "m3"]), ("c", ["m4"])):
        _heartbeats(incoming, name, machines)
    listener = _listener(nb)
    spark.streams.addListener(listener)
    try:
        query = _run(spark, incoming, checkpoint_dir, "lab06_live")
        _wait_for_listener(spark, listener, query)
    finally:
        spark.streams.removeListener(listener)
    got = [
        (r.get("batch_id"), r.get("rows_total"))
        for r in listener.rows
        if isinstance(r, dict) and r.get("query") == "lab06_live"
    ]
    expected = [(p.batchId, p.stateOperators[0].numRowsTotal) for p in query.recentProgress]
    expect_equal(
        got,
        expected,
        "Registered with spark.streams.addListener, the listener should hear every batch of the "
        "query: (batch_id, rows_total) of each. An exception in onQueryProgress is logged by "
        "Spark, not raised: the checks above show it.",
    )
