"""Checks for lab 05 · Restart recovery.

Pure Python first: the restart plan on checkpoint folders built here (5.1), the audit (5.5),
and the three steps of the catch-up processor on ``TwsTester``, fed from partition logs in
micro-batches in Spark's order (``streamlab.tws_batches.spark_batch``) whose processing time
the check sets, downtime and backlogs included (5.6 to 5.8). Each step is graded with the
course's code for the other two, so that it passes or fails on its own. Then Spark: the sink
(5.2), three lives of one query (5.3), the state data source on a checkpoint of the course's
lab 04 processor (5.4), the catch-up over files read with ``maxFilesPerTrigger`` (5.8), and
restarts with other settings or another state (5.9). A debug exercise's diagnosis is graded
against this file's own run of the notebook's found code, read as Spark shows it: for 5.2 the
found sink's three lives (the batches the restart's progress reports name, the output's rows
per batch id), for 5.8 5.7's reader over a backlog in three ranges (the false alarms in its
output, and the batches whose rows stop short of their partition's end). Every Spark run uses
``trigger(availableNow=True)``; no check sleeps, and each verdict depends on the data only.
"""

import json
import os
import re
import shutil
import sys
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql import functions as F
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.deadlines import finish
from streamlab.grading import (
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
)
from streamlab.grading.facts import spark_facts
from streamlab.grading.verdict import query_cause
from streamlab.kit.heartbeat import ReferenceHeartbeatProcessor, handler_must_yield
from streamlab.kit.stories import START, is_not_done
from streamlab.monitor import batch_writer
from streamlab.solutions import load_solution
from streamlab.tws_batches import pending_timers, register_timer, spark_batch

# Spark's Python workers cannot import this file: what it defines goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

INITIALIZING, HEALTHY, UNHEALTHY = "Initializing", "Healthy", "Unhealthy"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ENCODING = "spark.sql.streaming.stateStore.encodingFormat"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
HDFS = "org.apache.spark.sql.execution.streaming.state.HDFSBackedStateStoreProvider"
START_MS = round(START.timestamp() * 1000)


# --- 5.1 · what a restart will do ----------------------------------------------------------


def _conf(partitions: int = 2) -> dict:
    return {
        PROVIDER: ROCKSDB,
        PARTITIONS: str(partitions),
        "spark.sql.streaming.stateStore.compression.codec": "lz4",
    }


def _file(path: Path, text: str, crc: bool = True) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    if crc:
        (path.parent / f".{path.name}.crc").write_bytes(b"crc")


def _stamp(batch: int) -> int:
    return 1_795_000_000_000 + 1_000 * batch


def _fake_checkpoint(
    root: Path, planned: int, committed: int, partitions_by_batch: dict | None = None
) -> Path:
    """A checkpoint folder laid out as Spark 4.3 lays it out, with its clutter."""
    _file(root / "metadata", json.dumps({"id": "5f0c1d2e-0000-4000-8000-000000000005"}))
    for batch in range(planned):
        conf = _conf((partitions_by_batch or {}).get(batch, 2))
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": _stamp(batch), "conf": conf}
        _file(
            root / "offsets" / str(batch),
            "v1\n" + json.dumps(meta) + "\n" + json.dumps({"logOffset": batch}),
        )
        _file(root / "sources" / "0" / str(batch), "v1\n" + json.dumps({"path": f"f{batch}.json"}))
    if planned:
        # A temporary file of a write that never finished.
        _file(root / "offsets" / f".{planned}.6c1f0e4a.tmp", "v1\n", crc=False)
    for batch in range(committed):
        _file(root / "commits" / str(batch), 'v1\n{"nextBatchWatermarkMs":0}')
    for partition in range(2):
        _file(root / "state" / "0" / str(partition) / "1.changelog", "changes")
    return root


def _plan(nb, root: Path) -> dict:
    plan = nb.restart_plan(str(root))
    keys = {"next_batch", "replays", "batch_timestamp_ms", "pinned"}
    if not isinstance(plan, dict) or set(plan) != keys:
        raise CheckFailed(
            "restart_plan() should return a dict with exactly these keys.",
            expected=sorted(keys),
            actual=sorted(plan) if isinstance(plan, dict) else repr(plan),
        )
    return plan


@exercise("5.1")
def test_every_planned_batch_committed(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=3, committed=3)),
        {"next_batch": 3, "replays": False, "batch_timestamp_ms": None, "pinned": _conf()},
        "offsets/ and commits/ both hold batches 0, 1 and 2 (beside .crc and .tmp files): a "
        "restart plans a new batch, 3.",
    )


@exercise("5.1")
def test_an_uncommitted_batch_is_replayed_with_its_timestamp(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=5, committed=4)),
        {"next_batch": 4, "replays": True, "batch_timestamp_ms": _stamp(4), "pinned": _conf()},
        "Batch 4 is in offsets/ but not in commits/: the query died while running it.",
        hint="A replayed batch runs again with everything recorded for it, its batch timestamp "
        "included: read it from that batch's offsets file.",
    )


@exercise("5.1")
def test_a_first_batch_that_never_committed(nb, tmp_path):
    root = _fake_checkpoint(tmp_path / "ckpt", planned=1, committed=0)
    expect_equal(
        _plan(nb, root),
        {"next_batch": 0, "replays": True, "batch_timestamp_ms": _stamp(0), "pinned": _conf()},
        "offsets/0 was written but the query died before any commit (there is no commits/ folder).",
    )


@exercise("5.1")
def test_a_checkpoint_that_never_ran_a_batch(nb, tmp_path):
    expect_equal(
        _plan(nb, _fake_checkpoint(tmp_path / "ckpt", planned=0, committed=0)),
        {"next_batch": 0, "replays": False, "batch_timestamp_ms": None, "pinned": {}},
        "A query that started but never planned a batch leaves only its metadata: no offsets/ "
        "or commits/ folder.",
    )
    (tmp_path / "empty").mkdir()
    expect_equal(
        _plan(nb, tmp_path / "empty"),
        {"next_batch": 0, "replays": False, "batch_timestamp_ms": None, "pinned": {}},
        "An empty checkpoint folder.",
    )


@exercise("5.1")
def test_pinned_comes_from_the_newest_plan(nb, tmp_path):
    root = _fake_checkpoint(
        tmp_path / "ckpt", planned=12, committed=12, partitions_by_batch={9: 5, 11: 7}
    )
    expect_equal(
        _plan(nb, root),
        {"next_batch": 12, "replays": False, "batch_timestamp_ms": None, "pinned": _conf(7)},
        "Batches 0 to 11 planned and committed; offsets/11, the newest (after offsets/9: compare "
        "the numbers as numbers), pins 7 shuffle partitions.",
    )


# --- 5.5 · the audit --------------------------------------------------------------------


def _t(machine, previous, status, second, batch=0):
    return {
        "batch_id": batch,
        "machine_name": machine,
        "previous_status": previous,
        "status": status,
        "last_status_change_time": datetime.fromtimestamp(START.timestamp() + second, tz=UTC),
    }


CLEAN = [
    _t("m1", None, INITIALIZING, 0, 0),
    _t("m2", None, INITIALIZING, 0, 0),
    _t("m1", INITIALIZING, HEALTHY, 1, 1),
    _t("m2", INITIALIZING, HEALTHY, 1, 1),
    _t("m2", HEALTHY, UNHEALTHY, 7, 5),
    _t("m2", UNHEALTHY, HEALTHY, 9, 6),
]


def _audit(nb, transitions, states) -> list:
    problems = nb.audit(transitions, states)
    if not isinstance(problems, list) or not all(
        isinstance(p, tuple) and len(p) == 2 for p in problems
    ):
        raise CheckFailed(
            "audit() should return a list of (machine_name, problem) tuples.",
            expected="a list of 2-tuples",
            actual=repr(problems),
        )
    return problems


@exercise("5.5")
def test_a_clean_run_has_no_problem(nb):
    expect_equal(
        [
            _audit(nb, CLEAN, {"m1": HEALTHY, "m2": HEALTHY}),
            _audit(nb, CLEAN, {"m2": HEALTHY}),
        ],
        [[], []],
        "Every transition follows from the one before and the state agrees; then the same with "
        "m1 absent from the state (retired), which is fine.",
    )


@exercise("5.5")
def test_a_batch_written_twice_is_a_duplicate(nb):
    twice = CLEAN[:4] + CLEAN[2:4] + CLEAN[4:]
    expect_equal(
        _audit(nb, twice, {"m1": HEALTHY, "m2": HEALTHY}),
        [("m1", "duplicate"), ("m2", "duplicate")],
        "Batch 1 appears twice: both machines' Initializing -> Healthy rows repeated.",
    )


@exercise("5.5")
def test_a_missing_transition_is_lost(nb):
    gap = [r for r in CLEAN if not (r["machine_name"] == "m2" and r["status"] == UNHEALTHY)]
    expect_equal(
        [
            _audit(nb, gap, {"m1": HEALTHY, "m2": HEALTHY}),
            _audit(nb, CLEAN[2:3], {"m1": HEALTHY}),
        ],
        [[("m2", "lost")], [("m1", "lost")]],
        "m2's Healthy -> Unhealthy row is missing, so its Unhealthy -> Healthy row does not "
        "follow from Healthy; then a machine whose first row is Initializing -> Healthy.",
    )


@exercise("5.5")
def test_the_state_must_agree_with_the_output(nb):
    expect_equal(
        _audit(nb, CLEAN, {"m3": INITIALIZING, "m1": UNHEALTHY, "m2": HEALTHY}),
        [("m1", "state"), ("m3", "state")],
        "The state says m1 is Unhealthy (its rows end Healthy) and holds m3, which has no rows "
        "(they end in None). State problems come last, by machine name.",
    )


@exercise("5.5")
def test_problems_do_not_hide_each_other_and_keep_their_order(nb):
    messy = [
        CLEAN[0],
        CLEAN[2],
        CLEAN[2],
        _t("m1", UNHEALTHY, HEALTHY, 12, 7),
        CLEAN[1],
        CLEAN[3],
        CLEAN[3],
    ]
    expect_equal(
        _audit(nb, messy, {"m1": UNHEALTHY, "m2": UNHEALTHY}),
        [
            ("m1", "duplicate"),
            ("m1", "lost"),
            ("m2", "duplicate"),
            ("m1", "state"),
            ("m2", "state"),
        ],
        "m1's Healthy row twice, then a recovery from an Unhealthy it never reported; m2's "
        "Healthy row twice; and a state that says both are Unhealthy.",
        hint="After a bad row, carry on from its status; list the transitions' problems in "
        "their order, then the state's problems by machine name.",
    )


# --- 5.6 to 5.8 · the catch-up processor on TwsTester ---------------------------------------

PARTITION_OF = {"m1": "0", "m2": "0", "m3": "1", "m4": "1", "m5": "1", "m6": "0"}
_REFERENCE: list = []


def _reference():
    """Lab 05's solution module: the course's code for the steps not under test."""
    if not _REFERENCE:
        _REFERENCE.append(load_solution("05"))
    return _REFERENCE[0]


def _timers_under_test(nb):
    """5.6: the learner's handleExpiredTimer, the course's handleInputRows and read_until."""
    ref = _reference()
    return type(
        "CatchUpTimersUnderTest",
        (nb.CatchUpTimers,),
        {
            "handleInputRows": ref.CatchUpReader.handleInputRows,
            "read_until": ref.CatchUpProcessor.read_until,
        },
    )


def _reader_under_test(nb):
    """5.7: the learner's handleInputRows, the course's handleExpiredTimer."""
    ref = _reference()
    return type(
        "CatchUpReaderUnderTest",
        (nb.CatchUpReader,),
        {"handleExpiredTimer": ref.CatchUpTimers.handleExpiredTimer},
    )


def _read_until_under_test(nb):
    """5.8: the learner's read_until, the course's handlers."""
    ref = _reference()
    return type(
        "CatchUpProcessorUnderTest",
        (nb.CatchUpProcessor,),
        {
            "handleInputRows": ref.CatchUpReader.handleInputRows,
            "handleExpiredTimer": ref.CatchUpTimers.handleExpiredTimer,
        },
    )


def _after_start(when: datetime) -> int:
    """Milliseconds after START. Naive datetimes are local times, as PySpark hands them out."""
    return round(when.timestamp() * 1000) - START_MS


def _summ(rows, who: str) -> list[tuple]:
    out = []
    for row in rows:
        fields = getattr(row, "__fields__", [])
        if not isinstance(row, Row) or "noticed_time" not in fields:
            raise CheckFailed(
                f"{who} should yield transition_row(...) rows.",
                expected="Row(machine_name, status, previous_status, last_status_change_time, "
                "noticed_time)",
                actual=repr(row),
            )
        for name in ("last_status_change_time", "noticed_time"):
            if not isinstance(row[name], datetime):
                raise CheckFailed(
                    f"{name} should be a datetime (transition_row converts milliseconds).",
                    expected="a datetime",
                    actual=repr(row[name]),
                )
        out.append(
            (
                row.machine_name,
                row.previous_status,
                row.status,
                _after_start(row.last_status_change_time),
                _after_start(row.noticed_time),
            )
        )
    return out


def _by_time(row: tuple) -> tuple:
    return row[3], row[0], row[1] or "", row[2]


def _facts(rows) -> list[tuple]:
    """What happened, without when it was noticed."""
    return sorted((r[:4] for r in rows), key=_by_time)


ROWS = (
    "Rows as (machine, previous_status, status, changed at ms, noticed at ms), ms after the start."
)
FACTS = "Changes as (machine, previous_status, status, changed at ms), ms after the start."


class PartitionLogs:
    """Event hub partitions as logs, read in micro-batches by a catch-up processor on a
    TwsTester, in Spark's order: every partition's rows, then the timers that are due. Each row
    carries its sequence number and the newest sequence number its partition held when the
    batch was planned, as the eventhubs source's systemProperties say. Times are ms after START."""

    def __init__(self, processor_class, timeout_ms: int = 5_000, retire_after_ms: int = 3_600_000):
        processor = processor_class(timeout_ms=timeout_ms, retire_after_ms=retire_after_ms)
        if not isinstance(processor, StatefulProcessor):
            raise CheckFailed(
                "The catch-up processor should be a StatefulProcessor.",
                expected="a StatefulProcessor",
                actual=type(processor).__name__,
            )
        self.name = processor_class.__name__.replace("UnderTest", "")
        self.tester = TwsTester(processor, timeMode="ProcessingTime")
        self.log = defaultdict(list)  # partition -> [(sent ms, machine)]
        self.read = defaultdict(int)  # partition -> next sequence number to read
        self.extra = defaultdict(list)  # partition -> rows to add to its next batch as they are
        self.now = 0

    def send(self, machine: str, *sent_ms: int) -> None:
        """Heartbeats sent at ``sent_ms``; the hub keeps each partition in time order."""
        partition = PARTITION_OF[machine]
        expect_that(
            not self.read[partition],
            "a check sends before it reads (a course bug)",
            expected=f"nothing read yet from partition {partition}",
            actual=f"{self.read[partition]} heartbeat(s) read from it",
        )
        self.log[partition] = sorted(self.log[partition] + [(sent, machine) for sent in sent_ms])

    def seed(self, partition: str, machines: dict, timer_ms: int | None) -> None:
        """A partition as an earlier batch left it: its machines, and its timer if it has one."""
        names = list(machines)
        statuses = [machines[n][0] for n in names]
        lasts = [START_MS + machines[n][1] for n in names]
        timer = None if timer_ms is None else START_MS + timer_ms
        self.tester.updateValueState("partition", partition, (names, statuses, lasts, timer))
        if timer is not None:
            register_timer(self.tester, partition, timer)

    def batch(self, now: int, limit: int | None = None) -> list[tuple]:
        expect_that(
            now > self.now,
            "a check's clock must move forward (a course bug)",
            expected=f"a time after {self.now} ms",
            actual=f"{now} ms",
        )
        self.now = now
        rows_by_partition = {}
        for partition in sorted(set(self.log) | set(self.extra)):
            entries = self.log[partition]
            there = [
                (self.read[partition] + i, sent, m)
                for i, (sent, m) in enumerate(entries[self.read[partition] :])
                if sent <= now
            ]
            taken = there[:limit] if limit else there
            self.read[partition] += len(taken)
            rows = [
                self._row(partition, m, sent, sequence, there[-1][0]) for sequence, sent, m in taken
            ] + self.extra.pop(partition, [])
            if not self.log[partition]:
                del self.log[partition]
            if rows:
                rows_by_partition[partition] = rows
        with handler_must_yield(f"{self.name}'s handler", "transition_row(...)"):
            out = spark_batch(self.tester, START_MS + now, rows_by_partition)
        return _summ(out, self.name)

    def run(
        self,
        until_ms: int,
        down: tuple[int, int] | None = None,
        limit: int | None = None,
        every_ms: int = 500,
    ) -> list[tuple]:
        """Batches every ``every_ms`` up to ``until_ms``; none while the query is ``down``."""
        out, now = [], self.now + every_ms
        while now <= until_ms:
            if down and down[0] <= now < down[1]:
                now = down[1]
                continue
            out += self.batch(now, limit)
            now += every_ms
        return out

    @staticmethod
    def _row(
        partition: str, machine: str, sent: int, sequence: int | None, last: int | None
    ) -> Row:
        return Row(
            partition=partition,
            machine_name=machine,
            event_time=datetime.fromtimestamp((START_MS + sent) / 1000, tz=UTC),
            sequence_number=sequence,
            last_enqueued_sequence_number=last,
        )

    def timers(self, partition: str) -> list[int]:
        return [t - START_MS for t in pending_timers(self.tester, partition)]

    def state(self, partition: str) -> tuple | None:
        """(machines as name -> (status, last ms), timer ms) as the state holds them."""
        value = self.tester.peekValueState("partition", partition)
        if value is None:
            return None
        names, statuses, lasts, timer = value
        machines = {n: (s, last - START_MS) for n, s, last in zip(names, statuses, lasts)}
        return machines, None if timer is None else timer - START_MS


def _fleet(hub: PartitionLogs, machines, first_s: int, last_s: int, skip=()) -> None:
    """One heartbeat a second from each machine, ``skip`` seconds left out."""
    for machine in machines:
        hub.send(machine, *[s * 1000 for s in range(first_s, last_s + 1) if s not in skip])


def _story(processor_class, down=None, limit=None) -> list[tuple]:
    """m1, m3, m4 send all along; m2 stops after 11 s; m5 starts at 12 s; m6 sends once, at 20 s;
    m4 pauses from 31 s to 49 s."""
    hub = PartitionLogs(processor_class)
    _fleet(hub, ["m1", "m3"], 1, 200)
    _fleet(hub, ["m4"], 1, 200, skip=range(31, 50))
    _fleet(hub, ["m2"], 1, 11)
    _fleet(hub, ["m5"], 12, 200)
    hub.send("m6", 20_000)
    return hub.run(180_000, down, limit)


STORY = [
    ("m2", HEALTHY, UNHEALTHY, 16_000),
    ("m5", None, INITIALIZING, 12_000),
    ("m5", INITIALIZING, HEALTHY, 13_000),
    ("m6", None, INITIALIZING, 20_000),
    ("m6", INITIALIZING, UNHEALTHY, 25_000),
    ("m4", HEALTHY, UNHEALTHY, 35_000),
    ("m4", UNHEALTHY, HEALTHY, 50_000),
]


# --- 5.6 · the partition's timer --------------------------------------------------------------


@exercise("5.6")
def test_a_quiet_partition_times_out_at_each_deadline(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed("0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 8_000)}, 13_000)
    hub.seed("1", {"m3": (INITIALIZING, 9_000)}, 14_000)
    rows = hub.run(20_000, every_ms=500)
    expect_equal(
        rows,
        [
            ("m2", HEALTHY, UNHEALTHY, 13_000, 13_000),
            ("m3", INITIALIZING, UNHEALTHY, 14_000, 14_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ],
        f"Partition 0: m1 (Healthy, last heartbeat 10000) and m2 (Healthy, 8000), timer at "
        f"13000; partition 1: m3 (Initializing, 9000), timer at 14000; batches without rows "
        f"every 500 ms to 20000, timeout 5000. {ROWS}",
    )
    expect_equal(
        [hub.state("0"), hub.state("1"), hub.timers("0"), hub.timers("1")],
        [
            ({"m1": (UNHEALTHY, 10_000), "m2": (UNHEALTHY, 8_000)}, 3_608_000),
            ({"m3": (UNHEALTHY, 9_000)}, 3_609_000),
            [3_608_000],
            [3_609_000],
        ],
        "Afterwards: each partition's state (machines, recorded timer) and its pending timers. "
        "Every machine is Unhealthy: nothing can time out, so the one timer waits for the first "
        "retirement, last heartbeat + retire_after_ms (3600000 here).",
        hint="Save the machines with the timer rearm() returns, and keep last_heartbeat_ms as it "
        "was: an Unhealthy machine keeps the time of its last heartbeat.",
    )


@exercise("5.6")
def test_one_timer_moves_to_the_next_deadline(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed(
        "0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 10_001), "m6": (UNHEALTHY, 2_000)}, 15_000
    )
    rows = hub.batch(15_000)
    expect_equal(
        [rows, hub.timers("0"), hub.state("0")],
        [
            [("m1", HEALTHY, UNHEALTHY, 15_000, 15_000)],
            [15_001],
            (
                {"m1": (UNHEALTHY, 10_000), "m2": (HEALTHY, 10_001), "m6": (UNHEALTHY, 2_000)},
                15_001,
            ),
        ],
        "Partition 0: m1 (Healthy, 10000), m2 (Healthy, 10001), m6 (Unhealthy, 2000), timer at "
        "15000; a batch without rows at exactly 15000: [rows, pending timers, state].",
        hint="A deadline at now is due. The one timer then goes to the earliest deadline still "
        "to come (here a millisecond after now), and the state records it.",
    )


@exercise("5.6")
def test_changes_come_in_deadline_order(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed(
        "0", {"m1": (HEALTHY, 10_000), "m2": (INITIALIZING, 8_000), "m6": (HEALTHY, 9_000)}, 13_000
    )
    expect_equal(
        hub.batch(16_000),
        [
            ("m2", INITIALIZING, UNHEALTHY, 13_000, 16_000),
            ("m6", HEALTHY, UNHEALTHY, 14_000, 16_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 16_000),
        ],
        f"Partition 0: m1 (last heartbeat 10000), m2 (8000), m6 (9000), timer at 13000; the "
        f"first batch after it comes at 16000. {ROWS}",
    )


@exercise("5.6")
def test_a_leftover_timer_changes_nothing(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed("0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 10_000)}, 15_000)
    register_timer(hub.tester, "0", START_MS + 12_000)  # not the timer the state records
    # The partition's rows of the batch at 20000: a range cut short, read up to 11000 only.
    hub.extra["0"] = [
        PartitionLogs._row("0", "m1", 11_000, 5, 9),
        PartitionLogs._row("0", "m2", 11_000, 6, 9),
    ]
    rows = hub.batch(20_000)
    expect_equal(
        [rows, hub.timers("0"), hub.state("0")],
        [[], [20_001], ({"m1": (HEALTHY, 11_000), "m2": (HEALTHY, 11_000)}, 20_001)],
        "Partition 0 (m1 and m2, last heartbeats at 10000, timer at 15000) also has a leftover "
        "timer at 12000. The batch at 20000 holds its rows up to 11000 only (a range cut "
        "short), so their deadlines, 16000, are not known to have passed; the rows handler "
        "moves the partition's timer to 20001, then the leftover fires: [rows, pending timers, "
        "state].",
        hint="Compare the timer that fired (expiredTimerInfo) with the one the state records: "
        "any other changes nothing.",
    )


@exercise("5.6")
def test_a_fleet_gone_silent_times_out_on_its_timers(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3"], 1, 10)
    _fleet(hub, ["m4"], 1, 8)
    rows = [r for r in hub.run(30_000) if r[2] == UNHEALTHY]
    expect_equal(
        sorted(rows, key=_by_time),
        [
            ("m4", HEALTHY, UNHEALTHY, 13_000, 13_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m3", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ],
        f"Every machine stopped (m4 after 8 s, the others after 10 s) and no row arrives any "
        f"more: only the partitions' timers can tell. {ROWS}",
    )


@exercise("5.6")
def test_a_machine_silent_for_retire_after_ms_is_retired(nb):
    hub = PartitionLogs(_timers_under_test(nb), retire_after_ms=30_000)
    _fleet(hub, ["m1"], 1, 10)
    _fleet(hub, ["m2"], 1, 4)
    hub.run(10_000)
    rows = hub.run(36_000)
    expect_equal(
        [rows, hub.state("0"), hub.timers("0")],
        [
            [("m1", HEALTHY, UNHEALTHY, 15_000, 15_000)],
            ({"m1": (UNHEALTHY, 10_000)}, 40_000),
            [40_000],
        ],
        f"Partition 0: m1 sends from 1000 to 10000 ms, m2 from 1000 to 4000 (Unhealthy at 9000), "
        f"then nothing; timeout 5000, retire_after_ms 30000. Batches without rows every 500 ms "
        f"from 10500 to 36000: [rows, the state at 36000 (machines, recorded timer), pending "
        f"timers]. m2 retired at 34000, without a row. {ROWS}",
        hint="A retirement is a deadline too: what expire() did must be saved even when no row "
        "comes of it, and the timer goes on to the next retirement.",
    )
    rows = hub.run(41_000)
    expect_equal(
        [rows, hub.state("0") or ({}, None), hub.timers("0")],
        [[], ({}, None), []],
        "The same partition at 41000 ms, after m1's retirement at 40000: [rows, the state "
        "(machines, recorded timer; no value at all counts as no machine), pending timers].",
    )
    hub.extra["0"] = [PartitionLogs._row("0", "m2", 45_000, None, None)]
    expect_equal(
        hub.batch(45_500),
        [("m2", None, INITIALIZING, 45_000, 45_500)],
        f"m2, retired at 34000, sends again at 45000 ms, read at 45500: it starts over as a new "
        f"machine. {ROWS}",
    )


# --- 5.7 · heartbeats in event time, every range read to its end ------------------------------


def _reader_story(nb, down=None) -> list[tuple]:
    return _story(_reader_under_test(nb), down)


@exercise("5.7")
def test_steady_traffic_is_initializing_then_healthy(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3", "m4", "m5"], 1, 30)
    expect_equal(
        sorted(hub.run(30_000), key=_by_time),
        sorted(
            [(m, None, INITIALIZING, 1_000, 1_000) for m in ("m1", "m2", "m3", "m4", "m5")]
            + [(m, INITIALIZING, HEALTHY, 2_000, 2_000) for m in ("m1", "m2", "m3", "m4", "m5")],
            key=_by_time,
        ),
        f"Five machines sending a heartbeat a second from 1000 to 30000, read every 500 ms. {ROWS}",
    )


@exercise("5.7")
def test_a_silent_machine_is_unhealthy_at_its_deadline_and_healthy_when_back(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1"], 1, 40)
    _fleet(hub, ["m2"], 1, 40, skip=range(11, 20))
    rows = [r for r in hub.run(40_000) if r[0] == "m2" and r[1] is not None]
    expect_equal(
        rows,
        [
            ("m2", INITIALIZING, HEALTHY, 2_000, 2_000),
            ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m2", UNHEALTHY, HEALTHY, 20_000, 20_000),
        ],
        f"m2 sends nothing from 11000 to 19000 while m1, on the same partition, keeps sending "
        f"and every batch reads the partition to its end. {ROWS}",
        hint="The partition read to its end holds nothing newer up to read_until's answer: a "
        "deadline at or before it has passed in silence.",
    )


@exercise("5.7")
def test_a_backlog_in_one_batch_tells_the_whole_story(nb):
    restarted = _reader_story(nb, down=(10_000, 130_000))
    first = [r for r in restarted if r[4] == 130_000]
    expect_equal(
        first,
        sorted(
            [(*r, 130_000) for r in STORY if r[3] >= 10_000],
            key=lambda r: (PARTITION_OF[r[0]], *_by_time(r)),
        ),
        f"Down from 10000 to 130000 ms; the restart's first batch reads the whole backlog: m2 "
        f"stopped after 11 s, m5 started at 12 s, m6 sent once at 20 s, m4 paused from 31 to "
        f"49 s. Its rows, partition 0's and then partition 1's, each in the order the changes "
        f"happened. {ROWS}",
        hint="Inside one batch, a machine can fall silent and come back: before each "
        "heartbeat, the deadlines that passed before it are due.",
    )


@pytest.mark.parametrize("down_ms", [3_000, 120_000], ids=["3 s", "2 min"])
@exercise("5.7")
def test_downtime_is_not_silence(nb, down_ms):
    live = _reader_story(nb)
    restarted = _reader_story(nb, down=(10_000, 10_000 + down_ms))
    expect_equal(
        _facts(restarted),
        _facts(live),
        f"Down from 10000 ms for {down_ms} ms, against the same story without downtime: the "
        f"same changes, at the same times. {FACTS}",
    )


@exercise("5.7")
def test_a_heartbeat_at_the_deadline_is_in_time(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    hub.send("m1", 1_000, 2_000, 7_000, 12_000, 17_001)
    rows = hub.run(25_000, down=(2_500, 24_000))
    expect_equal(
        _facts(rows),
        [
            ("m1", None, INITIALIZING, 1_000),
            ("m1", INITIALIZING, HEALTHY, 2_000),
            ("m1", HEALTHY, UNHEALTHY, 17_000),
            ("m1", UNHEALTHY, HEALTHY, 17_001),
            ("m1", HEALTHY, UNHEALTHY, 22_001),
        ],
        f"m1 sends at 1000, 2000, 7000, 12000 and 17001 ms (timeout 5000), the last three read "
        f"in one batch at 24000 after a downtime. {FACTS}",
        hint="A heartbeat exactly at the deadline is in time; one a millisecond later is not.",
    )


@exercise("5.7")
def test_late_and_duplicate_heartbeats_change_nothing(nb):
    plain = PartitionLogs(_reader_under_test(nb))
    _fleet(plain, ["m1", "m2"], 1, 20)
    expected = plain.run(20_000)
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2"], 1, 20)
    out = hub.run(6_000)
    again = PartitionLogs._row("0", "m1", 5_000, 9, 9)  # a heartbeat delivered twice
    old = PartitionLogs._row("0", "m2", 1_500, None, None)  # one from before the machine's newest
    hub.extra["0"] = [again, old]
    out += hub.run(27_000)
    # m2 is Unhealthy since 25000; its last heartbeat, at 20000, delivered once more.
    hub.extra["0"] = [PartitionLogs._row("0", "m2", 20_000, 40, 40)]
    out += hub.run(28_000)
    expected += plain.run(28_000)
    expect_equal(
        _facts(out),
        _facts(expected),
        f"m1's heartbeat at 5000 ms delivered a second time, one of m2 stamped 1500 ms arriving "
        f"after newer ones, and m2's last heartbeat (20000 ms) delivered again after m2 turned "
        f"Unhealthy, against the same story without them. {FACTS}",
        hint="A heartbeat no newer than the machine's latest one, equal included, is old news.",
    )


@exercise("5.7")
def test_one_value_and_one_timer_per_partition(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3", "m4", "m5"], 1, 30)
    _fleet(hub, ["m6"], 1, 3)
    hub.send("m6", 25_001)
    hub.run(30_000)
    expect_equal(
        [hub.timers("0"), hub.state("0"), hub.timers("1"), sorted(hub.state("1")[0])],
        [
            [30_001],
            ({"m1": (HEALTHY, 30_000), "m2": (HEALTHY, 30_000), "m6": (HEALTHY, 25_001)}, 30_001),
            [35_000],
            ["m3", "m4", "m5"],
        ],
        "After 30 s of heartbeats (m6 only until 3 s, and once more at 25001), at 30000 ms: "
        "partition 0's pending timers and state (machines, recorded timer), then partition 1's "
        "timers and machines. m6's deadline is a millisecond after the batch.",
        hint="rearm() moves the partition's one timer and returns it: save that. Never at or "
        "before now, but no later than the earliest deadline after it.",
    )


@exercise("5.7")
def test_a_machine_silent_for_retire_after_ms_comes_back_as_a_new_one(nb):
    expected = [
        ("m2", None, INITIALIZING, 1_000),
        ("m2", INITIALIZING, HEALTHY, 2_000),
        ("m2", HEALTHY, UNHEALTHY, 10_000),
        ("m2", None, INITIALIZING, 50_000),
        ("m2", INITIALIZING, HEALTHY, 51_000),
        ("m2", HEALTHY, UNHEALTHY, 56_000),
    ]
    for down in (None, (20_000, 60_000)):
        hub = PartitionLogs(_reader_under_test(nb), retire_after_ms=30_000)
        _fleet(hub, ["m1"], 1, 70)
        hub.send("m2", 1_000, 2_000, 3_000, 4_000, 5_000, 50_000, 51_000)
        rows = hub.run(35_000, down)
        if down is None:
            expect_equal(
                sorted(hub.state("0")[0]),
                ["m1"],
                "m1 sends every second; m2 from 1000 to 5000 ms, then nothing until 50000 "
                "(timeout 5000, retire_after_ms 30000). The machines partition 0's state holds "
                "after the batch at 35000 ms, m2's retirement.",
                hint="The partition read up to read_until's answer shows m2 silent past its "
                "retirement: expire() up to that time retires it.",
            )
        rows += hub.run(60_000, down)
        when = "read live" if down is None else "read in one batch at 60000 after a downtime"
        expect_equal(
            _facts(r for r in rows if r[0] == "m2"),
            expected,
            f"m2 sends from 1000 to 5000 ms, then at 50000 and 51000, while m1 sends every second "
            f"(timeout 5000, retire_after_ms 30000), {when}: m2 retires at 35000 and comes back "
            f"as a new machine. {FACTS}",
            hint="Before each heartbeat, what was due before it happens first: a retirement too.",
        )


# --- 5.8 · how far a range is known to be read ------------------------------------------------


def _until(nb, rows: list, now_s: float) -> float:
    processor = nb.CatchUpProcessor(timeout_ms=5_000)
    return (processor.read_until(rows, START_MS + round(now_s * 1000)) - START_MS) / 1000


def _r(second: float, sequence, end, machine: str = "m1") -> Row:
    return PartitionLogs._row("0", machine, round(second * 1000), sequence, end)


#: What a failed fix of 5.8 is about, whatever the diagnosis said.
FIX_HINT_5_8 = (
    "read_until must say how far the partition is known to be read, and a range reached the "
    "partition's end only when its rows say so."
)


@exercise("5.8", part="fix", hint=FIX_HINT_5_8)
def test_how_far_a_range_is_known_to_be_read(nb):
    cases = [
        ("read to its end", [_r(10, 7, 9), _r(11, 8, 9), _r(12, 9, 9)], 13, 13),
        ("cut short", [_r(10, 7, 15), _r(11, 8, 15), _r(12, 9, 15)], 13, 12),
        ("without sequence numbers", [_r(10, None, None), _r(12, None, None)], 13, 12),
        ("one row without the end", [_r(10, 7, 8), _r(12, 8, None)], 13, 12),
        ("the hub's clock ahead", [_r(10, 7, 8), _r(14, 8, 8)], 13, 14),
        ("a row without its number", [_r(10, 7, 9), _r(12, None, 9)], 13, 12),
        ("a repeated row newest, cut", [_r(10, 7, 12), _r(12.5, 3, 12, "m2")], 13, 12.5),
        ("a late row newest", [_r(10, 7, 12), _r(12.5, None, None, "m2")], 13, 12.5),
        ("ends that differ", [_r(10, 7, 8), _r(11, 9, 9)], 13, 13),
    ]
    expect_equal(
        [(what, _until(nb, rows, now)) for what, rows, now, _ in cases],
        [(what, expected) for what, _, _, expected in cases],
        "read_until(rows, now) for each case, as (case, answer in seconds after the start); the "
        "rows are (event time, sequence_number, last_enqueued_sequence_number): "
        + "; ".join(
            f"{what}: {[(_after_start(r.event_time) / 1000, r.sequence_number, r.last_enqueued_sequence_number) for r in rows]}, now {now}"
            for what, rows, now, _ in cases
        ),
    )


@exercise("5.8", part="fix", hint=FIX_HINT_5_8)
def test_a_backlog_read_in_many_batches_gives_the_same_answers(nb):
    live = _story(_read_until_under_test(nb))
    limited = _story(_read_until_under_test(nb), down=(10_000, 130_000), limit=3)
    expect_equal(
        _facts(limited),
        _facts(live),
        f"After 120 s of downtime the backlog is read three heartbeats per partition per batch "
        f"(maxEventsPerTrigger), against the same story without downtime. {FACTS}",
        hint="The answers change when the backlog is read a few heartbeats at a time: ask "
        "what read_until may claim about a partition for a range that stopped before the "
        "partition's end.",
    )


# --- Spark plumbing shared by 5.2, 5.3, 5.4, 5.8 and 5.9 ---------------------------------------

_mtime = [0]


def _write(folder: Path, name: str, rows: list[dict]) -> None:
    """One JSON file, dated after every file written before (the file source reads in
    modification-time order)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.json"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    _mtime[0] += 1
    stamp = START.timestamp() + _mtime[0]
    os.utime(path, (stamp, stamp))


def _lab04_beats(machines: list[str]) -> list[dict]:
    return [{"machine_name": m, "machine_time": START.isoformat()} for m in machines]


LAB04_SCHEMA = "machine_name STRING, machine_time TIMESTAMP"
STATUS_SCHEMA = (
    "machine_name STRING, status STRING, previous_status STRING, last_status_change_time TIMESTAMP"
)


def _reference_changes(spark, folder: Path, timeout_ms: int, processor=None):
    heartbeats = spark.readStream.schema(LAB04_SCHEMA).json(str(folder))
    return heartbeats.groupBy("machine_name").transformWithState(
        processor or ReferenceHeartbeatProcessor(timeout_ms),
        STATUS_SCHEMA,
        "Append",
        "ProcessingTime",
    )


def _start(spark, writer):
    # Processing-time timers make Spark run a batch every trigger even without data, so an
    # availableNow query would never end; without no-data batches it ends once input is done.
    spark.conf.set(NO_DATA_BATCHES, "false")
    try:
        return writer.start()
    finally:
        spark.conf.unset(NO_DATA_BATCHES)


def _run_to_parquet(spark, changes, checkpoint: Path, output: Path) -> None:
    writer = (
        changes.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    finish(_start(spark, writer), within=240, what="the check's query to read its heartbeats")


def _run_to_batches(spark, changes, checkpoint: Path, output: Path) -> None:
    """One life of a query into output/batch_id=N folders, replaced on a replay."""
    writer = (
        changes.writeStream.foreachBatch(batch_writer(output, "spark"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    finish(
        _start(spark, writer),
        within=240,
        what="the check's query over your processor to read its heartbeats",
    )


# --- 5.2 · an exactly-once sink -------------------------------------------------------------


def _frame(spark, machines: list[str], status: str = INITIALIZING):
    return spark.createDataFrame([(m, status, None, START) for m in machines], STATUS_SCHEMA)


def _sunk(spark, output: Path) -> list[tuple]:
    df = spark.read.parquet(str(output))
    if "batch_id" not in df.columns:
        raise CheckFailed(
            "Reading the sink's folder with spark.read.parquet() should give a batch_id column: "
            "name each batch's folder batch_id=<id>.",
            expected="folders batch_id=0, batch_id=1, ...",
            actual=sorted(p.name for p in output.iterdir()),
        )
    return sorted((r.batch_id, r.machine_name, r.status) for r in df.collect())


def _writer(nb, output: Path):
    write = nb.batch_writer(str(output))
    if not callable(write):
        raise CheckFailed(
            "batch_writer(output) should return a function write(batch, batch_id) for "
            "foreachBatch.",
            expected="a function",
            actual=repr(write),
        )
    return write


def _first_writer(output: str):
    """The notebook's found sink, as it is given: each batch's rows added to the folder."""

    def write(batch, batch_id: int) -> None:
        batch.withColumn("batch_id", F.lit(batch_id)).write.mode("append").parquet(output)

    return write


def _ints(value, name: str, what: str) -> list[int]:
    if not isinstance(value, list | tuple) or not all(
        isinstance(n, int) and not isinstance(n, bool) for n in value
    ):
        raise CheckFailed(
            f"{name} should be {what}.", expected="a list of ints", actual=repr(value)
        )
    return list(value)


def _diagnosis_5_2(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS_5_2", ["third_life_ran", "rows_per_batch"])
    return {
        "third_life_ran": _ints(
            answer["third_life_ran"],
            "DIAGNOSIS_5_2['third_life_ran']",
            "the list of the batch ids that life 3 ran",
        ),
        "rows_per_batch": _ints(
            answer["rows_per_batch"],
            "DIAGNOSIS_5_2['rows_per_batch']",
            "a list of ints: the output's rows for batch 0, batch 1, ...",
        ),
    }


def _first_lives_show(spark, folder: Path) -> dict:
    """The notebook's three lives through the found sink (a: Producers 1 and 2; b: Producers 1,
    2 and 3; the newest commit deleted before life 3), as Spark shows them: the batches life 3's
    progress reports name, and the output's rows per batch id."""
    incoming, checkpoint, output = folder / "incoming", folder / "checkpoint", folder / "output"
    write = _first_writer(str(output))

    def life():
        writer = (
            _reference_changes(spark, incoming, 60_000)
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
        )
        query = _start(spark, writer)
        finish(query, within=240, what="the check's run of the found sink")
        return query

    _write(incoming, "a", _lab04_beats(["Producer 1", "Producer 2"]))
    life()
    _write(incoming, "b", _lab04_beats(["Producer 1", "Producer 2", "Producer 3"]))
    life()
    commits = checkpoint / "commits"
    newest = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    (commits / str(newest)).unlink()
    (commits / f".{newest}.crc").unlink(missing_ok=True)
    third = life()
    counts = defaultdict(int)
    for row in spark.read.parquet(str(output)).collect():
        counts[row.batch_id] += 1
    return {
        "third_life_ran": sorted(p["batchId"] for p in third.recentProgress),
        "rows_per_batch": [counts[b] for b in range(max(counts) + 1)],
    }


#: What a failed fix of 5.2 is about, whatever the diagnosis said.
FIX_HINT_5_2 = (
    "When Spark runs a batch again after a crash, what does the writer know about it that it "
    "knew the first time? Use that to find what an earlier attempt left, and replace it "
    "instead of adding to it."
)


@exercise("5.2", timeout=300, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_sink(nb, spark, tmp_path):
    diagnosis = _diagnosis_5_2(nb.DIAGNOSIS_5_2)
    spark_shows = spark_facts(
        "5.2 the found sink", lambda: _first_lives_show(spark, tmp_path), check=__file__
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS_5_2 against three lives of lab 04's query through first_writer, the "
        "newest commits/N deleted before life 3: the batch ids that life 3's progress reports "
        "name, and how many rows the output holds for batch 0, batch 1, ...",
        hint="Read first_lives[2].recentProgress for the batches life 3 ran, and count the "
        "output's rows per batch_id with spark.read.parquet, rather than reasoning from the code.",
    )


@exercise("5.2", timeout=120, part="fix", hint=FIX_HINT_5_2)
def test_each_batch_lands_in_its_own_folder(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m3"]), 1)
    expect_equal(
        [
            sorted(p.name for p in output.iterdir() if not p.name.startswith(("_", "."))),
            _sunk(spark, output),
        ],
        [
            ["batch_id=0", "batch_id=1"],
            [(0, "m1", INITIALIZING), (0, "m2", INITIALIZING), (1, "m3", INITIALIZING)],
        ],
        "Two batches written: [the folders readers see, what spark.read.parquet(output) reads "
        "as (batch_id, machine, status)].",
    )


@exercise("5.2", timeout=120, part="fix", hint=FIX_HINT_5_2)
def test_a_retried_batch_replaces_the_first_attempt(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m1"], HEALTHY), 1)
    write(_frame(spark, ["m1", "m2"], HEALTHY), 1)  # batch 1 again, after a crash
    write(_frame(spark, []), 2)  # a batch without transitions
    expect_equal(
        [_sunk(spark, output), (output / "batch_id=2").is_dir()],
        [
            [
                (0, "m1", INITIALIZING),
                (0, "m2", INITIALIZING),
                (1, "m1", HEALTHY),
                (1, "m2", HEALTHY),
            ],
            True,
        ],
        "Batch 0; batch 1 with m1; batch 1 again with m1 and m2; an empty batch 2: [what the "
        "sink reads as (batch_id, machine, status), whether batch_id=2 exists].",
        hint="A second attempt replaces the first: only its rows may remain under batch_id=1. "
        "An empty batch still gets its folder.",
    )


# --- 5.3 · predict: three lives of one query ------------------------------------------------


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
        commits = checkpoint_dir / "commits"
        newest = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
        (commits / str(newest)).unlink()
        (commits / f".{newest}.crc").unlink(missing_ok=True)
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


# --- 5.4 · the state data source ------------------------------------------------------------

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
    df = expect_dataframe(
        nb.machine_states(spark, checkpoint),
        "machine_states",
        ["machine_name", "status", "last_seen_ms"],
    )
    expect_equal(
        sorted(tuple(r) for r in df.collect()),
        [("m1", HEALTHY, second), ("m2", UNHEALTHY, first), ("m3", INITIALIZING, second)],
        "machine_states() after two runs: m2 timed out; last_seen_ms is the processing time of "
        "the batch that last saw each machine.",
    )


@exercise("5.4", timeout=300)
def test_machine_timers(nb, spark, tmp_path_factory):
    checkpoint, first, second = _state_checkpoint(spark, tmp_path_factory)
    df = expect_dataframe(
        nb.machine_timers(spark, checkpoint), "machine_timers", ["machine_name", "expires_at_ms"]
    )
    expect_equal(
        sorted(tuple(r) for r in df.collect()),
        [("m1", second + 1), ("m2", first + 3_600_000), ("m3", second + 1)],
        "machine_timers(): the pending timers (m2's is its retirement timer, an hour after it "
        "was last seen).",
    )


@exercise("5.4", timeout=300)
def test_state_history(nb, spark, tmp_path_factory):
    checkpoint, _, _ = _state_checkpoint(spark, tmp_path_factory)
    df = expect_dataframe(
        nb.state_history(spark, checkpoint),
        "state_history",
        ["batch_id", "change_type", "machine_name", "status"],
    )
    expected = [
        (0, "update", "m1", INITIALIZING),
        (0, "update", "m2", INITIALIZING),
        (1, "update", "m1", HEALTHY),
        (1, "update", "m2", UNHEALTHY),
        (1, "update", "m3", INITIALIZING),
    ]
    expect_equal(
        [
            sorted(tuple(r) for r in df.collect()),
            sorted(tuple(r) for r in nb.state_history(spark, checkpoint, 1).collect()),
        ],
        [expected, expected[2:]],
        "[state_history(spark, checkpoint), state_history(spark, checkpoint, 1)]: the change "
        "feed of machine from batch 0, then from batch 1.",
        hint="Pass since_batch as changeStartBatchId.",
    )


# --- 5.8 · catch-up, on Spark ------------------------------------------------------------------

HEARTBEAT_SCHEMA = (
    "partition STRING, machine_name STRING, event_time TIMESTAMP, "
    "sequence_number LONG, last_enqueued_sequence_number LONG"
)
SPARK_MACHINES = ["m1", "m2", "m3", "m4"]


def _hub_rows(machine: str, seconds) -> list[dict]:
    return [
        {
            "partition": PARTITION_OF[machine],
            "machine_name": machine,
            "event_time": datetime.fromtimestamp(START.timestamp() + s, tz=UTC).isoformat(),
        }
        for s in seconds
    ]


# The notebook's backlog for 5.8's diagnosis: every machine once a second from 1 s to 12 s, the
# fourth of them silent from 5 s to 10 s; three ranges of event time, one file (and micro-batch)
# each; the partitions' machines as the notebook's PARTITION_OF puts them.
BACKLOG_PARTITIONS = {"Producer 1": "0", "Producer 2": "0", "Producer 3": "1", "Producer 4": "1"}
BACKLOG_SILENT = {"Producer 4": range(5, 11)}
BACKLOG_RANGES = [(1, 4), (5, 8), (9, 12)]


def _backlog_files(incoming: Path) -> None:
    log = defaultdict(list)  # partition -> [(sequence number, second, machine)]
    for second in range(1, 13):
        for machine, partition in BACKLOG_PARTITIONS.items():
            if second not in BACKLOG_SILENT.get(machine, ()):
                log[partition].append((len(log[partition]), second, machine))
    for batch, (first, last) in enumerate(BACKLOG_RANGES):
        _write(
            incoming,
            f"range-{batch}",
            [
                {
                    "partition": partition,
                    "machine_name": machine,
                    "event_time": datetime.fromtimestamp(
                        START.timestamp() + second, tz=UTC
                    ).isoformat(),
                    "sequence_number": sequence,
                    "last_enqueued_sequence_number": entries[-1][0],
                }
                for partition, entries in sorted(log.items())
                for sequence, second, machine in entries
                if first <= second <= last
            ],
        )


def _diagnosis_5_8(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS_5_8", ["false_alarms", "alarm_batches", "cut_short"])
    names = answer["false_alarms"]
    if not isinstance(names, list | tuple | set) or not all(isinstance(n, str) for n in names):
        raise CheckFailed(
            "DIAGNOSIS_5_8['false_alarms'] should be a list of machine names.",
            expected="a list of strings",
            actual=repr(names),
        )
    return {
        "false_alarms": sorted(names),
        "alarm_batches": sorted(
            _ints(answer["alarm_batches"], "DIAGNOSIS_5_8['alarm_batches']", "a list of batch ids")
        ),
        "cut_short": sorted(
            _ints(answer["cut_short"], "DIAGNOSIS_5_8['cut_short']", "a list of batch ids")
        ),
    }


def _found_reader_shows(spark, folder: Path) -> dict:
    """The course's CatchUpReader (every range taken as read to its end) on Spark over the
    notebook's backlog, as Spark shows it: the transitions its sink holds per batch, and the
    rows of the file each batch read, as the checkpoint's sources/0/N names it."""
    incoming, checkpoint, output = folder / "incoming", folder / "checkpoint", folder / "out"
    _backlog_files(incoming)
    ref = _reference()
    reader = spark.readStream.schema(HEARTBEAT_SCHEMA).option("maxFilesPerTrigger", 1)
    changes = ref.catch_up_changes(reader.json(str(incoming)), ref.CatchUpReader(timeout_ms=5_000))
    _run_to_batches(spark, changes, checkpoint, output)
    beats: dict[str, list[int]] = defaultdict(list)
    cut_short = set()
    for entry in (checkpoint / "sources" / "0").iterdir():
        if not entry.name.isdigit():
            continue
        batch = int(entry.name)
        for line in entry.read_text().splitlines()[1:]:
            rows = spark.read.schema(HEARTBEAT_SCHEMA).json(json.loads(line)["path"]).collect()
            ends = defaultdict(lambda: [-1, -1])  # partition -> [greatest read, greatest end]
            for row in rows:
                beats[row.machine_name].append(_after_start(row.event_time))
                ends[row.partition][0] = max(ends[row.partition][0], row.sequence_number)
                ends[row.partition][1] = max(
                    ends[row.partition][1], row.last_enqueued_sequence_number
                )
            if any(read < end for read, end in ends.values()):
                cut_short.add(batch)
    false = [
        (r.machine_name, r.batch_id)
        for r in spark.read.parquet(str(output)).collect()
        if r.status == UNHEALTHY
        and any(
            _after_start(r.last_status_change_time) - 5_000
            < beat
            <= _after_start(r.last_status_change_time)
            for beat in beats[r.machine_name]
        )
    ]
    return {
        "false_alarms": sorted({machine for machine, _ in false}),
        "alarm_batches": sorted({batch for _, batch in false}),
        "cut_short": sorted(cut_short),
    }


@exercise("5.8", timeout=400, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_reader(nb, spark, tmp_path):
    diagnosis = _diagnosis_5_8(nb.DIAGNOSIS_5_8)
    spark_shows = spark_facts(
        "5.8 the found reader", lambda: _found_reader_shows(spark, tmp_path), check=__file__
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS_5_8 against a run of 5.7's CatchUpReader on Spark over the notebook's backlog "
        "in three ranges: the machines with a false alarm (an Unhealthy row whose machine sent a "
        "heartbeat in the 5 s up to its last_status_change_time), the batches that wrote one, "
        "and the batches whose rows stop short of their partition's end (sequence_number below "
        "last_enqueued_sequence_number).",
        hint="Read the output with its batch_id, and the file each batch read "
        "(range-N.json for batch N) with its sequence numbers, rather than reasoning from the "
        "code.",
    )


@exercise("5.8", timeout=400, part="fix", hint=FIX_HINT_5_8)
def test_catch_up_on_spark_over_a_skewed_backlog(nb, spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "incoming", tmp_path / "checkpoint", tmp_path / "out"
    processor_class = _read_until_under_test(nb)

    def changes(max_files: int | None = None):
        reader = spark.readStream.schema(HEARTBEAT_SCHEMA)
        if max_files:
            reader = reader.option("maxFilesPerTrigger", max_files)
        return nb.catch_up_changes(reader.json(str(incoming)), processor_class(timeout_ms=5_000))

    _write(incoming, "live", sum((_hub_rows(m, range(0, 10)) for m in SPARK_MACHINES), []))
    try:
        _run_to_parquet(spark, changes(), checkpoint, output)
        for k in range(5):
            p0, p1 = range(10 + 8 * k, 18 + 8 * k), range(10 + 4 * k, 14 + 4 * k)
            _write(
                incoming,
                f"backlog-{k:02d}",
                _hub_rows("m1", p0)
                + _hub_rows("m2", [s for s in p0 if s <= 20])
                + _hub_rows("m3", p1)
                + _hub_rows("m4", [s for s in p1 if not 14 < s < 22]),
            )
        _run_to_parquet(spark, changes(max_files=1), checkpoint, output)
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(
            "The catch-up query failed.",
            expected="the catch-up query to read its backlog and end",
            actual=query_cause(error),
        ) from None
    rows = [
        (r.machine_name, r.previous_status, r.status, _after_start(r.last_status_change_time))
        for r in spark.read.parquet(str(output)).collect()
    ]
    expect_equal(
        sorted(rows, key=_by_time),
        sorted(
            [(m, None, INITIALIZING, 0) for m in SPARK_MACHINES]
            + [(m, INITIALIZING, HEALTHY, 1_000) for m in SPARK_MACHINES]
            + [
                ("m4", HEALTHY, UNHEALTHY, 19_000),
                ("m4", UNHEALTHY, HEALTHY, 22_000),
                ("m2", HEALTHY, UNHEALTHY, 25_000),
            ],
            key=_by_time,
        ),
        f"On Spark, from files without sequence numbers: ten seconds of live traffic, then a "
        f"backlog in five micro-batches, partition 0 eight seconds of event time per batch, "
        f"partition 1 four; m2 stopped after 20 s, m4 paused from 14 s to 22 s. {FACTS}",
        hint="Rows without sequence numbers are not known to reach the partition's end.",
    )


# --- 5.9 · predict: what a checkpoint pins ----------------------------------------------------


class _SiteField:
    """A value state seen with one more field, `site`, that the processor leaves empty."""

    def __init__(self, state):
        self.state = state

    def get(self):
        value = self.state.get()
        return None if value is None else tuple(value)[:2]

    def update(self, value: tuple) -> None:
        self.state.update((*value, None))

    def clear(self) -> None:
        self.state.clear()


def _with_site(timeout_ms: int):
    class WithSiteInState(ReferenceHeartbeatProcessor):
        def init(self, handle):
            self.handle = handle
            self.machine = _SiteField(
                handle.getValueState("machine", "status STRING, last_seen_ms LONG, site STRING")
            )

    return WithSiteInState(timeout_ms)


def _life_with(spark, settings: dict, changes, checkpoint: Path, output: Path) -> dict:
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        _run_to_batches(spark, changes, checkpoint, output)
    except Exception as error:
        names = re.findall(r"\[([A-Z][A-Z_]{5,})\]", str(error))
        return {"starts": False, "error": names[-1] if names else type(error).__name__}
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    return {"starts": True, "error": None}


def _prediction(value, name: str) -> dict:
    if not isinstance(value, dict) or "starts" not in value:
        raise CheckFailed(
            f"{name} should be a dict with at least the key 'starts'.",
            expected="{'starts': ..., ...}",
            actual=repr(value),
        )
    return value


@exercise("5.9", timeout=400)
def test_what_a_checkpoint_pins(nb, spark, tmp_path):
    predicted = [
        _prediction(nb.OTHER_SETTINGS, "OTHER_SETTINGS"),
        _prediction(nb.ONE_MORE_FIELD, "ONE_MORE_FIELD"),
        _prediction(nb.ONE_MORE_FIELD_AVRO, "ONE_MORE_FIELD_AVRO"),
    ]

    def measure() -> list:
        incoming, checkpoint, output = tmp_path / "in", tmp_path / "checkpoint", tmp_path / "out"
        _write(incoming, "a", _lab04_beats(["m1", "m2"]))
        _run_to_batches(spark, _reference_changes(spark, incoming, 60_000), checkpoint, output)

        _write(incoming, "b", _lab04_beats(["m3"]))
        other = _life_with(
            spark,
            {PARTITIONS: "4", PROVIDER: HDFS},
            _reference_changes(spark, incoming, 60_000),
            checkpoint,
            output,
        )
        if other["starts"]:
            newest = max(
                int(p.name) for p in (checkpoint / "offsets").iterdir() if p.name.isdigit()
            )
            meta = json.loads((checkpoint / "offsets" / str(newest)).read_text().splitlines()[1])
            other = {
                "starts": True,
                "state_partitions": spark.read.format("state-metadata")
                .load(str(checkpoint))
                .first()
                .numPartitions,
                "provider": meta["conf"][PROVIDER].rsplit(".", 1)[-1],
            }

        _write(incoming, "c", _lab04_beats(["m1"]))
        field = _life_with(
            spark,
            {},
            _reference_changes(spark, incoming, 60_000, _with_site(60_000)),
            checkpoint,
            output,
        )

        avro_in, avro = tmp_path / "avro-in", tmp_path / "avro"
        _write(avro_in, "a", _lab04_beats(["m1", "m2"]))
        _life_with(
            spark,
            {ENCODING: "avro"},
            _reference_changes(spark, avro_in, 60_000),
            avro / "checkpoint",
            avro / "out",
        )
        _write(avro_in, "b", _lab04_beats(["m1"]))
        field_avro = _life_with(
            spark,
            {},
            _reference_changes(spark, avro_in, 60_000, _with_site(60_000)),
            avro / "checkpoint",
            avro / "out",
        )
        shutil.rmtree(avro, ignore_errors=True)
        return [other, field, field_avro]

    expect_equal(
        predicted,
        spark_facts("5.9 what a checkpoint pins", measure, check=__file__),
        "[OTHER_SETTINGS, ONE_MORE_FIELD, ONE_MORE_FIELD_AVRO], as Spark ran the three restarts "
        "with the course's lab 04 processor.",
        hint="What offsets/N records wins over the session, without an error. The state's schema "
        "is checked against the recorded one at every start; how strictly depends on the "
        "encoding the checkpoint pinned.",
    )
