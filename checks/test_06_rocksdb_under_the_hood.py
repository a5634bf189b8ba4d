"""Checks for lab 06 · RocksDB under the hood.

Pure checks first: the listener fed with progress reports captured from real queries (wrapped
in a ``QueryProgressEvent`` exactly as Spark wraps them), the planner on figures given in the
check, and the bucketed processor's two handlers, each driven by ``TwsTester`` on a clock the
check sets, against lab 04's processor, with the other handler taken from the course's
solution so that each exercise is graded on its own. Then Spark checks on generated files with
``trigger(availableNow=True)``, asserting on the session's settings, on what is in the
checkpoint, on the change feed and on the progress reports, never on timings. The predictions
(6.3, 6.8, 6.11) are compared with what Spark does on the same input, computed here, and 6.1's
diagnosis with what the helper as found does to this session's settings. The Spark
UI's state metrics (6.9) are read from an execution its REST API served (``data/``); the alert
rule (6.10) is provoked on hand-made rows and on the rows of a real query.
"""

import json
import math
import random
import re
import time
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming import StreamingQueryListener
from pyspark.sql.streaming.listener import QueryProgressEvent
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    HEARTBEAT_DDL,
    INITIALIZING,
    NO_DATA_BATCHES,
    ROCKSDB_PROVIDER,
    STATE_PROVIDER,
    UNHEALTHY,
    CheckFailed,
    Meter,
    ProcessorStory,
    ReferenceHeartbeatProcessor,
    deliver_file,
    exercise,
    expect_equal,
    expect_keys,
    expect_that,
    session_conf,
    spark_facts,
    status_tuples,
    write_heartbeats,
)
from streamlab.tws_batches import register_timer

CHANGELOG = "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled"
BASE_COLUMNS = (
    "query",
    "batch_id",
    "input_rows",
    "batch_duration_ms",
    "operator",
    "rows_total",
    "rows_updated",
    "memory_used_bytes",
    "commit_time_ms",
)
CUSTOM_METRICS = (
    "rocksdbCommitCheckpointLatency",
    "rocksdbChangeLogWriterCommitLatencyMs",
    "rocksdbSaveZipFilesLatencyMs",
    "rocksdbSstFileSize",
    "rocksdbPinnedBlocksMemoryUsage",
)


def _solution():
    """The course's solution of this lab: the other half of a processor graded in halves."""
    from streamlab.solutions import load_solution

    return load_solution("06")


# --- progress reports captured from real queries (PySpark 4.3.0, local[2]) ---------------
# Custom metrics trimmed to a few; everything else as Spark reported it.


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


# dropDuplicates(...).groupBy("machine_name").agg(count) on RocksDB with changelog checkpointing.
ROCKSDB_REPORT = _report(
    "heartbeats",
    1,
    1320,
    3,
    [
        _operator(
            "stateStoreSave",
            3,
            3,
            143,
            4272,
            {
                "SnapshotLastUploaded.partition_0_default": -1,
                "rocksdbChangeLogWriterCommitLatencyMs": 140,
                "rocksdbCommitCheckpointLatency": 0,
                "rocksdbGetCount": 6,
                "rocksdbPinnedBlocksMemoryUsage": 176,
                "rocksdbPutCount": 3,
                "rocksdbSaveZipFilesLatencyMs": 0,
                "rocksdbSstFileSize": 0,
            },
        ),
        _operator(
            "dedupe",
            6,
            3,
            131,
            4272,
            {
                "SnapshotLastUploaded.partition_0_default": -1,
                "numDroppedDuplicateRows": 0,
                "rocksdbChangeLogWriterCommitLatencyMs": 126,
                "rocksdbCommitCheckpointLatency": 0,
                "rocksdbGetCount": 6,
                "rocksdbPinnedBlocksMemoryUsage": 176,
                "rocksdbPutCount": 3,
                "rocksdbSaveZipFilesLatencyMs": 0,
                "rocksdbSstFileSize": 0,
            },
        ),
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


def _expected(report, custom):
    return [
        {
            "query": report["name"],
            "batch_id": report["batchId"],
            "input_rows": report["numInputRows"],
            "batch_duration_ms": report["batchDuration"],
            "operator": op["operatorName"],
            "rows_total": op["numRowsTotal"],
            "rows_updated": op["numRowsUpdated"],
            "memory_used_bytes": op["memoryUsedBytes"],
            "commit_time_ms": op["commitTimeMs"],
            **{name: op["customMetrics"].get(name) for name in custom},
        }
        for op in report["stateOperators"]
    ]


def _compare(got: list[dict], expected: list[dict], what: str) -> None:
    """Fail with the rows the listener added against the rows the reports call for."""
    expect_equal(
        got,
        expected,
        f"{what} should add one row per state operator, with exactly the keys of the table "
        f"and the report's values.",
    )


# --- 6.2 · the listener ------------------------------------------------------------------


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


# --- 6.4 · the plan ------------------------------------------------------------------------
# Example figures for the function, not measurements of anything.


def _m(nb, partitions, overhead_ms, rows_per_second):
    return nb.Measurement(partitions, overhead_ms, rows_per_second)


def _figures(nb):
    return [_m(nb, 2, 400.0, 10_000.0), _m(nb, 4, 600.0, 16_000.0)]


def _plan(nb, *args, **kwargs):
    return nb.plan_query(*args, **kwargs)


def _same(plan, expected) -> bool:
    if plan is None or expected is None:
        return plan is expected
    if not isinstance(plan, tuple) or len(plan) != 4:
        return False
    return (
        plan[0] == expected[0]
        and plan[1] == expected[1]
        and math.isclose(plan[2], expected[2])
        and math.isclose(plan[3], expected[3])
    )


def _check_plan(nb, expected, why, *args, **kwargs):
    plan = _plan(nb, *args, **kwargs)
    expect_that(
        plan is None or isinstance(plan, tuple),
        "plan_query() should return a Plan (or None).",
        expected="a Plan or None",
        actual=type(plan).__name__,
    )
    shown = ", ".join(
        [
            *(repr(a) if i != 2 else "measurements" for i, a in enumerate(args)),
            *(f"{k}={v!r}" for k, v in kwargs.items()),
        ]
    )
    wanted = None if expected is None else nb.Plan(*expected)
    if not _same(plan, expected):
        raise CheckFailed(
            f"plan_query({shown}) with 2 partitions at 400 ms + 10,000 rows/s and 4 at 600 ms + "
            f"16,000 rows/s: {why}",
            expected=wanted,
            actual=plan,
        )


@exercise("6.4")
def test_the_largest_trigger_that_meets_the_target(nb):
    _check_plan(
        nb,
        (2_000, 2, 600.0, 2_600.0),
        "5000 ms waits too long; at 2000 ms both keep up and the fewest partitions win.",
        1_000,
        3_000,
        _figures(nb),
    )


@exercise("6.4")
def test_keeping_up_and_the_target_are_inclusive(nb):
    _check_plan(
        nb,
        (2_000, 2, 2_000.0, 4_000.0),
        "at 2000 ms, 2 partitions take exactly 2000 ms per batch and reach exactly 4000 ms: "
        "that still counts.",
        8_000,
        4_000,
        _figures(nb),
    )


@exercise("6.4")
def test_more_partitions_when_fewer_cannot_keep_up(nb):
    _check_plan(
        nb,
        (5_000, 4, 4_350.0, 9_350.0),
        "at 10000 ms the latency is too high; at 5000 ms only 4 partitions keep up "
        "(2 would take 6400 ms per batch).",
        12_000,
        12_000,
        _figures(nb),
    )


@exercise("6.4")
def test_no_plan_when_nothing_keeps_up(nb):
    _check_plan(
        nb,
        None,
        "20,000 heartbeats/s is more than either configuration processes.",
        20_000,
        60_000,
        _figures(nb),
    )
    _check_plan(
        nb,
        None,
        "a 500 ms target is out of reach: even the 250 ms trigger needs "
        "425 ms batches, longer than the trigger.",
        1_000,
        500,
        _figures(nb),
    )


@exercise("6.4")
def test_the_order_of_measurements_does_not_matter(nb):
    plan = _plan(nb, 1_000, 3_000, list(reversed(_figures(nb))))
    if not _same(plan, (2_000, 2, 600.0, 2_600.0)):
        raise CheckFailed(
            "With the measurements in the other order (4 partitions first) the answer is the "
            "same: at 2000 ms both keep up and the fewest partitions win.",
            expected=nb.Plan(2_000, 2, 600.0, 2_600.0),
            actual=plan,
        )


@exercise("6.4")
def test_trigger_choices_and_heartbeat_rate_are_parameters(nb):
    _check_plan(
        nb,
        (700, 2, 470.0, 1_170.0),
        "only 300 and 700 ms are allowed here.",
        1_000,
        3_000,
        _figures(nb),
        trigger_choices_ms=(300, 700),
    )
    _check_plan(
        nb,
        (2_000, 2, 2_000.0, 4_000.0),
        "4,000 machines sending 2 heartbeats a second are 8,000 rows a second.",
        4_000,
        4_000,
        _figures(nb),
        heartbeats_per_second=2.0,
    )


@exercise("6.4")
def test_the_plan_is_a_plan(nb):
    plan = _plan(nb, 1_000, 3_000, _figures(nb))
    if not isinstance(plan, nb.Plan):
        raise CheckFailed(
            "plan_query() should return a Plan(trigger_ms, shuffle_partitions, batch_ms, "
            "worst_latency_ms).",
            expected="a Plan",
            actual=f"{type(plan).__name__}: {plan!r}",
        )
    expect_that(
        isinstance(plan.trigger_ms, int) and not isinstance(plan.trigger_ms, bool),
        "Plan.trigger_ms should be one of trigger_choices_ms, an int.",
        expected="an int",
        actual=f"{type(plan.trigger_ms).__name__}: {plan.trigger_ms!r}",
    )


# --- 6.5 and 6.6 · one state value per bucket of machines ---------------------------------


def _strings(value) -> set[str]:
    """Every string inside a state value, however the processor nests it."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        value = [*value.keys(), *value.values()]
    if isinstance(value, (list, tuple)):
        return set().union(*(_strings(v) for v in value)) if value else set()
    return set()


def _with_the_courses(yours, method: str):
    """``yours`` with the course's ``method``: one handler graded at a time."""
    return type(
        yours.__name__, (yours,), {method: getattr(_solution().BucketedHeartbeatProcessor, method)}
    )


def yours_inputs(nb):
    """Your handleInputRows (6.5), with the course's handleExpiredTimer."""
    return _with_the_courses(nb.BucketedHeartbeats, "handleExpiredTimer")


def yours_timer(nb):
    """Your handleExpiredTimer (6.6), with the course's handleInputRows."""
    return _with_the_courses(nb.BucketedHeartbeatProcessor, "handleInputRows")


class Buckets(ProcessorStory):
    """A bucketed processor on a TwsTester: buckets of machines, a clock set by the check."""

    def __init__(self, processor_class, timeout_ms: int = 5_000, retire_after_ms: int = 3_600_000):
        super().__init__(
            processor_class(timeout_ms=timeout_ms, retire_after_ms=retire_after_ms),
            processor_class.__name__,
        )

    def beat(self, *machines: str, bucket: int = 0) -> list[tuple]:
        """One micro-batch of ``bucket`` at the current time: one heartbeat per name given."""
        rows = [
            Row(machine_name=m, machine_time=datetime(2026, 11, 22, tzinfo=UTC)) for m in machines
        ]
        return sorted(self.batch(bucket, rows), key=lambda r: (r[0], r[3], r[1]))

    def at(self, ms: int) -> list[tuple]:
        return sorted(super().at(ms), key=lambda r: (r[0], r[3], r[1]))

    def machines(self, bucket: int = 0) -> set[str]:
        """The machine names the state of ``bucket`` holds."""
        handle = self.tester.handle
        found = set()
        for group in (handle.value_states, handle.list_states, handle.map_states):
            for state in group.values():
                found |= _strings(state.state.get(bucket))
        return found

    def has_state(self, bucket: int = 0) -> bool:
        return super().has_state(bucket)

    def timers(self, bucket: int = 0) -> list[int]:
        return super().timers(bucket)


def _bucket(tester, bucket: int = 0):
    """The bucket's value as plain lists, or None."""
    value = tester.peekValueState("bucket", bucket)
    if value is None:
        return None
    names, statuses, seen, timer = value
    return (list(names), list(statuses), list(seen), timer)


def _said(rows: list[tuple]) -> str:
    if not rows:
        return "nothing"
    return "; ".join(f"{m}: {p} -> {s} at {t} ms" for m, s, p, t in rows)


@exercise("6.5")
def test_bucketed_first_heartbeats_are_initializing(nb):
    fleet = Buckets(yours_inputs(nb))
    fleet.at(1_000)
    rows = fleet.beat("m1", "m2")
    expected = [("m1", INITIALIZING, None, 1_000), ("m2", INITIALIZING, None, 1_000)]
    expect_equal(
        rows,
        expected,
        "The first heartbeats of two new machines of one bucket, at 1000 ms, should emit one "
        "row per machine, named after the machine (not the bucket).",
        show=_said,
    )
    held = fleet.machines()
    expect_that(
        held >= {"m1", "m2"},
        "After that batch the bucket's state should hold both machines.",
        expected="m1 and m2",
        actual=sorted(held),
    )


@exercise("6.5")
def test_bucketed_heartbeats_in_one_batch_count_once(nb):
    fleet = Buckets(yours_inputs(nb))
    fleet.at(1_000)
    rows = fleet.beat("m1", "m2", "m1", "m1", "m2")
    expect_equal(
        [r[:2] for r in rows],
        [("m1", INITIALIZING), ("m2", INITIALIZING)],
        "Three heartbeats of m1 and two of m2 in one micro-batch are one piece of news per "
        "machine: one Initializing row each (machine, status).",
    )
    fleet.at(2_000)
    rows = fleet.beat("m2", "m1", "m2", "m1", "m1")
    expected = [("m1", HEALTHY, INITIALIZING, 2_000), ("m2", HEALTHY, INITIALIZING, 2_000)]
    expect_equal(
        rows,
        expected,
        "The same heartbeats in the next micro-batch should turn both machines Healthy.",
        show=_said,
    )
    fleet.at(3_000)
    rows = fleet.beat("m1", "m2", "m1")
    expect_equal(
        rows,
        [],
        "Healthy machines that send more heartbeats have not changed: emit nothing (at 3000 ms).",
        show=_said,
    )


@exercise("6.6")
def test_bucketed_machines_are_independent(nb):
    fleet = Buckets(yours_timer(nb))
    emitted = []
    for t in range(1_000, 12_000, 1_000):
        emitted += fleet.at(t)
        emitted += fleet.beat(*(["m1", "m2"] if t <= 2_000 else ["m1"]), bucket=0)
        emitted += fleet.beat("m3", bucket=1)
    m1 = [r[1:] for r in emitted if r[0] == "m1"]
    m2 = [r[1:] for r in emitted if r[0] == "m2"]
    m3 = [r[1] for r in emitted if r[0] == "m3"]
    expect_equal(
        m1,
        [(INITIALIZING, None, 1_000), (HEALTHY, INITIALIZING, 2_000)],
        "m1 beats every second and should only go Initializing, then Healthy at 2000 ms. Its "
        "bucket-mate m2 going silent must not change m1.",
        show=lambda rs: _said([("m1", *r) for r in rs]),
    )
    expect_equal(
        m2,
        [
            (INITIALIZING, None, 1_000),
            (HEALTHY, INITIALIZING, 2_000),
            (UNHEALTHY, HEALTHY, 7_000),
        ],
        "m2 beat at 1000 and 2000 ms only, in the same bucket as m1, which kept beating: m2 "
        "should turn Unhealthy at 7000 ms, once.",
        show=lambda rs: _said([("m2", *r) for r in rs]),
    )
    expect_equal(
        m3,
        [INITIALIZING, HEALTHY],
        "m3, alone in another bucket and beating every second, should only go Initializing, "
        "Healthy: the statuses it went through.",
    )


@exercise("6.6")
def test_bucketed_silence_turns_each_machine_unhealthy_once(nb):
    fleet = Buckets(yours_timer(nb))
    fleet.at(1_000)
    fleet.beat("m1", "m2")
    fleet.at(2_000)
    fleet.beat("m1", "m2")
    fleet.at(4_000)
    fleet.beat("m2")
    early = fleet.at(6_999)
    expect_equal(
        early,
        [],
        "At 6999 ms m1 has been silent for 4999 ms, less than the 5000 ms timeout: emit nothing "
        "yet.",
        show=_said,
    )
    rows = fleet.at(7_000)
    expect_equal(
        rows,
        [("m1", UNHEALTHY, HEALTHY, 7_000)],
        "At 7000 ms m1 has been silent for 5000 ms: emit m1's Healthy -> Unhealthy, and "
        "nothing for m2, seen at 4000 ms.",
        show=_said,
    )
    rows = fleet.at(8_999)
    expect_equal(
        rows,
        [],
        "At 8999 ms m2 has been silent for 4999 ms and m1 is already Unhealthy: emit nothing.",
        show=_said,
    )
    rows = fleet.at(9_000)
    expect_equal(
        rows,
        [("m2", UNHEALTHY, HEALTHY, 9_000)],
        "At 9000 ms m2 has been silent for 5000 ms: emit m2's Healthy -> Unhealthy. After a "
        "timer fires, register the next one at the earliest deadline of the machines left.",
        show=_said,
    )
    later = []
    for t in range(10_000, 40_000, 1_000):
        later += fleet.at(t)
    expect_equal(
        later,
        [],
        "An Unhealthy machine that stays silent is reported once: emit nothing from 10 s to 40 s.",
        show=_said,
    )


@exercise("6.6")
def test_bucketed_unhealthy_is_stamped_when_the_timer_fires(nb):
    fleet = Buckets(yours_timer(nb))
    fleet.at(1_000)
    fleet.beat("m1", "m2")
    fleet.at(2_000)
    fleet.beat("m1")
    rows = fleet.at(9_500)
    expected = [("m1", UNHEALTHY, HEALTHY, 9_500), ("m2", UNHEALTHY, INITIALIZING, 9_500)]
    expect_equal(
        rows,
        expected,
        "No micro-batch ran between 2000 and 9500 ms: at 9500 ms both machines are overdue and "
        "turn Unhealthy, stamped with the time the timer fired, as lab 04's processor does.",
        show=_said,
    )


def _all_unhealthy(processor_class, retire_after_ms: int = 3_600_000) -> Buckets:
    fleet = Buckets(processor_class, retire_after_ms=retire_after_ms)
    fleet.at(1_000)
    fleet.beat("m1", "m2")
    fleet.at(2_000)
    fleet.beat("m1", "m2")
    fleet.at(7_000)  # both Unhealthy: the bucket's timer is now a retirement
    return fleet


@exercise("6.5")
def test_bucketed_recovery_arms_an_earlier_timer(nb):
    fleet = _all_unhealthy(yours_inputs(nb))
    fleet.at(10_000)
    rows = fleet.beat("m2")
    expected = [("m2", HEALTHY, UNHEALTHY, 10_000)]
    expect_equal(
        rows,
        expected,
        "An Unhealthy machine that sends a heartbeat recovers.",
        show=_said,
    )
    early = fleet.at(14_999)
    rows = fleet.at(15_000)
    expect_equal(
        early + rows,
        [("m2", UNHEALTHY, HEALTHY, 15_000)],
        "m2 recovered at 10000 ms in a bucket whose machines were all Unhealthy, then went "
        "silent: it should turn Unhealthy again at 15000 ms (what the timers emitted up to "
        "then). The bucket's only timer was a retirement an hour away: when a machine's new "
        "deadline is earlier than the armed timer, register one at that deadline.",
        show=_said,
    )


@exercise("6.5")
def test_bucketed_newcomer_in_a_quiet_bucket_times_out(nb):
    fleet = _all_unhealthy(yours_inputs(nb))
    fleet.at(10_000)
    rows = fleet.beat("m3")
    expect_equal(
        rows,
        [("m3", INITIALIZING, None, 10_000)],
        "A new machine in a bucket that already holds others is Initializing.",
        show=_said,
    )
    rows = fleet.at(15_000)
    expect_equal(
        rows,
        [("m3", UNHEALTHY, INITIALIZING, 15_000)],
        "m3 joined a bucket whose machines were all Unhealthy and never beat again: it should "
        "turn Unhealthy at 15000 ms. Register a timer when a new machine's deadline is earlier "
        "than the bucket's armed timer.",
        show=_said,
    )


@exercise("6.6")
def test_bucketed_retirement_is_silent_and_clears_the_bucket(nb):
    fleet = Buckets(yours_timer(nb), retire_after_ms=30_000)
    fleet.at(1_000)
    fleet.beat("m1", "m2")
    fleet.at(2_000)
    fleet.beat("m1", "m2")
    fleet.at(5_000)
    fleet.beat("m2")
    fleet.at(7_000)  # m1 Unhealthy
    fleet.at(10_000)  # m2 Unhealthy
    rows = fleet.at(31_999)
    held = fleet.machines()
    expect_that(
        {"m1", "m2"} <= held,
        "At 31999 ms m1 has been silent for 29999 ms, less than retire_after_ms (30000): both "
        "machines should still be in the bucket's state.",
        expected="m1 and m2",
        actual=sorted(held),
    )
    rows += fleet.at(32_000)
    held = fleet.machines()
    expect_that(
        "m1" not in held and "m2" in held,
        "At 32000 ms, 30000 ms after its last heartbeat, m1 should be gone from the bucket and "
        "m2 (last seen at 5000 ms) still in it.",
        expected="m2, without m1",
        actual=sorted(held),
    )
    rows += fleet.at(34_999)
    held = fleet.machines()
    expect_that(
        "m2" in held,
        "At 34999 ms m2 has been silent for 29999 ms: it should still be in the bucket.",
        expected="m2 in the bucket",
        actual=sorted(held),
    )
    rows += fleet.at(35_000)
    expect_equal(
        rows,
        [],
        "Retiring a machine is silent: no output row while retiring m1 and m2.",
        show=_said,
    )
    if fleet.has_state():
        raise CheckFailed(
            "At 35000 ms the bucket's last machine retired: clear() the bucket's state.",
            expected="no state for the bucket",
            actual=f"a bucket that still holds {sorted(fleet.machines()) or 'a value'}",
        )
    expect_equal(
        fleet.timers(),
        [],
        "A bucket whose machines all retired should leave no timer behind (its pending timers, "
        "in ms). Register a timer only for the machines that are left.",
    )


@exercise("6.6")
def test_bucketed_retired_machine_starts_over(nb):
    fleet = _all_unhealthy(yours_timer(nb), retire_after_ms=30_000)
    fleet.at(32_000)
    fleet.at(40_000)
    rows = fleet.beat("m1")
    expected = [("m1", INITIALIZING, None, 40_000)]
    expect_equal(
        rows,
        expected,
        "A retired machine that comes back is new again.",
        show=_said,
    )


@exercise("6.6")
def test_bucketed_retirement_counts_from_the_last_heartbeat(nb):
    fleet = _all_unhealthy(yours_timer(nb), retire_after_ms=30_000)
    fleet.at(20_000)
    fleet.beat("m1")  # recovery
    fleet.at(25_000)  # Unhealthy again
    fleet.at(32_000)  # m2 retires; m1 must not
    held = fleet.machines()
    expect_that(
        "m1" in held and "m2" not in held,
        "m1 recovered at 20000 ms and went silent again, so it retires 30000 ms after that "
        "heartbeat, at 50000 ms; m2, silent since 2000 ms, retires at 32000 ms. At 32000 ms the "
        "bucket should hold m1 only.",
        expected="m1, without m2",
        actual=sorted(held),
    )
    rows = fleet.at(50_000)
    if not (rows == [] and not fleet.has_state()):
        raise CheckFailed(
            "At 50000 ms m1 should be retired without output and the bucket cleared.",
            expected="no row, and an empty bucket",
            actual=f"{_said(rows)}, and the bucket "
            f"{'still holds ' + str(sorted(fleet.machines())) if fleet.has_state() else 'is empty'}",
        )


# --- 6.5 and 6.6 · the same story as lab 04's processor -------------------------------


def _same_story_as_lab_04(processor_class):
    # Twelve machines in three buckets for five minutes: they come, go silent, recover and
    # retire at random (a fixed seed), with batches 0.5 to 7 s apart.
    timeout_ms, retire_after_ms = 5_000, 20_000
    rng = random.Random(606)
    machines = [f"m{i:02d}" for i in range(12)]
    bucket_of = {m: i % 3 for i, m in enumerate(machines)}
    talking = {m: rng.random() < 0.6 for m in machines}
    reference = TwsTester(
        ReferenceHeartbeatProcessor(timeout_ms, retire_after_ms), timeMode="ProcessingTime"
    )
    fleet = Buckets(processor_class, timeout_ms=timeout_ms, retire_after_ms=retire_after_ms)
    history, now = [], 0

    def in_time_order(rows):
        return sorted(rows, key=lambda r: (r[0], r[3], r[1]))

    def expect_lab_04(got, want, step: str) -> None:
        expect_equal(
            _said(got),
            _said(want),
            f"The bucketed processor should emit what lab 04's processor emits for the same "
            f"heartbeats. After {'; '.join(history[-4:]) or 'the start'}, {step} (expected: "
            f"what lab 04 emits).",
        )

    while now < 300_000:
        now += rng.choice([500, 1_000, 1_000, 1_000, 2_000, 3_000, 7_000])
        want = in_time_order(
            status_tuples(
                reference.setProcessingTime(now), "LeanHeartbeatProcessor", "handleExpiredTimer"
            )
        )
        expect_lab_04(fleet.at(now), want, f"the timers due at {now} ms")
        for m in machines:
            if rng.random() < 0.08:
                talking[m] = not talking[m]
        beating = [m for m in machines if talking[m] and rng.random() < 0.9]
        want, got = [], []
        for m in beating:
            want += reference.test(
                m, [Row(machine_name=m, machine_time=None)] * rng.choice([1, 1, 2])
            )
        for bucket in range(3):
            names = [
                m for m in beating if bucket_of[m] == bucket for _ in range(rng.choice([1, 2]))
            ]
            rng.shuffle(names)
            if names:
                got += fleet.beat(*names, bucket=bucket)
        want = in_time_order(status_tuples(want, "LeanHeartbeatProcessor", "handleInputRows"))
        step = f"heartbeats of {', '.join(beating) or 'no machine'} at {now} ms"
        expect_lab_04(in_time_order(got), want, step)
        history.append(step)


@exercise("6.5")
def test_your_heartbeats_tell_the_same_story_as_lab_04(nb):
    _same_story_as_lab_04(yours_inputs(nb))


@exercise("6.6")
def test_your_timer_tells_the_same_story_as_lab_04(nb):
    _same_story_as_lab_04(yours_timer(nb))


# --- 6.5 and 6.6 · the cost of a batch and the bucket's state ---------------------------

FOUR = ("m1", "m2", "m3", "m4")


def _steady_bucket(processor_class) -> tuple[Buckets, Meter]:
    fleet = Buckets(processor_class)
    fleet.at(1_000)
    fleet.beat(*FOUR)
    fleet.at(2_000)
    fleet.beat(*FOUR)
    return fleet, Meter(fleet.tester)


@exercise("6.5")
def test_bucketed_steady_batch_costs_two_state_calls(nb):
    fleet, meter = _steady_bucket(yours_inputs(nb))
    for t in range(3_000, 13_000, 1_000):
        fleet.at(t)
        meter.take()
        fleet.beat("m3", "m1", "m4", "m2", "m1")
        calls = meter.take()
        expect_that(
            sum(calls.values()) == 2 and calls["get"] == 1 and calls["update"] == 1,
            f"A batch of a bucket whose four machines are all Healthy and beating should cost "
            f"exactly 2 state calls, one get and one update, however many machines the bucket "
            f"holds (the batch at {t} ms). The armed timer is already earlier than now + "
            f"timeout_ms: leave it.",
            expected="get x1, update x1",
            actual=f"{Meter.listing(calls)} ({sum(calls.values())} calls)",
        )


@exercise("6.5")
def test_a_batch_leaves_the_bucket_as_the_task_says(nb):
    fleet = Buckets(yours_inputs(nb))
    tester = fleet.tester
    fleet.at(1_000)
    fleet.beat("m1", "m2", "m1")
    expect_equal(
        _bucket(tester),
        (["m1", "m2"], [INITIALIZING, INITIALIZING], [1_000, 1_000], 6_000),
        "After m1, m2, m1 at 1000 ms in a new bucket (timeout 5000 ms), its value should be "
        "(names, statuses, last_seen_ms, timer_ms) in the order the machines first came.",
    )
    expect_equal(fleet.timers(), [6_000], "The new bucket should have one timer, at 6000 ms.")
    fleet.at(2_000)
    fleet.beat("m2")
    expect_equal(
        _bucket(tester),
        (["m1", "m2"], [INITIALIZING, HEALTHY], [1_000, 2_000], 6_000),
        "After m2 alone at 2000 ms, only m2 changes: Healthy, seen at 2000; the timer at 6000 ms "
        "is still the earliest deadline.",
        hint="A machine that did not beat keeps its status and last_seen_ms; the armed timer "
        "stays when it is earlier than now + timeout_ms.",
    )
    expect_equal(fleet.timers(), [6_000], "No new timer was needed at 2000 ms.")


@exercise("6.5")
def test_a_recovering_machine_in_a_silent_bucket_gets_a_timer(nb):
    fleet = Buckets(yours_inputs(nb), retire_after_ms=30_000)
    tester = fleet.tester
    tester.updateValueState("bucket", 0, (["m1"], [UNHEALTHY], [2_000], 32_000))
    register_timer(tester, 0, 32_000)
    fleet.at(10_000)
    rows = fleet.beat("m1")
    expect_equal(
        _said(rows),
        _said([("m1", HEALTHY, UNHEALTHY, 10_000)]),
        "A bucket holding m1 Unhealthy (seen at 2000 ms, its retirement timer at 32000): m1 "
        "beats at 10000 ms and recovers.",
    )
    expect_equal(
        (_bucket(tester)[3], sorted(fleet.timers())),
        (15_000, [15_000, 32_000]),
        "After the recovery, the bucket's timer_ms should be 15000 (now + timeout_ms) and a "
        "timer registered there, before the retirement timer at 32000 (which may stay).",
        hint="The armed timer was a retirement, later than the new deadline: register one at "
        "the deadline and keep it as timer_ms.",
    )


@exercise("6.5")
def test_no_timer_is_registered_when_the_armed_one_is_not_later(nb):
    fleet = Buckets(yours_inputs(nb))
    fleet.at(1_000)
    fleet.beat("m1", "m2")
    meter = Meter(fleet.tester)
    fleet.beat("m2", "m1")  # another batch in the same millisecond: its deadline is the timer
    calls = meter.take()
    expect_equal(
        Meter.listing(calls),
        "get x1, update x1",
        "Two batches of a bucket in the same millisecond: the second one's deadline (now + "
        "timeout_ms) is the armed timer itself, so it registers none.",
        hint="Register a timer only when the bucket has none or the armed one is later than "
        "now + timeout_ms.",
    )


@exercise("6.6")
def test_a_superseded_timer_changes_nothing(nb):
    fleet = Buckets(yours_timer(nb), retire_after_ms=30_000)
    fleet.at(1_000)
    fleet.beat("m1")
    fleet.at(2_000)
    fleet.beat("m1")
    fleet.at(7_000)  # m1 Unhealthy: the bucket's timer is its retirement, at 32000
    fleet.at(10_000)
    fleet.beat("m1")  # recovered: a timer at 15000; the one at 32000 is superseded
    for t in range(11_000, 32_000, 1_000):
        fleet.at(t)
        fleet.beat("m1")
    meter = Meter(fleet.tester)
    rows = fleet.at(32_000)  # only the superseded timer is due now
    expect_equal(
        (rows, Meter.listing(meter.take()), fleet.timers()),
        ([], "get x1", [35_000]),
        "At 32000 ms the bucket's old retirement timer fires, while the bucket's own timer is "
        "at 35000 (m1 beats every second): it should read the bucket once and change nothing, "
        "no row, no timer, no update.",
        hint="A timer whose time is not the bucket's timer_ms, and that fires while timer_ms "
        "is still ahead, was superseded: return an empty iterator.",
    )


@exercise("6.6")
def test_bucketed_one_timer_per_bucket(nb):
    fleet, meter = _steady_bucket(yours_timer(nb))
    for t in range(3_000, 63_000, 1_000):
        meter.take()
        fleet.at(t)
        calls = meter.take()
        expect_that(
            sum(calls.values()) <= 3,
            f"A bucket's timer firing should cost at most 3 state calls (get, one registerTimer "
            f"at the earliest next deadline, update); here, at {t} ms.",
            expected="at most 3 calls",
            actual=f"{Meter.listing(calls)} ({sum(calls.values())} calls)",
        )
        fleet.beat(*FOUR)
        timers = fleet.timers()
        expect_that(
            len(timers) == 1,
            f"A bucket of live machines needs exactly one pending timer, whatever its size (the "
            f"bucket's timers, in ms, at {t} ms). Register one when a batch's deadline is earlier "
            f"than the armed timer, and one when the armed timer fires.",
            expected="one timer",
            actual=timers,
        )


# --- Spark plumbing ----------------------------------------------------------------------


def _heartbeats(folder: Path, name: str, machines: list[str], order: int | None = None) -> None:
    """One JSON file of heartbeats; ``order`` fixes the order the file source reads files in."""
    write_heartbeats(folder, name, [(m, "2026-11-22T10:00:00Z") for m in machines], order)


def _noop_writer(df, name: str, checkpoint, mode: str = "update"):
    """``df`` to the noop sink with ``availableNow``: what the source holds now, then stop."""
    return (
        df.writeStream.format("noop")
        .queryName(name)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )


def _cause(error: BaseException) -> str:
    """The JVM exception behind a failed query, e.g. a setting Spark refused."""
    text = str(error)
    jvm = re.search(r"(?:java|scala|org)\.[\w.$]+(?:Exception|Error): [^\n]+", text)
    if jvm:
        return jvm.group(0)[:300]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[0] if lines else type(error).__name__)[:300]


def _run(
    spark,
    incoming: Path,
    checkpoint,
    name: str,
    conf: dict | None = None,
    what: str = "the query",
):
    """Count heartbeats per machine over ``incoming``, one file per batch; return the query."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    schema = StructType(
        [StructField("machine_name", StringType()), StructField("machine_time", TimestampType())]
    )
    counts = (
        spark.readStream.schema(schema)
        .option("maxFilesPerTrigger", 1)
        .json(str(incoming))
        .groupBy("machine_name")
        .agg(F.count("*").alias("heartbeats"))
    )
    writer = _noop_writer(counts, name, checkpoint)
    expect_equal(
        spark.conf.get(STATE_PROVIDER),
        ROCKSDB_PROVIDER,
        "The session should use the RocksDB provider (a course bug if it does not).",
    )
    with session_conf(spark, conf or {}):
        query = writer.start()
    try:
        finish(query, within=240, what="the check's query to read its input")
    except Exception as error:
        raise CheckFailed(
            f"{what} failed.", expected="the query to read its input and stop", actual=_cause(error)
        ) from None
    return query


def _listing(checkpoint, operator: int = 0, partition: int = 0) -> list[tuple[int, str]]:
    folder = Path(checkpoint) / "state" / str(operator) / str(partition)
    kinds = {".changelog": "changelog", ".zip": "snapshot"}
    return sorted(
        (int(p.stem), kinds[p.suffix])
        for p in folder.iterdir()
        if p.is_file() and p.suffix in kinds and p.stem.isdigit()
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


# --- 6.2 · the listener on a real query --------------------------------------------------


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


# --- 6.1 · settings for one query --------------------------------------------------------

UNSET_KEY = "spark.streamlab.check.unsetBefore"
SETTINGS_HINT = (
    "After the block each key must hold what the session had before it, for a key it had and "
    "for one it had not: read spark.conf.get(key, None) before the block and after it, and ask "
    "what your way of putting a key back gives in each case."
)


@contextmanager
def _repaired(spark, keys):
    """Whatever the learner's helper does, the session leaves this check as it came."""
    saved = {key: spark.conf.get(key, None) for key in keys}
    try:
        yield saved
    finally:
        for key, value in saved.items():
            if value is None:
                spark.conf.unset(key)
            else:
                spark.conf.set(key, value)


def _after(spark, keys) -> dict:
    return {key: spark.conf.get(key, None) for key in keys}


#: 6.1's outcomes: what spark.conf.get(key, None) gives after a helper's block, against before.
AS_BEFORE, FORGOTTEN, BLOCK_VALUE = "as before", "forgotten", "block value"
#: 6.1's cases: the key, the value the block sets, and whether the block raises.
CASES = {
    "after_return": (CHANGELOG, "false", False),
    "after_raise": (CHANGELOG, "false", True),
    "never_set": (UNSET_KEY, "on", False),
}
DIAGNOSIS_HINT = (
    "Run the helper as found in the notebook, for each case: print spark.conf.get(key, None) "
    "before the block and after it, catching the exception of a block that raises."
)


@contextmanager
def _settings_as_found(spark, settings):
    """The helper as the notebook gives it (session_settings_as_found)."""
    for key, value in settings.items():
        spark.conf.set(key, value)
    yield
    for key in settings:
        spark.conf.unset(key)


def _diagnosis_6_1(answer) -> dict:
    """DIAGNOSIS_6_1, checked for shape before it is compared with the session."""
    expect_keys(answer, "DIAGNOSIS_6_1", sorted(CASES), hint=DIAGNOSIS_HINT)
    for case, outcome in answer.items():
        if outcome not in (AS_BEFORE, FORGOTTEN, BLOCK_VALUE):
            raise CheckFailed(
                f"DIAGNOSIS_6_1[{case!r}] should be one of the setup cell's outcomes: AS_BEFORE, "
                "FORGOTTEN or BLOCK_VALUE.",
                expected=f"one of {AS_BEFORE!r}, {FORGOTTEN!r}, {BLOCK_VALUE!r}",
                actual=outcome,
                hint=DIAGNOSIS_HINT,
            )
    return dict(answer)


def _outcome(before, block_value, after) -> str:
    if after == before:
        return AS_BEFORE
    if after == block_value:
        return BLOCK_VALUE
    if after is None:
        return FORGOTTEN
    raise CheckFailed(  # neither: the helper as found cannot do that
        "After the helper as found, the session gave a value that is neither the one before the "
        "block nor the block's (a course bug).",
        expected=f"{before!r} or {block_value!r} or None",
        actual=after,
    )


def _what_the_found_helper_does(spark) -> dict:
    """Each case of DIAGNOSIS_6_1, run with the helper as found on this session."""
    shows = {}
    for case, (key, value, raises) in CASES.items():
        with _repaired(spark, [key]):
            if key == UNSET_KEY:
                spark.conf.unset(key)
            before = spark.conf.get(key, None)
            try:
                with _settings_as_found(spark, {key: value}):
                    if raises:
                        raise KeyError("a query that failed to start")
            except KeyError:
                pass
            shows[case] = _outcome(before, value, spark.conf.get(key, None))
    return shows


@exercise("6.1", timeout=60, part="diagnosis")
def test_the_diagnosis_is_what_the_found_helper_does(nb, spark):
    diagnosis = _diagnosis_6_1(nb.DIAGNOSIS_6_1)
    expect_equal(
        diagnosis,
        _what_the_found_helper_does(spark),
        "DIAGNOSIS_6_1 against the helper as found, run on this session: for each case, what "
        "spark.conf.get(key, None) gives after the block, against what it gave before "
        "(after_return: a key the session had, after a block that ends normally; after_raise: "
        "the same after a block that raises; never_set: a key the session did not have).",
        hint=DIAGNOSIS_HINT,
    )


@exercise("6.1", timeout=60, part="fix", hint=SETTINGS_HINT)
def test_the_session_is_as_before_after_the_block(nb, spark):
    asked = {CHANGELOG: "false", STATE_PROVIDER: "org.example.NoSuchProvider", UNSET_KEY: "on"}
    with _repaired(spark, asked) as before:
        spark.conf.unset(UNSET_KEY)
        before[UNSET_KEY] = None
        inside = None
        with nb.session_settings(spark, asked):
            inside = _after(spark, asked)
        after = _after(spark, asked)
    expect_equal(
        inside,
        asked,
        "Inside the block the session should have every setting given to session_settings.",
    )
    expect_equal(
        after,
        {CHANGELOG: before[CHANGELOG], STATE_PROVIDER: before[STATE_PROVIDER], UNSET_KEY: None},
        "After the block, spark.conf.get(key, None) should give for every key what it gave "
        "before: the session's changelog setting and provider, and None for a key the session "
        "did not have.",
    )


@exercise("6.1", timeout=60, part="fix", hint=SETTINGS_HINT)
def test_the_session_is_restored_when_the_block_raises(nb, spark):
    asked = {CHANGELOG: "false"}
    with _repaired(spark, asked) as before:
        raised = None
        try:
            with nb.session_settings(spark, asked):
                raise KeyError("a query that failed to start")
        except KeyError as error:
            raised = error
        after = _after(spark, asked)
    if raised is None:
        raise CheckFailed(
            "An exception raised inside the block should reach the caller; session_settings "
            "swallowed it.",
            expected="the KeyError raised inside the block",
            actual="no exception",
            hint="Your block swallowed the exception: a helper that puts settings back must "
            "not hide an error from its caller.",
        )
    expect_equal(
        after,
        before,
        "When the block raises, the session should still get its settings back.",
        hint="When the block raises, the exception comes back into your generator at its "
        "yield: ask which of your lines still run then.",
    )


@exercise("6.1", timeout=150, part="fix", hint=SETTINGS_HINT)
def test_a_query_after_the_block_commits_changelogs(nb, spark, tmp_path):
    incoming = tmp_path / "incoming"
    _heartbeats(incoming, "a", ["m1", "m2", "m3"])
    with _repaired(spark, [CHANGELOG]) as before:
        expect_equal(
            before[CHANGELOG],
            "true",
            "The course's session has changelog checkpointing on (a course bug if not).",
        )
        with nb.session_settings(spark, {CHANGELOG: "false"}):
            pass
        query = _run(spark, incoming, tmp_path / "after", "lab06_after_settings")
        files = sorted({kind for p in (0, 1) for _, kind in _listing(tmp_path / "after", 0, p)})
    expect_equal(
        files,
        ["changelog"],
        "A query started after `with session_settings(spark, {changelog: 'false'})` should "
        "commit in the session's own mode, changelog checkpointing: only .changelog files in "
        "its state folders.",
    )
    expect_equal(
        query.lastProgress.stateOperators[0].numRowsTotal,
        3,
        "The query started after the block should hold the three machines of its input in its "
        "state (rows in the state store).",
    )


# --- 6.3 · predict what the commits leave --------------------------------------------------


def _prediction(value, name: str, keys, what: str):
    """The learner's prediction, checked for shape before it is compared with Spark."""
    if not isinstance(value, dict) or sorted(value) != sorted(keys):
        raise CheckFailed(
            f"{name} should be a dict with the keys {sorted(keys)!r}, {what}.",
            expected=f"a dict with the keys {sorted(keys)!r}",
            actual=value,
        )
    return {key: [tuple(item) for item in value[key]] for key in keys}


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
    actual = spark_facts(
        "6.3 the files", lambda: _files_spark_writes(spark, tmp_path), check=__file__
    )
    expect_equal(
        predicted,
        actual,
        "Two batches in snapshot mode, then a restart on the same checkpoint with two batches "
        "in changelog mode: PREDICTED_FILES should be what state_files lists for each "
        "partition (expected: what Spark wrote on the same input).",
        hint="Set your lists beside the batches of both runs: which batch makes each version, "
        "whether a partition without rows in a batch commits, and what decides the kind of "
        "file each commit writes.",
    )


# --- 6.7 · the streaming query ------------------------------------------------------------


def _bucketed_changes(nb, spark, folder: Path):
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    schema = StructType(
        [StructField("machine_name", StringType()), StructField("machine_time", TimestampType())]
    )
    heartbeats = spark.readStream.schema(schema).json(str(folder))
    # The course's processor (6.5 and 6.6 are graded on their own). timeout_ms=1: every timer
    # is due by the next run's batch, so timeouts show up without waiting for any clock.
    df = nb.bucketed_status_changes(
        heartbeats, _solution().BucketedHeartbeatProcessor(timeout_ms=1), buckets=2
    )
    expect_that(
        isinstance(df, DataFrame),
        "bucketed_status_changes() should return the DataFrame that transformWithState gives. "
        "Return it without calling writeStream or start().",
        expected="a DataFrame",
        actual=type(df).__name__,
    )
    expect_that(
        df.isStreaming,
        "bucketed_status_changes() returned a batch DataFrame; it should be streaming.",
        expected="a streaming DataFrame (isStreaming True)",
        actual="a batch DataFrame (isStreaming False)",
    )
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expected = [(f.name, f.dataType.simpleString()) for f in nb.STATUS_SCHEMA.fields]
    expect_equal(
        got,
        expected,
        "The query's rows should be lab 04's, STATUS_SCHEMA: (name, type) of each column. Pass "
        "STATUS_SCHEMA as outputStructType: the bucket stays inside the query.",
    )
    return df


def _bucketed_run(nb, spark, incoming: Path, output: Path, checkpoint) -> tuple[list, object]:
    writer = (
        _bucketed_changes(nb, spark, incoming)
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    # Processing-time timers make Spark run a batch every trigger even without data, so an
    # availableNow query would never end; without no-data batches it ends once input is done.
    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        query = writer.start()
    try:
        finish(
            query, within=240, what="the check's query over your bucketed changes to read its input"
        )
    except Exception as error:
        raise CheckFailed(
            "The query failed. Check the arguments of transformWithState: "
            'STATUS_SCHEMA, "Append" and "ProcessingTime".',
            expected="the query to read its input and stop",
            actual=_cause(error),
        ) from None
    rows = [
        (r.machine_name, r.status, r.previous_status, r.last_status_change_time)
        for r in spark.read.parquet(str(output)).collect()
    ]
    return rows, query


@exercise("6.7", timeout=180)
def test_bucketed_query_runs_on_rocksdb(nb, spark, tmp_path, checkpoint_dir):
    incoming, output = tmp_path / "incoming", tmp_path / "output"
    machines = ["m1", "m2", "m3", "m4", "m5", "m6"]

    _heartbeats(incoming, "a", machines + ["m1", "m2", "m1"])
    first, query = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in first)
    expected = [(m, INITIALIZING, None) for m in machines]
    expect_equal(
        got,
        expected,
        "The first run (six machines, m1 three times, m2 twice, in 2 buckets) should emit one "
        "Initializing row per machine, named after the machine, as lab 04's query does.",
    )
    untimed = [r for r in first if not isinstance(r[3], datetime)]
    expect_that(
        not untimed,
        "last_status_change_time should be a timestamp in every row.",
        expected="a datetime in every row",
        actual=untimed,
    )
    keys = query.lastProgress.stateOperators[0].numRowsTotal
    expect_that(
        keys <= 2,
        "Six machines in 2 buckets should leave at most 2 values in the state store, one per "
        "bucket. Group by the bucket column, "
        'F.pmod(F.hash("machine_name"), F.lit(buckets)), not by machine_name.',
        expected="at most 2",
        actual=keys,
    )

    _heartbeats(incoming, "b", ["m1", "m1"])
    second, _ = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in set(second) - set(first))
    expected = [("m1", HEALTHY, INITIALIZING)] + [
        (m, UNHEALTHY, INITIALIZING) for m in machines[1:]
    ]
    expect_equal(
        got,
        expected,
        "The second run on the same checkpoint, with a timeout of 1 ms and only m1 beating, "
        "should add m1's Initializing -> Healthy and an Unhealthy row for each of the five "
        "others. The state and the timers must survive between runs.",
    )

    _heartbeats(incoming, "c", ["m2"])
    third, _ = _bucketed_run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in set(third) - set(second))
    expected = [("m1", UNHEALTHY, HEALTHY), ("m2", HEALTHY, UNHEALTHY)]
    expect_equal(
        got,
        expected,
        "The third run, only m2 beating, should add m2's recovery and m1's timeout.",
    )


# --- 6.8 · predict what each design rewrites ---------------------------------------------

PRICE_BATCHES = ([1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], [1], [1, 5])
AHEAD_MS = 4_102_444_800_000  # 2100-01-01: event times no clock reaches during the check


def _price_input(folder: Path) -> None:
    sequence = {"0": 0, "1": 0}
    folder.mkdir(parents=True)
    for batch, machines in enumerate(PRICE_BATCHES):
        rows = []
        for m in machines:
            partition = "0" if m <= 4 else "1"
            rows.append(
                {
                    "partition": partition,
                    "machine_name": f"machine-{m}",
                    "machine_time": None,
                    "event_time": AHEAD_MS + batch * 1000 + m,
                    "sequence_number": sequence[partition],
                    "last_enqueued_sequence_number": None,
                }
            )
            sequence[partition] += 1
        deliver_file(folder, str(batch), rows, order=batch)


def _writes(spark, transitions, checkpoint: Path, variable: str, machines_in_value) -> list:
    from pyspark.sql import functions as F

    with session_conf(spark, {NO_DATA_BATCHES: "false"}):
        query = (
            transitions.writeStream.format("noop")
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
    finish(query, within=240, what="the check's query over the prices to read its input")
    feed = (
        spark.read.format("statestore")
        .option("stateVarName", variable)
        .option("readChangeFeed", "true")
        .option("changeStartBatchId", 0)
        .load(str(checkpoint))
        .groupBy("batch_id")
        .agg(F.count("*").alias("values"), F.sum(machines_in_value).alias("machines"))
        .orderBy("batch_id")
        .collect()
    )
    return [(r["values"], r["machines"]) for r in feed]


@exercise("6.8", timeout=240)
def test_the_predicted_writes_are_what_spark_writes(nb, spark, tmp_path):
    predicted = _prediction(
        nb.PREDICTED_WRITES,
        "PREDICTED_WRITES",
        ("machine", "partition"),
        "each a list of one (values, machines) pair per batch",
    )
    actual = spark_facts(
        "6.8 the writes", lambda: _writes_spark_makes(spark, tmp_path), check=__file__
    )
    expect_equal(
        predicted,
        actual,
        "PREDICTED_WRITES should hold, per design and batch, (state values written, machines "
        "they hold) as the change feed shows them (expected: what Spark wrote on the same "
        "input).",
        hint="A value is written whole whenever its key has a row in the batch: one machine "
        "per value for the first design, every machine the partition holds so far for the "
        "second.",
    )


def _writes_spark_makes(spark, tmp_path: Path) -> dict:
    """Both designs over the same input: per batch, (values written, machines they hold)."""
    from pyspark.sql import functions as F

    from streamlab.monitor import reference_solution

    _price_input(tmp_path / "incoming")
    beats = (
        spark.readStream.option("maxFilesPerTrigger", 1)
        .schema(
            "partition STRING, machine_name STRING, machine_time TIMESTAMP, event_time LONG, "
            "sequence_number LONG, last_enqueued_sequence_number LONG"
        )
        .json(str(tmp_path / "incoming"))
        .withColumn("event_time", F.timestamp_millis("event_time"))
    )
    per_machine = beats.groupBy("machine_name").transformWithState(
        ReferenceHeartbeatProcessor(timeout_ms=3_600_000),
        "machine_name STRING, status STRING, previous_status STRING, "
        "last_status_change_time TIMESTAMP",
        "Append",
        "ProcessingTime",
    )
    lab05 = reference_solution()
    per_partition = lab05.catch_up_changes(beats, lab05.CatchUpProcessor(timeout_ms=3_600_000))
    return {
        "machine": _writes(spark, per_machine, tmp_path / "machine", "machine", F.lit(1)),
        "partition": _writes(
            spark, per_partition, tmp_path / "partition", "partition", F.size("value.names")
        ),
    }


# --- 6.9 · the SQL tab's state metrics -----------------------------------------------------
# One SQL execution as the UI's REST API served it: batch 1 of the notebook's ui_tour query
# (PySpark 4.3.0, local[2]), with the progress report of the same batch.

UI_TOUR = Path(__file__).with_name("data") / "06_ui_tour_batch1.json"
TOTAL_ROWS = "number of total state rows"
UPDATED_ROWS = "number of updated state rows"
STATE_MEMORY = "memory used by state"


def _tour() -> dict:
    return json.loads(UI_TOUR.read_text())


def _ui_state(nb, execution: dict, what: str) -> dict:
    state = nb.ui_state(json.loads(json.dumps(execution)))
    if not isinstance(state, dict):
        raise CheckFailed(
            f"ui_state() of {what} should return a dict.",
            expected="a dict",
            actual=type(state).__name__,
        )
    return state


def _numbers(nb, execution: dict, what: str) -> dict:
    """What the learner read, with each number's type beside it (an int must be an int)."""
    return {
        node: {key: (type(value).__name__, value) for key, value in numbers.items()}
        if isinstance(numbers, dict)
        else numbers
        for node, numbers in _ui_state(nb, execution, what).items()
    }


def _typed(state: dict[str, tuple[int, int, float]]) -> dict:
    return {
        node: {
            "rows_total": ("int", rows),
            "rows_updated": ("int", updated),
            "memory_used_bytes": ("float", memory),
        }
        for node, (rows, updated, memory) in state.items()
    }


@exercise("6.9")
def test_ui_state_reads_a_real_batch(nb):
    tour = _tour()
    report = {op["operatorName"]: op for op in tour["progress"]["stateOperators"]}
    # The rows counted in the SQL tab are the report's; its memory, a tenth of a KiB rounded.
    expected = {
        "StreamingDeduplicate": (
            report["dedupe"]["numRowsTotal"],
            report["dedupe"]["numRowsUpdated"],
            4.2 * 1024,
        ),
        "StateStoreSave": (
            report["stateStoreSave"]["numRowsTotal"],
            report["stateStoreSave"]["numRowsUpdated"],
            4.2 * 1024,
        ),
    }
    expect_equal(
        _numbers(nb, tour["execution"], "batch 1 of ui_tour"),
        _typed(expected),
        "ui_state() of batch 1 of ui_tour (the REST API's answer, as the cell above shows it) "
        "should have one entry per node with state metrics, keyed by nodeName; each "
        "(type, value): rows as int, memory in bytes as float.",
        hint="Find the nodes by their metrics, not by their names; metric_value() reads "
        "'4.2 KiB' and the 'total (min, med, max ...)' form.",
    )


@exercise("6.9")
def test_ui_state_finds_state_by_its_metrics_not_by_a_node_name(nb):
    execution = _tour()["execution"]
    renamed = {"StreamingDeduplicate": "TransformWithStateInPySpark", "StateStoreSave": "Custom"}
    for node in execution["nodes"]:
        node["nodeName"] = renamed.get(node["nodeName"], node["nodeName"])
    got = _ui_state(nb, execution, "batch 1 with its state nodes renamed")
    expect_equal(
        sorted(got),
        ["Custom", "TransformWithStateInPySpark"],
        "Every node with a 'number of total state rows' metric holds state, whatever its "
        "name (a transformWithState node, a future operator): ui_state()'s keys.",
    )


@exercise("6.9")
def test_ui_state_of_a_batch_without_state_is_empty(nb):
    execution = _tour()["execution"]
    for node in execution["nodes"]:
        node["metrics"] = [m for m in node["metrics"] if "state" not in m["name"]]
    expect_equal(
        _ui_state(nb, execution, "an execution without state metrics"),
        {},
        "An execution none of whose nodes has 'number of total state rows' (a stateless "
        "query's batch) has no state to report.",
    )


@exercise("6.9")
def test_ui_state_reads_each_metric_in_its_unit(nb):
    execution = _tour()["execution"]
    values = {
        TOTAL_ROWS: "1,234",
        UPDATED_ROWS: "total (min, med, max (stageId: taskId))\n56 (20, 36, 36 (stage 9.0: task 3))",
        STATE_MEMORY: "total (min, med, max (stageId: taskId))\n2.5 MiB (1.0 MiB, 1.5 MiB, "
        "1.5 MiB (stage 9.0: task 3))",
    }
    for node in execution["nodes"]:
        if node["nodeName"] == "StateStoreSave":
            node["metrics"] = [
                {"name": m["name"], "value": values.get(m["name"], m["value"])}
                for m in node["metrics"]
            ]
            node["metrics"].reverse()  # the REST API promises no order
    got = _numbers(nb, execution, "batch 1 with other values in StateStoreSave").get(
        "StateStoreSave"
    )
    expect_equal(
        got,
        _typed({"StateStoreSave": (1234, 56, 2.5 * 1024**2)})["StateStoreSave"],
        "StateStoreSave with 'number of total state rows' 1,234, updated rows summed over "
        "tasks (56) and 2.5 MiB of memory: (type, value) of each.",
    )


# --- 6.10 · state that only grows ----------------------------------------------------------


def _row(query, operator, batch, total, input_rows=1):
    return {
        "query": query,
        "batch_id": batch,
        "input_rows": input_rows,
        "batch_duration_ms": 100,
        "operator": operator,
        "rows_total": total,
        "rows_updated": 1,
        "memory_used_bytes": 1000,
        "commit_time_ms": 10,
    }


def _growing(nb, rows, batches, what):
    alerts = nb.growing_state([dict(r) for r in rows], batches)
    if not isinstance(alerts, list):
        raise CheckFailed(
            f"growing_state() should return a list of Alerts; here on {what}.",
            expected="a list of Alerts",
            actual=type(alerts).__name__,
        )
    got = []
    for alert in alerts:
        if not hasattr(alert, "rule") or not hasattr(alert, "message"):
            raise CheckFailed(
                f"growing_state() should return Alerts (streamlab.alerts.Alert); here on {what}.",
                expected="an Alert in each item of the list",
                actual=f"{type(alert).__name__}: {alert!r}",
            )
        if not isinstance(alert.message, str) or not alert.message.strip():
            raise CheckFailed(
                f"Each alert needs a message for the person on call; here on {what}.",
                expected="a message: a str that is not blank",
                actual=repr(alert.message),
            )
        got.append((alert.rule, alert.query, alert.batch_id, alert.value, alert.limit, alert.at))
    return got


def _alert(query, batch, value):
    return ("state_growing", query, batch, float(value), 0.0, "")


def _expect_alerts(nb, rows, batches, expected, why, hint=None):
    shown = ", ".join(
        f"({r['query']}, {r['operator']}, batch {r['batch_id']}, {r['rows_total']} rows"
        f"{', read nothing' if r['input_rows'] == 0 else ''})"
        for r in rows
    )
    expect_equal(
        _growing(nb, rows, batches, f"rows {shown}"),
        expected,
        f"growing_state(rows, batches={batches}) on rows {shown}: {why} "
        "(rule, query, batch_id, value, limit, at) of each alert.",
        hint=hint,
    )


def _totals(totals, query="q", operator="dedupe", start=0):
    return [_row(query, operator, start + b, t) for b, t in enumerate(totals)]


@exercise("6.10")
def test_growing_state_in_each_of_the_last_batches(nb):
    _expect_alerts(
        nb,
        _totals([10, 20, 30, 40]),
        3,
        [_alert("q", 3, 30)],
        "three rises in a row: one alert, for the newest batch, by how much the state rose.",
    )
    _expect_alerts(
        nb,
        _totals([10, 20, 30]),
        2,
        [_alert("q", 2, 20)],
        "two rises in three batches are enough for batches=2.",
    )


@exercise("6.10")
def test_a_batch_without_a_rise_is_no_alert(nb):
    _expect_alerts(
        nb, _totals([10, 20, 20, 40]), 3, [], "batch 2 kept 20 rows: not a rise, no alert."
    )
    _expect_alerts(nb, _totals([10, 20, 15, 40]), 3, [], "batch 2 fell: no alert.")


@exercise("6.10")
def test_rises_need_one_batch_more_than_batches(nb):
    _expect_alerts(
        nb,
        _totals([20, 30, 40]),
        3,
        [],
        "three rows hold two rises: batches=3 needs four rows.",
    )


@exercise("6.10")
def test_only_the_last_batches_count(nb):
    _expect_alerts(
        nb,
        _totals([50, 10, 20, 30, 40]),
        3,
        [_alert("q", 4, 30)],
        "the fall from 50 to 10 is older than the last three batches: it does not count, and "
        "the value is the rise over those three.",
    )
    _expect_alerts(
        nb,
        _totals([10, 20, 30, 40, 40]),
        3,
        [],
        "the newest batch kept 40 rows: the state stopped growing, no alert.",
    )


@exercise("6.10")
def test_batches_that_read_nothing_are_left_out(nb):
    rows = (
        _totals([10, 20]) + [_row("q", "dedupe", 2, 20, input_rows=0)] + _totals([30, 40], start=3)
    )
    _expect_alerts(
        nb,
        rows,
        3,
        [_alert("q", 4, 30)],
        "batch 2 read nothing: neither a rise nor a break, and not one of the last three.",
        hint="Keep only the rows with input_rows above 0 before you look at the last batches.",
    )
    quiet = _totals([10, 20, 30]) + [_row("q", "dedupe", 3, 40, input_rows=0)]
    _expect_alerts(
        nb, quiet, 3, [], "the last batch read nothing: three rows that read input, no alert."
    )


@exercise("6.10")
def test_each_query_and_operator_on_its_own(nb):
    rows = []
    for batch, (dedupe, count, other) in enumerate([(4, 4, 1), (8, 4, 2), (12, 4, 3), (16, 4, 4)]):
        rows += [
            _row("beats", "stateStoreSave", batch, count),
            _row("beats", "dedupe", batch, dedupe),
            _row("other", "dedupe", batch, other),
        ]
    _expect_alerts(
        nb,
        rows,
        3,
        [_alert("beats", 3, 12), _alert("other", 3, 3)],
        "per (query, operator): the dedupe of both queries grows, the count does not; in the "
        "order each pair first appears.",
    )


def _dedupe_then_count(spark, folder: Path, checkpoint, name: str) -> list[dict]:
    """Five files of the same four machines at a new second each, one file per batch,
    through dropDuplicates and a count per machine; the progress reports, oldest first."""
    from pyspark.sql import functions as F

    for second in range(5):
        beats = [(f"m{m}", f"2026-11-22T10:00:0{second}Z") for m in range(4)]
        write_heartbeats(folder, str(second), beats, order=second)
    counts = (
        spark.readStream.schema(HEARTBEAT_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .dropDuplicates(["machine_name", "machine_time"])
        .groupBy("machine_name")
        .agg(F.count("*").alias("heartbeats"))
    )
    query = _noop_writer(counts, name, checkpoint).start()
    finish(query, within=240, what="the check's deduplicating count to read its input")
    return [json.loads(p.json) for p in query.recentProgress]


@exercise("6.10", timeout=150)
def test_growing_state_provoked_on_a_real_query(nb, spark, tmp_path, checkpoint_dir):
    from streamlab.kit import state_growing

    reports = _dedupe_then_count(spark, tmp_path / "incoming", checkpoint_dir, "never_forgets")
    rows = [row for report in reports for row in _expected(report, ())]
    for batches in (3, 4, 5):
        # The course's own rule, on the same reports, says which operator grows and by how much.
        fired = state_growing(reports, batches)
        expected = [] if fired is None else [_alert(fired.query, fired.batch_id, fired.value)]
        _expect_alerts(
            nb,
            rows,
            batches,
            expected,
            "the rows a StateMetricsListener collects from a query whose dropDuplicates keeps "
            "every (machine, time) pair while its count stays at four machines",
        )
    expect_equal(expected, [], "A course bug: five batches cannot rise five times.")


# --- 6.11 · predict the alerts -------------------------------------------------------------

LATE_NIGHT = ["10:00:00", "10:01:40", "10:03:20", "10:05:00", "10:06:40"]


def _alerts_raised(spark, tmp_path: Path, checkpoint_dir: str) -> list[tuple]:
    """The Alerter's (rule, batch_id) on the reports of a windowed count over LATE_NIGHT."""
    from pyspark.sql import functions as F

    from streamlab.alerts import Thresholds
    from streamlab.kit import Alerter

    folder = tmp_path / "incoming"
    for n, on_time in enumerate(LATE_NIGHT):
        times = [on_time] + (["09:00:00"] if n else [])
        write_heartbeats(
            folder, str(n), [("machine-1", f"2026-11-22T{t}Z") for t in times], order=n
        )
    counts = (
        spark.readStream.schema(HEARTBEAT_DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(folder))
        .withWatermark("machine_time", "10 seconds")
        .groupBy(F.window("machine_time", "10 seconds"))
        .count()
    )
    query = _noop_writer(counts, "late_night", checkpoint_dir, mode="append").start()
    finish(query, within=240, what="the check's windowed count to read its input")
    alerter = Alerter(Thresholds(max_watermark_lag_s=100, dropped_batches=3, growing_batches=3))
    return [(a.rule, a.batch_id) for p in query.recentProgress for a in alerter.observe(p)]


@exercise("6.11", timeout=150)
def test_the_predicted_alerts_are_what_the_alerter_raises(nb, spark, tmp_path, checkpoint_dir):
    predicted = nb.PREDICTED_ALERTS
    if not isinstance(predicted, list | tuple) or not all(
        isinstance(item, list | tuple) and len(item) == 2 for item in predicted
    ):
        raise CheckFailed(
            "PREDICTED_ALERTS should be a list of (rule, batch_id) pairs.",
            expected="a list such as [('state_growing', 3)]",
            actual=predicted,
        )
    raised = spark_facts(
        "6.11 the alerts",
        lambda: _alerts_raised(spark, tmp_path, checkpoint_dir),
        check=__file__,
    )
    expect_equal(
        [tuple(item) for item in predicted],
        raised,
        "PREDICTED_ALERTS should be the (rule, batch_id) of every alert the Alerter raised, in "
        "order (expected: what it raised on the reports of the same query, run here).",
        hint="Write down, batch by batch, the watermark each ran with and whether its late "
        "heartbeat was dropped; an alert is raised only when its rule starts firing.",
    )
