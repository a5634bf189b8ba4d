"""Lab 05's catch-up processor against a plain model of its rules, on random partition logs.

The reference monitor runs ``CatchUpProcessor`` (exercise 5.6), which must stay fast at tens of
thousands of machines per partition. Speed must not change what it does: here it and
``ModelProcessor``, the rules written the obvious way (every machine scanned before every
heartbeat), read the same generated micro-batches on two ``TwsTester`` instances and must emit
the same transitions, at the same stamps, in the same order, keep the same machines and set
the same timers. The batches hold silent and returning machines, machines that start late,
several heartbeats in one millisecond, duplicates, heartbeats older than a machine's newest,
downtime, ranges cut short by a read limit and batches without the partition's end, and, with a
short ``retire_after_ms``, machines retired and machines that come back after it as new ones.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime

from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor, StatefulProcessorHandle
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.monitor import reference_solution
from streamlab.tws_batches import pending_timers, spark_batch_by_handler

lab = reference_solution()
TIMEOUT_MS = 5_000
RETIRE_MS = 20_000  # short, so that the stories retire machines
START_MS = 1_767_225_600_000  # 2026-01-01 UTC


class ModelProcessor(StatefulProcessor):
    """The catch-up rules without any care for speed: a dict of machines, all scanned for
    expired deadlines and retirements before each heartbeat and at the batch's clock."""

    def __init__(self) -> None:
        self.retired: set[str] = set()  # every machine ever retired
        self.returned = 0  # heartbeats that made a retired machine new again

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.handle = handle
        self.state = handle.getValueState("partition", lab.PARTITION_SCHEMA)

    def _load(self) -> tuple[dict, int | None]:
        value = self.state.get()
        if value is None:
            return {}, None
        names, statuses, lasts, timer_ms = value
        return dict(zip(names, zip(statuses, lasts))), timer_ms

    def _expire(self, machines: dict, clock_ms: int) -> list[tuple]:
        changes = []
        for name, (status, last) in machines.items():
            if status != lab.UNHEALTHY and last + TIMEOUT_MS <= clock_ms:
                machines[name] = (lab.UNHEALTHY, last)
                changes.append((last + TIMEOUT_MS, name, lab.UNHEALTHY, status))
        for name, (status, last) in list(machines.items()):
            if status == lab.UNHEALTHY and last + RETIRE_MS <= clock_ms:
                del machines[name]
                self.retired.add(name)
        return sorted(changes)

    def _finish(self, machines: dict, timer_ms: int | None, now: int, changes) -> Iterator[Row]:
        deadlines = [
            last + (RETIRE_MS if status == lab.UNHEALTHY else TIMEOUT_MS)
            for status, last in machines.values()
        ]
        wanted = max(min(deadlines), now + 1) if deadlines else None
        if timer_ms is not None and timer_ms != wanted:
            self.handle.deleteTimer(timer_ms)
        if wanted is not None and wanted != timer_ms:
            self.handle.registerTimer(wanted)
        names = sorted(machines)
        if names or wanted is not None:
            self.state.update(
                (names, [machines[n][0] for n in names], [machines[n][1] for n in names], wanted)
            )
        else:
            self.state.clear()
        for at, name, new, old in changes:
            yield lab.transition_row(name, new, old, at, now)

    def handleInputRows(self, key, rows, timerValues) -> Iterator[Row]:
        now = timerValues.getCurrentProcessingTimeInMs()
        machines, timer_ms = self._load()
        rows = list(rows)
        ends = [row.last_enqueued_sequence_number for row in rows]
        read_to_end = None not in ends and max(row.sequence_number for row in rows) >= max(ends)
        beats = sorted((lab.event_ms(row.event_time), row.machine_name) for row in rows)
        changes = []
        for at, name in beats:
            changes += self._expire(machines, at - 1)
            status, last = machines.get(name, (None, None))
            if last is not None and at <= last:
                continue
            new = lab.INITIALIZING if status is None else lab.HEALTHY
            self.returned += status is None and name in self.retired
            machines[name] = (new, at)
            if new != status:
                changes.append((at, name, new, status))
        clock = max(now, beats[-1][0]) if read_to_end else beats[-1][0]
        changes += self._expire(machines, clock)
        yield from self._finish(machines, timer_ms, now, changes)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo) -> Iterator[Row]:
        now = timerValues.getCurrentProcessingTimeInMs()
        machines, timer_ms = self._load()
        if timer_ms != expiredTimerInfo.getExpiryTimeInMs():
            return
        yield from self._finish(machines, None, now, self._expire(machines, now))


def _row(partition: str, machine: str, sent: int, sequence: int | None, last: int | None) -> Row:
    return Row(
        partition=partition,
        machine_name=machine,
        event_time=datetime.fromtimestamp((START_MS + sent) / 1000, tz=UTC),
        sequence_number=sequence,
        last_enqueued_sequence_number=last,
    )


def _logs(rng: random.Random, partitions: int, machines: int, until_ms: int) -> dict[str, list]:
    """Each partition's log, in enqueue order: machines that send about once a second, some
    with long silences, some starting late, some stopping, several sharing a millisecond."""
    logs = defaultdict(list)
    for m in range(machines):
        name = f"m{m:03d}"
        at = rng.choice([0, 0, rng.randrange(until_ms // 2)]) + rng.randrange(1, 1_000)
        stop = rng.choice([until_ms, until_ms, rng.randrange(until_ms)])
        while at < stop:
            logs[str(m % partitions)].append((at, name))
            gap = rng.choice(
                [1_000] * 6 + [rng.randrange(1, 2_000), rng.randrange(4_000, 12_000), 0]
            )
            at += gap
    return {p: sorted(log) for p, log in logs.items()}


def _run(seed: int) -> tuple[list, list, ModelProcessor]:
    """Drive the lab's processor and the model through one random story; both outputs, and the
    model."""
    rng = random.Random(seed)
    until = 90_000
    logs = _logs(rng, rng.choice([1, 2, 3]), rng.choice([3, 8, 30]), until)
    model = ModelProcessor()
    testers = [
        TwsTester(
            lab.CatchUpProcessor(timeout_ms=TIMEOUT_MS, retire_after_ms=RETIRE_MS),
            timeMode="ProcessingTime",
        ),
        TwsTester(model, timeMode="ProcessingTime"),
    ]
    outputs: list[list] = [[], []]
    read = defaultdict(int)
    now = 0
    while now < until + 20_000:
        now += rng.choice([250, 500, 500, 1_000, 3_000, rng.randrange(1, 60_000)])
        limit = rng.choice([None, None, None, 1, 3])
        no_end = rng.random() < 0.1
        batch = {}
        for partition, log in sorted(logs.items()):
            there = [
                (i, sent, m)
                for i, (sent, m) in enumerate(log)
                if i >= read[partition] and sent <= now
            ]
            taken = there[:limit] if limit else there
            read[partition] += len(taken)
            rows = [
                _row(partition, m, sent, i, None if no_end else there[-1][0])
                for i, sent, m in taken
            ]
            if read[partition] and rng.random() < 0.2:  # a duplicate, or a heartbeat older than it
                i = rng.randrange(read[partition])
                sent, m = log[i]
                if rng.random() < 0.5:
                    rows.append(_row(partition, m, sent, i, i))
                else:
                    rows.append(
                        _row(partition, m, max(0, sent - rng.randrange(1, 3_000)), None, None)
                    )
            if rows:
                rng.shuffle(rows)
                batch[partition] = rows
        for tester, out in zip(testers, outputs):
            from_rows, from_timers = spark_batch_by_handler(tester, START_MS + now, batch)
            out += [("rows", tuple(r)) for r in from_rows]
            out += [("timer", tuple(r)) for r in from_timers]
        for partition in logs:
            got, want = (t.peekValueState("partition", partition) for t in testers)
            as_dict = [
                None if v is None else (dict(zip(v[0], zip(v[1], v[2]))), v[3]) for v in (got, want)
            ]
            assert as_dict[0] == as_dict[1], (
                f"seed {seed}, at {now} ms, partition {partition}: state differs"
            )
            timers = [pending_timers(t, partition) for t in testers]
            assert timers[0] == timers[1], (
                f"seed {seed}, at {now} ms, partition {partition}: timers differ"
            )
    return *outputs, model


def test_the_processor_does_what_the_plain_rules_do():
    kinds, retired, returned = set(), 0, 0
    for seed in range(40):
        got, want, model = _run(seed)
        retired += len(model.retired)
        returned += model.returned
        assert got == want, (
            f"seed {seed}: CatchUpProcessor and the plain rules differ; first difference at entry "
            f"{next(i for i, (a, b) in enumerate(zip(got + [None], want + [None])) if a != b)}"
        )
        kinds |= {(entry[0], entry[-1][2], entry[-1][1]) for entry in want}  # who, previous, status
    # The stories must reach every kind of change, or the comparison proves little.
    assert {
        ("rows", None, lab.INITIALIZING),
        ("rows", lab.INITIALIZING, lab.HEALTHY),
        ("rows", lab.HEALTHY, lab.UNHEALTHY),
        ("rows", lab.UNHEALTHY, lab.HEALTHY),
        ("rows", lab.INITIALIZING, lab.UNHEALTHY),
        ("timer", lab.HEALTHY, lab.UNHEALTHY),
    } <= kinds, kinds
    assert retired and returned, f"{retired} machines retired, {returned} heartbeats back after it"
