"""Checks for lab 05 · Restart recovery.

Pure Python first: the checkpoint summary on checkpoint folders built here (5.1), the audit
(5.5), and the catch-up processor on ``TwsTester``, fed from partition logs in micro-batches
whose processing time the check sets, downtime and backlogs included (5.6). Then Spark: the sink (5.2), restarts and a staged crash on
one checkpoint (5.3), the state data source on a checkpoint of the course's reference
processor (5.4), and the catch-up processor over files read with ``maxFilesPerTrigger``
(5.6). Every Spark run uses ``trigger(availableNow=True)``; no check sleeps or reads the
wall clock, and each verdict depends on the data only.
"""

import json
import os
import sys
import threading
from collections import defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.grading import exercise
from streamlab.grading.heartbeat_checks import ReferenceHeartbeatProcessor
from streamlab.grading.verdict import query_cause

# Spark's Python workers cannot import this file: what it defines goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

INITIALIZING, HEALTHY, UNHEALTHY = "Initializing", "Healthy", "Unhealthy"
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"
PARTITIONS = "spark.sql.shuffle.partitions"
PROVIDER = "spark.sql.streaming.stateStore.providerClass"
ROCKSDB = "org.apache.spark.sql.execution.streaming.state.RocksDBStateStoreProvider"
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
START_MS = round(START.timestamp() * 1000)


# --- 5.1 · the checkpoint's anatomy -----------------------------------------------------


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


def _fake_checkpoint(
    root: Path,
    planned: int,
    committed: int,
    stores: dict | None = None,
    query_id: str | None = "5f0c1d2e-0000-4000-8000-000000000005",
    partitions_by_batch: dict | None = None,
) -> Path:
    """A checkpoint folder laid out as Spark 4.3 lays it out, with its clutter."""
    if query_id is not None:
        _file(root / "metadata", json.dumps({"id": query_id}))
    for batch in range(planned):
        conf = _conf((partitions_by_batch or {}).get(batch, 2))
        meta = {"batchWatermarkMs": 0, "batchTimestampMs": 1_795_000_000_000 + batch, "conf": conf}
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
    for operator, partitions in (stores or {}).items():
        folder = root / "state" / str(operator)
        _file(folder / "_metadata" / "v2" / "0", "v2\n{}")
        _file(folder / "_stateSchema" / "default" / "0_5f0c1d2e", "{}")
        for partition in range(partitions):
            _file(folder / str(partition) / "1.changelog", "changes")
            _file(folder / str(partition) / "1.zip", "snapshot")
            (folder / str(partition) / "SSTs").mkdir(exist_ok=True)
    return root


KEYS = {
    "query_id",
    "offsets",
    "commits",
    "replays_last_batch",
    "next_batch",
    "state_stores",
    "conf",
}


def _summary(nb, root: Path) -> dict:
    summary = nb.checkpoint_summary(str(root))
    assert isinstance(summary, dict), (
        f"checkpoint_summary() should return a dict; it returned {type(summary).__name__}."
    )
    missing, extra = KEYS - set(summary), set(summary) - KEYS
    assert not missing and not extra, (
        f"checkpoint_summary() should return the keys {sorted(KEYS)}"
        + (f"; it lacks {sorted(missing)}" if missing else "")
        + (f"; it has extra keys {sorted(extra)}" if extra else "")
        + "."
    )
    return summary


@exercise("5.1")
def test_a_checkpoint_with_every_batch_committed(nb, tmp_path):
    summary = _summary(
        nb, _fake_checkpoint(tmp_path / "ckpt", planned=3, committed=3, stores={0: 2})
    )
    got = (summary["offsets"], summary["commits"])
    assert got == ([0, 1, 2], [0, 1, 2]), (
        f"offsets/ and commits/ both hold batches 0, 1 and 2 (beside .crc and .tmp files): "
        f"expected [0, 1, 2] twice, as sorted ints; checkpoint_summary() said {got}."
    )
    assert summary["replays_last_batch"] is False and summary["next_batch"] == 3, (
        f"Every planned batch is committed, so a restart plans batch 3 and replays nothing; "
        f"checkpoint_summary() said next_batch={summary['next_batch']!r}, "
        f"replays_last_batch={summary['replays_last_batch']!r}."
    )
    assert summary["query_id"] == "5f0c1d2e-0000-4000-8000-000000000005", (
        f"query_id should be the id in the metadata file; it is {summary['query_id']!r}."
    )


@exercise("5.1")
def test_an_uncommitted_batch_is_replayed(nb, tmp_path):
    summary = _summary(
        nb, _fake_checkpoint(tmp_path / "ckpt", planned=5, committed=4, stores={0: 2})
    )
    got = (summary["replays_last_batch"], summary["next_batch"])
    assert got == (True, 4), (
        f"Batch 4 is in offsets/ but not in commits/: the query died while running it, and a "
        f"restart runs batch 4 again. Expected replays_last_batch=True, next_batch=4; "
        f"checkpoint_summary() said {got}."
    )


@exercise("5.1")
def test_a_checkpoint_that_never_ran_a_batch(nb, tmp_path):
    summary = _summary(nb, _fake_checkpoint(tmp_path / "ckpt", planned=0, committed=0))
    got = {
        k: summary[k]
        for k in ("offsets", "commits", "replays_last_batch", "next_batch", "state_stores", "conf")
    }
    expected = {
        "offsets": [],
        "commits": [],
        "replays_last_batch": False,
        "next_batch": 0,
        "state_stores": [],
        "conf": {},
    }
    assert got == expected, (
        f"A query that started but never ran a batch leaves only metadata: no offsets/, "
        f"commits/ or state/ folder. Expected {expected}; checkpoint_summary() said {got}."
    )
    summary = _summary(nb, _fake_checkpoint(tmp_path / "empty", 0, 0, query_id=None))
    assert summary["query_id"] is None, (
        f"Without a metadata file, query_id should be None; it is {summary['query_id']!r}."
    )


@exercise("5.1")
def test_state_stores_in_numeric_order(nb, tmp_path):
    summary = _summary(
        nb, _fake_checkpoint(tmp_path / "ckpt", planned=1, committed=1, stores={0: 12, 1: 2})
    )
    expected = [f"0/{p}" for p in range(12)] + ["1/0", "1/1"]
    assert summary["state_stores"] == expected, (
        f"Two operators, the first with 12 partitions, the second with 2, should give "
        f"{expected[:3]} ... {expected[-3:]} (numeric order: 0/2 before 0/10; _metadata and "
        f"_stateSchema are not stores); checkpoint_summary() said {summary['state_stores']}."
    )


@exercise("5.1")
def test_conf_comes_from_the_newest_plan(nb, tmp_path):
    root = _fake_checkpoint(
        tmp_path / "ckpt",
        planned=3,
        committed=2,
        stores={0: 2},
        partitions_by_batch={0: 2, 1: 2, 2: 7},
    )
    conf = _summary(nb, root)["conf"]
    assert (
        isinstance(conf, dict) and conf.get(PARTITIONS) == "7" and conf.get(PROVIDER) == ROCKSDB
    ), (
        f"conf should be the 'conf' object of the newest offsets file (offsets/2 here, which "
        f"pins 7 shuffle partitions; its second line is JSON); checkpoint_summary() said {conf!r}."
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
    assert isinstance(problems, list), f"audit() should return a list; it returned {problems!r}."
    for problem in problems:
        assert isinstance(problem, tuple) and len(problem) == 2, (
            f"audit() should return (machine_name, problem) tuples; it returned {problems!r}."
        )
    return problems


@exercise("5.5")
def test_a_clean_run_has_no_problem(nb):
    problems = _audit(nb, CLEAN, {"m1": HEALTHY, "m2": HEALTHY})
    assert problems == [], (
        f"Every transition follows from the one before and the state agrees: audit() should "
        f"return []; it returned {problems}."
    )
    retired = _audit(nb, CLEAN, {"m2": HEALTHY})
    assert retired == [], (
        f"A machine with transitions but no state (m1, retired) is fine; audit() returned {retired}."
    )


@exercise("5.5")
def test_a_batch_written_twice_is_a_duplicate(nb):
    twice = CLEAN[:4] + CLEAN[2:4] + CLEAN[4:]
    problems = _audit(nb, twice, {"m1": HEALTHY, "m2": HEALTHY})
    assert sorted(problems) == [("m1", "duplicate"), ("m2", "duplicate")], (
        f"Batch 1 appears twice (both machines' Initializing -> Healthy rows repeated): expected "
        f"one ('m1', 'duplicate') and one ('m2', 'duplicate'); audit() returned {problems}."
    )


@exercise("5.5")
def test_a_missing_transition_is_lost(nb):
    gap = [r for r in CLEAN if not (r["machine_name"] == "m2" and r["status"] == UNHEALTHY)]
    problems = _audit(nb, gap, {"m1": HEALTHY, "m2": HEALTHY})
    assert problems == [("m2", "lost")], (
        f"m2's Healthy -> Unhealthy row is missing, so its Unhealthy -> Healthy row does not "
        f"follow from Healthy: expected [('m2', 'lost')]; audit() returned {problems}."
    )
    first_lost = _audit(nb, CLEAN[2:3], {"m1": HEALTHY})
    assert first_lost == [("m1", "lost")], (
        f"A machine whose first row is Initializing -> Healthy lost its None -> Initializing "
        f"row: expected [('m1', 'lost')]; audit() returned {first_lost}."
    )


@exercise("5.5")
def test_the_state_must_agree_with_the_output(nb):
    problems = _audit(nb, CLEAN, {"m1": UNHEALTHY, "m2": HEALTHY, "m3": INITIALIZING})
    assert sorted(problems) == [("m1", "state"), ("m3", "state")], (
        f"The state says m1 is Unhealthy (its rows end Healthy) and holds m3, which has no rows "
        f"(they end in None): expected ('m1', 'state') and ('m3', 'state'); audit() returned "
        f"{problems}."
    )


@exercise("5.5")
def test_problems_do_not_hide_each_other(nb):
    messy = CLEAN[:4] + [CLEAN[3]] + [_t("m1", UNHEALTHY, HEALTHY, 12, 7)]
    problems = _audit(nb, messy, {"m1": HEALTHY, "m2": UNHEALTHY})
    assert sorted(problems) == [("m1", "lost"), ("m2", "duplicate"), ("m2", "state")], (
        f"m2's Healthy row is repeated, m1 recovers from an Unhealthy it never reported, and the "
        f"state says m2 is Unhealthy: expected ('m1', 'lost'), ('m2', 'duplicate'), "
        f"('m2', 'state'); audit() returned {problems}. After a bad row, carry on from its status."
    )


# --- 5.6 · catch-up, on TwsTester --------------------------------------------------------

PARTITION_OF = {"m1": "0", "m2": "0", "m3": "1", "m4": "1", "m5": "1"}


def _after_start(when: datetime) -> int:
    """Milliseconds after START. Naive datetimes are local times, as PySpark hands them out."""
    return round(when.timestamp() * 1000) - START_MS


def _summ(rows, who: str) -> list[tuple]:
    out = []
    for row in rows:
        assert isinstance(row, Row), (
            f"CatchUpProcessor.{who} should yield Row objects (transition_row(...)); it yielded "
            f"{row!r}."
        )
        fields = getattr(row, "__fields__", [])
        assert "noticed_time" in fields, (
            f"CatchUpProcessor.{who} should yield transition_row(...), with a noticed_time; it "
            f"yielded a row with {fields}."
        )
        for name in ("last_status_change_time", "noticed_time"):
            assert isinstance(row[name], datetime), (
                f"{name} should be a datetime (transition_row converts milliseconds); "
                f"CatchUpProcessor.{who} emitted {row[name]!r}."
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


def _describe(rows) -> str:
    if not rows:
        return "nothing"
    return "; ".join(
        f"{r[0]}: {r[1]} -> {r[2]} at {r[3]} ms"
        + (f" (noticed at {r[4]} ms)" if len(r) > 4 else "")
        for r in rows
    )


def _facts(rows) -> list[tuple]:
    """What happened, without when it was noticed."""
    return sorted((r[:4] for r in rows), key=_by_time)


class Hub:
    """Event hub partitions as logs, read in micro-batches by the catch-up processor on a
    TwsTester, in Spark's order: every partition's rows, then the timers that are due. Each row
    carries its sequence number and the newest sequence number its partition held when the
    batch was planned, as the eventhubs source's systemProperties say. Times are ms after START."""

    def __init__(self, nb, timeout_ms: int = 5_000):
        processor = nb.CatchUpProcessor(timeout_ms=timeout_ms)
        assert isinstance(processor, StatefulProcessor), (
            f"CatchUpProcessor should be a StatefulProcessor; it is {type(processor).__name__}."
        )
        self.tester = TwsTester(processor, timeMode="ProcessingTime")
        self.log = defaultdict(list)  # partition -> [(sent ms, machine)]
        self.read = defaultdict(int)  # partition -> next sequence number to read
        self.extra = defaultdict(list)  # partition -> rows to add to its next batch as they are
        self.now = 0

    def send(self, machine: str, *sent_ms: int) -> None:
        """Heartbeats sent at ``sent_ms``; the hub keeps each partition in time order."""
        partition = PARTITION_OF[machine]
        assert not self.read[partition], "a check sends before it reads (a course bug)"
        self.log[partition] = sorted(self.log[partition] + [(sent, machine) for sent in sent_ms])

    def batch(self, now: int, limit: int | None = None) -> list[tuple]:
        assert now > self.now, "a check's clock must move forward (a course bug)"
        self.now = now
        rows_by_partition = {}
        for partition, entries in sorted(self.log.items()):
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
            if rows:
                rows_by_partition[partition] = rows
        self.tester._currentProcessingTimeMs = (
            START_MS + now
        )  # setProcessingTime would fire timers first
        out = []
        for partition, rows in rows_by_partition.items():
            out += self._call(lambda p=partition, r=rows: self.tester.test(p, r), "handleInputRows")
        return out + self._call(self.tester._handleExpiredTimers, "handleExpiredTimer")

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

    def _call(self, call, who):
        try:
            out = call()
        except TypeError as error:
            if "NoneType" in str(error) and "iter" in str(error):
                raise AssertionError(
                    f"CatchUpProcessor.{who} returned None; it should yield transition_row(...) "
                    f"for each change (a generator that yields nothing is fine)."
                ) from None
            raise
        return _summ(out, who)

    def timers(self, partition: str) -> list[int]:
        return sorted(t - START_MS for t in self.tester.handle._timers.listTimers(partition))


def _fleet(hub: Hub, machines, first_s: int, last_s: int, skip=()) -> None:
    """One heartbeat a second from each machine, ``skip`` seconds left out."""
    for machine in machines:
        hub.send(machine, *[s * 1000 for s in range(first_s, last_s + 1) if s not in skip])


def _story(nb, down=None, limit=None) -> list[tuple]:
    """m1, m3, m4 send all along; m2 stops after 11 s; m5 starts at 12 s."""
    hub = Hub(nb)
    _fleet(hub, ["m1", "m3", "m4"], 1, 200)
    _fleet(hub, ["m2"], 1, 11)
    _fleet(hub, ["m5"], 12, 200)
    return hub.run(180_000, down, limit)


STORY = [
    ("m2", HEALTHY, UNHEALTHY, 16_000),
    ("m5", None, INITIALIZING, 12_000),
    ("m5", INITIALIZING, HEALTHY, 13_000),
]


@exercise("5.6")
def test_steady_traffic_is_initializing_then_healthy(nb):
    hub = Hub(nb)
    _fleet(hub, PARTITION_OF, 1, 30)
    rows = hub.run(30_000)
    expected = sorted(
        [(m, None, INITIALIZING, 1_000, 1_000) for m in PARTITION_OF]
        + [(m, INITIALIZING, HEALTHY, 2_000, 2_000) for m in PARTITION_OF],
        key=_by_time,
    )
    assert sorted(rows, key=_by_time) == expected, (
        f"Five machines sending a heartbeat a second, read every 500 ms: each should be "
        f"Initializing at its first heartbeat and Healthy at its second, and nothing more, each "
        f"noticed in the batch that read it. CatchUpProcessor emitted {_describe(rows)}."
    )


@exercise("5.6")
def test_a_silent_machine_is_unhealthy_at_its_deadline_and_healthy_when_back(nb):
    hub = Hub(nb)
    _fleet(hub, ["m1"], 1, 40)
    _fleet(hub, ["m2"], 1, 40, skip=range(11, 20))
    rows = [
        r for r in hub.run(40_000) if r[0] == "m2" and r[2] != INITIALIZING and r[1] is not None
    ]
    expected = [
        ("m2", INITIALIZING, HEALTHY, 2_000, 2_000),
        ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ("m2", UNHEALTHY, HEALTHY, 20_000, 20_000),
    ]
    assert rows == expected, (
        f"m2 sent its last heartbeat at 10000 ms and its next at 20000 ms, while m1 on the same "
        f"partition kept sending and every batch read the partition to its end: expect "
        f"{_describe(expected)}. Unhealthy belongs at its deadline (10000 + 5000 ms), noticed by the "
        f"batch at 15000 ms: the partition read to its end holds nothing newer up to now. "
        f"CatchUpProcessor emitted {_describe(rows)}."
    )


@exercise("5.6")
def test_a_fleet_gone_silent_times_out_on_its_timers(nb):
    hub = Hub(nb)
    _fleet(hub, ["m1", "m2", "m3"], 1, 10)
    _fleet(hub, ["m4"], 1, 8)
    rows = [r for r in hub.run(30_000) if r[2] == UNHEALTHY]
    expected = [
        ("m4", HEALTHY, UNHEALTHY, 13_000, 13_000),
        ("m1", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ("m3", HEALTHY, UNHEALTHY, 15_000, 15_000),
    ]
    assert sorted(rows, key=_by_time) == expected, (
        f"Every machine stopped (m4 after 8 s, the others after 10 s) and no row arrives any more: "
        f"the partitions' timers must do it, each at exactly its earliest deadline. Expected "
        f"{_describe(expected)}; CatchUpProcessor emitted {_describe(sorted(rows, key=_by_time))}."
    )


@exercise("5.6")
def test_the_timer_sits_at_the_earliest_deadline(nb):
    hub = Hub(nb)
    _fleet(hub, ["m1"], 1, 10)
    _fleet(hub, ["m2"], 1, 8)
    hub.run(10_000)
    assert hub.timers("0") == [13_000], (
        f"Partition 0's machines last sent at 10000 ms (m1) and 8000 ms (m2): its one timer "
        f"belongs at the earliest deadline, 13000 ms. It has {hub.timers('0')}. Save the timer "
        f"rearm() returns."
    )


@pytest.mark.parametrize("down_ms", [3_000, 120_000], ids=["3 s", "2 min"])
@exercise("5.6")
def test_downtime_is_not_silence(nb, down_ms):
    live = _story(nb)
    restarted = _story(nb, down=(10_000, 10_000 + down_ms))
    after = sorted((r for r in restarted if r[4] >= 10_000), key=_by_time)
    assert _facts(after) == sorted(STORY, key=_by_time), (
        f"The query was down from 10000 ms for {down_ms} ms while m1, m3 and m4 kept sending, m2 "
        f"stopped after 11 s and m5 started at 12 s. After the restart expect exactly "
        f"{_describe(sorted(STORY, key=_by_time))}: nobody who kept sending is Unhealthy, m2 once "
        f"at its deadline. CatchUpProcessor emitted {_describe(after)}. The restart's first batch "
        f"holds every partition's backlog; its rows come before the overdue timers."
    )
    assert _facts(restarted) == _facts(live), (
        f"A query that was down should report the same changes, at the same times, as one that "
        f"never stopped: {_describe(_facts(live))}; it reported {_describe(_facts(restarted))}."
    )
    first = 10_000 + down_ms
    assert all(
        r[4] == first for r in after if r[0] == "m5" or (down_ms > 5_000 and r[0] == "m2")
    ), (
        f"What happened during the downtime is noticed by the restart's first batch, at {first} ms; "
        f"CatchUpProcessor emitted {_describe(after)}."
    )


@exercise("5.6")
def test_a_backlog_read_in_many_batches_gives_the_same_answers(nb):
    live = _story(nb)
    limited = _story(nb, down=(10_000, 130_000), limit=3)
    assert _facts(limited) == _facts(live), (
        f"After 120 s of downtime the backlog was read three heartbeats per partition per batch "
        f"(maxEventsPerTrigger): a range cut short is known only up to its newest heartbeat, not "
        f"up to now. Expected the changes of a query that never stopped, "
        f"{_describe(_facts(live))}; CatchUpProcessor reported {_describe(_facts(limited))}."
    )


@exercise("5.6")
def test_late_and_duplicate_heartbeats_change_nothing(nb):
    plain = Hub(nb)
    _fleet(plain, ["m1", "m2"], 1, 20)
    expected = plain.run(20_000)
    hub = Hub(nb)
    _fleet(hub, ["m1", "m2"], 1, 20)
    out = hub.run(6_000)
    again = Hub._row("0", "m1", 5_000, 9, 9)  # a heartbeat delivered twice
    old = Hub._row("0", "m2", 1_500, None, None)  # one from before the machine's newest
    hub.extra["0"] = [again, old]
    out += hub.run(20_000)
    assert _facts(out) == _facts(expected), (
        f"m1's heartbeat at 5000 ms delivered a second time and a heartbeat of m2 stamped "
        f"1500 ms arriving after newer ones should change nothing: expected "
        f"{_describe(_facts(expected))}; CatchUpProcessor emitted {_describe(_facts(out))}."
    )


@exercise("5.6")
def test_one_value_and_one_timer_per_partition(nb):
    hub = Hub(nb)
    _fleet(hub, PARTITION_OF, 1, 30)
    hub.run(30_000)
    for partition in ("0", "1"):
        timers = hub.timers(partition)
        assert len(timers) == 1, (
            f"A partition with live machines needs exactly one pending timer; partition "
            f"{partition} has {len(timers)}: {timers}. rearm() moves the old one: call it instead "
            f"of registering timers yourself."
        )
    value = hub.tester.peekValueState("partition", "1")
    names = sorted(value[0]) if value else []
    assert names == ["m3", "m4", "m5"], (
        f"Partition 1's state value should list its machines m3, m4 and m5; it lists {names}. "
        f"Write the machines back with save()."
    )


# --- Spark plumbing shared by 5.2, 5.3, 5.4 and 5.6 -------------------------------------------

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


def _reference_changes(spark, folder: Path, timeout_ms: int):
    heartbeats = spark.readStream.schema(LAB04_SCHEMA).json(str(folder))
    return heartbeats.groupBy("machine_name").transformWithState(
        ReferenceHeartbeatProcessor(timeout_ms), STATUS_SCHEMA, "Append", "ProcessingTime"
    )


def _run_to_parquet(spark, changes, checkpoint: Path, output: Path, **options) -> None:
    writer = (
        changes.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    spark.conf.set(NO_DATA_BATCHES, "false")
    try:
        query = writer.start()
    finally:
        spark.conf.unset(NO_DATA_BATCHES)
    query.awaitTermination()


# --- 5.2 · an exactly-once sink -------------------------------------------------------------


def _frame(spark, machines: list[str], status: str = INITIALIZING):
    return spark.createDataFrame([(m, status, None, START) for m in machines], STATUS_SCHEMA)


def _sunk(spark, output: Path) -> list[tuple]:
    df = spark.read.parquet(str(output))
    assert "batch_id" in df.columns, (
        f"Reading the sink's folder with spark.read.parquet() should give a batch_id column: "
        f"name each batch's folder batch_id=<id>. The folder holds "
        f"{sorted(p.name for p in output.iterdir())}."
    )
    return sorted((r.batch_id, r.machine_name, r.status) for r in df.collect())


def _writer(nb, output: Path):
    write = nb.batch_writer(str(output))
    assert callable(write), (
        f"batch_writer(output) should return a function write(batch, batch_id) for "
        f"foreachBatch; it returned {write!r}."
    )
    return write


@exercise("5.2", timeout=120)
def test_each_batch_lands_in_its_own_folder(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m3"]), 1)
    folders = sorted(p.name for p in output.iterdir() if not p.name.startswith(("_", ".")))
    assert folders == ["batch_id=0", "batch_id=1"], (
        f"Two batches should leave the folders batch_id=0 and batch_id=1 in the output folder "
        f"(staging folders start with _ and are renamed away); it holds {folders}."
    )
    got = _sunk(spark, output)
    expected = [(0, "m1", INITIALIZING), (0, "m2", INITIALIZING), (1, "m3", INITIALIZING)]
    assert got == expected, f"The sink should hold {expected}; reading it gives {got}."


@exercise("5.2", timeout=120)
def test_a_retried_batch_replaces_the_first_attempt(nb, spark, tmp_path):
    output = tmp_path / "sink"
    write = _writer(nb, output)
    write(_frame(spark, ["m1", "m2"]), 0)
    write(_frame(spark, ["m1"], HEALTHY), 1)
    write(_frame(spark, ["m1", "m2"], HEALTHY), 1)  # batch 1 again, after a crash
    write(_frame(spark, []), 2)  # a batch without transitions
    got = _sunk(spark, output)
    expected = [
        (0, "m1", INITIALIZING),
        (0, "m2", INITIALIZING),
        (1, "m1", HEALTHY),
        (1, "m2", HEALTHY),
    ]
    assert got == expected, (
        f"Batch 1 was written twice, the second attempt with m1 and m2: only that attempt should "
        f"remain, {expected}; reading the sink gives {got}. Delete batch_id=1 before renaming "
        f"the new attempt into place."
    )
    assert (output / "batch_id=2").is_dir(), (
        "An empty batch should still get its folder, batch_id=2: it records that batch 2 ran."
    )


# --- 5.3 · stop, restart, replay ------------------------------------------------------------


def _run_once(nb, spark, changes, checkpoint: Path, output: Path, seconds: float = 150) -> None:
    """The learner's run_once in a thread, so that a query that never ends becomes a message."""
    outcome: dict = {}

    def run():
        try:
            nb.run_once(changes, str(checkpoint), str(output))
        except BaseException as error:  # reported below, in the check's thread
            outcome["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        thread.join(seconds)
        if thread.is_alive():
            for query in spark.streams.active:
                query.stop()
            thread.join(30)
            raise AssertionError(
                f"run_once() had not returned after {seconds:.0f} s. With processing-time timers "
                f"Spark runs a micro-batch every trigger even without input, so an availableNow "
                f'query never ends: set {NO_DATA_BATCHES} to "false" before start() (and unset '
                f"it afterwards), then awaitTermination()."
            )
    finally:
        spark.conf.unset(NO_DATA_BATCHES)
    if "error" in outcome:
        error = outcome["error"]
        if "is not done yet" in str(error):
            raise error
        raise AssertionError(
            f"run_once() failed: {query_cause(error)}. (An error raised inside foreachBatch comes "
            f"from batch_writer, exercise 5.2.)"
        ) from None


def _transitions(spark, output: Path) -> list[tuple]:
    rows = spark.read.parquet(str(output)).collect()
    return sorted(
        (r.batch_id, r.machine_name, r.previous_status or "", r.status, r.last_status_change_time)
        for r in rows
    )


@exercise("5.3", timeout=480)
def test_a_restarted_query_carries_its_state_and_writes_each_batch_once(nb, spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "incoming", tmp_path / "checkpoint", tmp_path / "out"
    _write(incoming, "a", _lab04_beats(["m1", "m2"]))
    _run_once(nb, spark, _reference_changes(spark, incoming, 60_000), checkpoint, output)
    first = [r[:4] for r in _transitions(spark, output)]
    expected = [(0, "m1", "", INITIALIZING), (0, "m2", "", INITIALIZING)]
    assert first == expected, (
        f"The first run over m1 and m2 should write batch 0 with two Initializing rows; the "
        f"output holds {first}. Use foreachBatch(batch_writer(output))."
    )

    _write(incoming, "b", _lab04_beats(["m1"]))
    _run_once(nb, spark, _reference_changes(spark, incoming, 60_000), checkpoint, output)
    second = _transitions(spark, output)
    added = [r[:4] for r in second if r[0] == 1]
    assert added == [(1, "m1", INITIALIZING, HEALTHY)], (
        f"The second run on the same checkpoint should find m1's state and write batch 1 with "
        f"m1: Initializing -> Healthy; it wrote {added}. Is the checkpoint location set to "
        f"`checkpoint`?"
    )

    commit = checkpoint / "commits" / "1"
    commit.unlink()
    (checkpoint / "commits" / ".1.crc").unlink(missing_ok=True)
    _run_once(nb, spark, _reference_changes(spark, incoming, 60_000), checkpoint, output)
    third = _transitions(spark, output)
    assert commit.exists(), (
        "After a crash staged by deleting commits/1, a restart should run batch 1 again and "
        "commit it; commits/1 is still missing."
    )
    assert third == second, (
        f"Batch 1 ran again after the staged crash, with the same input, state and batch "
        f"timestamp: the output should be unchanged, {len(second)} transitions, each once; it "
        f"now holds {len(third)}: {[r[:4] for r in third]}."
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


def _columns(df, expected: list[str], name: str) -> None:
    from pyspark.sql import DataFrame

    assert isinstance(df, DataFrame), (
        f"{name}() should return a DataFrame; it returned {type(df).__name__}."
    )
    assert df.columns == expected, (
        f"{name}() should return the columns {expected}; it returned {df.columns}."
    )


@exercise("5.4", timeout=300)
def test_state_variables(nb, spark, tmp_path_factory):
    checkpoint, _, _ = _state_checkpoint(spark, tmp_path_factory)
    got = nb.state_variables(spark, checkpoint)
    assert (
        isinstance(got, dict)
        and got.get("machine") == "ValueState"
        and "TimerState" in got.values()
    ), (
        f"The reference processor keeps a value state called machine and processing-time "
        f"timers: expected {{'machine': 'ValueState', '$procTimers_keyToTimestamp': "
        f"'TimerState'}}; state_variables() returned {got!r}."
    )


@exercise("5.4", timeout=300)
def test_machine_states(nb, spark, tmp_path_factory):
    checkpoint, first, second = _state_checkpoint(spark, tmp_path_factory)
    df = nb.machine_states(spark, checkpoint)
    _columns(df, ["machine_name", "status", "last_seen_ms"], "machine_states")
    got = sorted(tuple(r) for r in df.collect())
    expected = [("m1", HEALTHY, second), ("m2", UNHEALTHY, first), ("m3", INITIALIZING, second)]
    assert got == expected, (
        f"After the two runs the state holds {expected} (m2 timed out; last_seen_ms is the "
        f"processing time of the batch that last saw each machine); machine_states() returned "
        f"{got}."
    )


@exercise("5.4", timeout=300)
def test_machine_timers(nb, spark, tmp_path_factory):
    checkpoint, first, second = _state_checkpoint(spark, tmp_path_factory)
    df = nb.machine_timers(spark, checkpoint)
    _columns(df, ["machine_name", "expires_at_ms"], "machine_timers")
    got = sorted(tuple(r) for r in df.collect())
    expected = [("m1", second + 1), ("m2", first + 3_600_000), ("m3", second + 1)]
    assert got == expected, (
        f"The pending timers are {expected} (m2's is its retirement timer, an hour after it was "
        f"last seen); machine_timers() returned {got}."
    )


@exercise("5.4", timeout=300)
def test_state_history(nb, spark, tmp_path_factory):
    checkpoint, _, _ = _state_checkpoint(spark, tmp_path_factory)
    df = nb.state_history(spark, checkpoint)
    _columns(df, ["batch_id", "change_type", "machine_name", "status"], "state_history")
    got = sorted(tuple(r) for r in df.collect())
    expected = [
        (0, "update", "m1", INITIALIZING),
        (0, "update", "m2", INITIALIZING),
        (1, "update", "m1", HEALTHY),
        (1, "update", "m2", UNHEALTHY),
        (1, "update", "m3", INITIALIZING),
    ]
    assert got == expected, (
        f"The change feed of machine from batch 0 is {expected}; state_history() returned {got}."
    )
    since = sorted(tuple(r) for r in nb.state_history(spark, checkpoint, 1).collect())
    assert since == expected[2:], (
        f"state_history(spark, checkpoint, 1) should start at batch 1: {expected[2:]}; it "
        f"returned {since}. Pass since_batch as changeStartBatchId."
    )


# --- 5.6 · catch-up, on Spark -----------------------------------------------------------------

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


def _catch_up(nb, spark, folder: Path, max_files: int | None = None):
    from pyspark.sql import DataFrame

    reader = spark.readStream.schema(HEARTBEAT_SCHEMA)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", max_files)
    df = nb.catch_up_changes(reader.json(str(folder)), nb.CatchUpProcessor(timeout_ms=5_000))
    assert isinstance(df, DataFrame) and df.isStreaming, (
        f"catch_up_changes() should return the streaming DataFrame transformWithState gives, "
        f"without starting it; it returned {type(df).__name__}."
    )
    return df


@exercise("5.6", timeout=60)
def test_catch_up_query_has_the_transition_schema(nb, spark, tmp_path):
    df = _catch_up(nb, spark, tmp_path)
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expected = [
        ("machine_name", "string"),
        ("status", "string"),
        ("previous_status", "string"),
        ("last_status_change_time", "timestamp"),
        ("noticed_time", "timestamp"),
    ]
    assert got == expected, (
        f"The query's rows should have TRANSITION_SCHEMA, {expected}; they have {got}."
    )


@exercise("5.6", timeout=400)
def test_catch_up_on_spark_over_a_skewed_backlog(nb, spark, tmp_path):
    incoming, checkpoint, output = tmp_path / "incoming", tmp_path / "checkpoint", tmp_path / "out"
    _write(incoming, "live", sum((_hub_rows(m, range(0, 10)) for m in SPARK_MACHINES), []))
    try:
        _run_to_parquet(spark, _catch_up(nb, spark, incoming), checkpoint, output)
        for k in range(10):
            p0, p1 = range(10 + 4 * k, 14 + 4 * k), range(10 + 2 * k, 12 + 2 * k)
            _write(
                incoming,
                f"backlog-{k:02d}",
                _hub_rows("m1", p0)
                + _hub_rows("m2", [s for s in p0 if s <= 20])
                + _hub_rows("m3", p1)
                + _hub_rows("m4", [s for s in p1 if not 14 < s < 22]),
            )
        _run_to_parquet(spark, _catch_up(nb, spark, incoming, max_files=1), checkpoint, output)
    except Exception as error:
        if "is not done yet" in str(error):
            raise
        raise AssertionError(f"The catch-up query failed: {query_cause(error)}") from None
    rows = [
        (r.machine_name, r.previous_status, r.status, _after_start(r.last_status_change_time))
        for r in spark.read.parquet(str(output)).collect()
    ]
    live = sorted((r for r in rows if r[3] < 10_000), key=_by_time)
    backlog = sorted((r for r in rows if r[3] >= 10_000), key=_by_time)
    expected_live = sorted(
        [(m, None, INITIALIZING, 0) for m in SPARK_MACHINES]
        + [(m, INITIALIZING, HEALTHY, 1_000) for m in SPARK_MACHINES],
        key=_by_time,
    )
    assert live == expected_live, (
        f"The first run (every machine, one heartbeat a second from 0 to 9 s) should emit "
        f"Initializing at 0 ms and Healthy at 1000 ms for each machine; it emitted "
        f"{_describe(live)}."
    )
    expected = [
        ("m4", HEALTHY, UNHEALTHY, 19_000),
        ("m4", UNHEALTHY, HEALTHY, 22_000),
        ("m2", HEALTHY, UNHEALTHY, 25_000),
    ]
    assert backlog == expected, (
        f"The second run read a backlog in ten micro-batches, partition 0 four seconds of event "
        f"time per batch, partition 1 two: m2 stopped after 20 s, m4 paused from 14 s to 22 s, "
        f"m1 and m3 never stopped. Expected exactly {_describe(expected)}; the query emitted "
        f"{_describe(backlog)}."
    )
