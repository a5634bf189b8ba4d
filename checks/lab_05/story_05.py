"""What lab 05's checks share: the catch-up processor's partitions as logs read on a
``TwsTester`` in micro-batches in Spark's order (``streamlab.tws_batches.spark_batch``) whose
processing time the check sets, downtime and backlogs included (5.6 to 5.8), each step graded
with the course's code for the other two; and the Spark plumbing of 5.2, 5.3, 5.4, 5.8 and 5.9:
heartbeat files dated in order, lab 04's processor over them, one life of a query with
``trigger(availableNow=True)``. No check sleeps, and each verdict depends on the data only.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    START_MS,
    UNHEALTHY,
    CheckFailed,
    ReferenceHeartbeatProcessor,
    expect_that,
    handler_must_yield,
    load_solution,
    start_available,
)
from streamlab.monitor import batch_writer
from streamlab.tws_batches import pending_timers, register_timer, spark_batch

# --- 5.6 to 5.8 · the catch-up processor on TwsTester ---------------------------------------

PARTITION_OF = {"m1": "0", "m2": "0", "m3": "1", "m4": "1", "m5": "1", "m6": "0"}
_REFERENCE: list = []


def _reference():
    """Lab 05's solution module: the course's code for the steps not under test."""
    if not _REFERENCE:
        _REFERENCE.append(load_solution("05"))
    return _REFERENCE[0]


#: The course's class of lab 05 whose exercise writes each part of the catch-up processor.
_PART_OF = {
    "handleInputRows": "CatchUpReader",
    "handleExpiredTimer": "CatchUpTimers",
    "read_until": "CatchUpProcessor",
}


def _under_test(learner: type, *parts: str) -> type:
    """The learner's class with ``parts`` taken from the course's classes: 5.6 to 5.8 each
    grade one part of the processor with the course's code for the others."""
    ref = _reference()
    own = {part: getattr(getattr(ref, _PART_OF[part]), part) for part in parts}
    return type(f"{learner.__name__}UnderTest", (learner,), own)


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


def _run_to_parquet(spark, changes, checkpoint: Path, output: Path) -> None:
    writer = (
        changes.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    finish(
        start_available(spark, writer), within=240, what="the check's query to read its heartbeats"
    )


def _run_to_batches(spark, changes, checkpoint: Path, output: Path) -> None:
    """One life of a query into output/batch_id=N folders, replaced on a replay."""
    writer = (
        changes.writeStream.foreachBatch(batch_writer(output, "spark"))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    finish(
        start_available(spark, writer),
        within=240,
        what="the check's query over your processor to read its heartbeats",
    )
