"""Checks for lab 04 · transformWithState on RocksDB.

Unit checks first: the pure transition function, then both processors driven by
``TwsTester`` on a clock the check sets (no sleeping, no wall clock), then one real Spark
query on files, run with ``trigger(availableNow=True)`` on the RocksDB state store.
"""

import json
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import Row

from streamlab.grading import exercise
from streamlab.grading.heartbeat_checks import Meter, ProcessorStory, ReferenceHeartbeatProcessor
from streamlab.grading.verdict import query_cause

# Spark's Python workers cannot import this file: what it defines goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

INITIALIZING, HEALTHY, UNHEALTHY = "Initializing", "Healthy", "Unhealthy"
HEARTBEAT, TIMEOUT = "heartbeat", "timeout"


# --- 4.1 · the state machine as a pure function -----------------------------------------

TRANSITIONS = [
    (None, HEARTBEAT, INITIALIZING),
    (INITIALIZING, HEARTBEAT, HEALTHY),
    (HEALTHY, HEARTBEAT, HEALTHY),
    (UNHEALTHY, HEARTBEAT, HEALTHY),
    (None, TIMEOUT, None),
    (INITIALIZING, TIMEOUT, UNHEALTHY),
    (HEALTHY, TIMEOUT, UNHEALTHY),
    (UNHEALTHY, TIMEOUT, UNHEALTHY),
]


@exercise("4.1")
def test_constants_are_the_course_values(nb):
    got = (nb.INITIALIZING, nb.HEALTHY, nb.UNHEALTHY, nb.HEARTBEAT, nb.TIMEOUT)
    assert got == (INITIALIZING, HEALTHY, UNHEALTHY, HEARTBEAT, TIMEOUT), (
        f"The graded-setup cell should define the statuses and events as the lab gives them; "
        f"they are {got}. Did you edit that cell?"
    )


@exercise("4.1")
def test_heartbeat_transitions(nb):
    for current, event, expected in TRANSITIONS[:4]:
        got = nb.next_status(current, event)
        assert got == expected, (
            f"next_status({current!r}, HEARTBEAT) should be {expected!r}; it returned {got!r}."
        )


@exercise("4.1")
def test_timeout_transitions(nb):
    for current, event, expected in TRANSITIONS[4:]:
        got = nb.next_status(current, event)
        assert got == expected, (
            f"next_status({current!r}, TIMEOUT) should be {expected!r}; it returned {got!r}."
            + (" A machine never seen has nothing to time out." if current is None else "")
        )


@exercise("4.1")
def test_unknown_event_raises(nb):
    try:
        got = nb.next_status(HEALTHY, "reboot")
    except ValueError:
        return
    raise AssertionError(
        f"next_status('Healthy', 'reboot') should raise ValueError (an unknown event); it "
        f"returned {got!r}."
    )


# --- TwsTester plumbing for 4.2 and 4.3 -------------------------------------------------

HEARTBEAT_TIME = datetime(2026, 11, 22, tzinfo=UTC)


class Story(ProcessorStory):
    """One of the lab's processors, one machine per key, heartbeats sent one batch at a time."""

    def __init__(
        self, nb, class_name: str, timeout_ms: int = 5_000, retire_after_ms: int = 3_600_000
    ):
        cls = getattr(nb, class_name)
        super().__init__(cls(timeout_ms=timeout_ms, retire_after_ms=retire_after_ms), class_name)

    def beat(self, machine: str = "m1", count: int = 1) -> list[tuple]:
        """One micro-batch at the current time with ``count`` heartbeats of ``machine``."""
        return self.batch(machine, [Row(machine_name=machine, machine_time=HEARTBEAT_TIME)] * count)


def _describe(rows: list[tuple]) -> str:
    if not rows:
        return "nothing"
    return "; ".join(f"{m}: {p} -> {s} at {t} ms" for m, s, p, t in rows)


BOTH = [
    pytest.param("HeartbeatProcessor", marks=exercise("4.2"), id="HeartbeatProcessor"),
    pytest.param("LeanHeartbeatProcessor", marks=exercise("4.3"), id="LeanHeartbeatProcessor"),
]
both = pytest.mark.parametrize("name", BOTH)


# --- 4.2 and 4.3 · the same behaviour from both processors ------------------------------


@both
def test_first_heartbeat_is_initializing(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    rows = story.beat("m1")
    expected = [("m1", INITIALIZING, None, 1_000)]
    assert rows == expected, (
        f"The first heartbeat of a new machine, at 1000 ms, should emit {_describe(expected)}; "
        f"{name} emitted {_describe(rows)}."
    )


@both
def test_heartbeats_in_one_batch_count_once(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    rows = story.beat("m1", count=3)
    assert [r[1] for r in rows] == [INITIALIZING], (
        f"Three heartbeats of a new machine in one micro-batch are one piece of news: emit one "
        f"Initializing row. {name} emitted {_describe(rows)}."
    )
    story.at(2_000)
    rows = story.beat("m1", count=3)
    assert [r[1:3] for r in rows] == [(HEALTHY, INITIALIZING)], (
        f"Three heartbeats in the next micro-batch should emit one Initializing -> Healthy row; "
        f"{name} emitted {_describe(rows)}."
    )


@both
def test_second_heartbeat_is_healthy_then_silence(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    rows = story.beat("m1")
    expected = [("m1", HEALTHY, INITIALIZING, 2_000)]
    assert rows == expected, (
        f"A second heartbeat (at 2000 ms) should emit {_describe(expected)}; {name} emitted "
        f"{_describe(rows)}."
    )
    for t in (3_000, 4_000, 5_000):
        story.at(t)
        rows = story.beat("m1")
        assert rows == [], (
            f"A Healthy machine that sends another heartbeat has not changed: emit nothing. "
            f"At {t} ms {name} emitted {_describe(rows)}."
        )


@both
def test_silence_turns_a_machine_unhealthy_once(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    story.beat("m1")
    early = story.at(6_999)
    assert early == [], (
        f"At 6999 ms the machine has been silent for 4999 ms, less than the 5000 ms timeout: "
        f"emit nothing yet. {name} emitted {_describe(early)}."
    )
    rows = story.at(7_000)
    expected = [("m1", UNHEALTHY, HEALTHY, 7_000)]
    assert rows == expected, (
        f"5000 ms after its last heartbeat (at 2000 ms) the machine should turn Unhealthy: "
        f"{_describe(expected)}. When the clock reached 7000 ms, {name} emitted {_describe(rows)}."
    )
    later = story.at(12_000) + story.at(30_000)
    assert later == [], (
        f"An Unhealthy machine that stays silent is still Unhealthy: emit nothing more. {name} "
        f"emitted {_describe(later)}."
    )


@both
def test_initializing_machine_can_time_out(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    rows = story.at(6_000)
    assert [r[1:3] for r in rows] == [(UNHEALTHY, INITIALIZING)], (
        f"A machine that sent one heartbeat and then nothing for 5000 ms should emit "
        f"Initializing -> Unhealthy; {name} emitted {_describe(rows)}."
    )


@both
def test_steady_heartbeats_never_time_out(nb, name):
    story = Story(nb, name)
    emitted = []
    for t in range(1_000, 31_000, 1_000):
        emitted += story.at(t)
        emitted += story.beat("m1")
    statuses = [r[1] for r in emitted]
    assert statuses == [INITIALIZING, HEALTHY], (
        f"A machine beating every second for 30 s should emit Initializing, then Healthy, and "
        f"nothing else; {name} emitted {_describe(emitted)}."
    )


@both
def test_a_heartbeat_after_unhealthy_is_a_recovery(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    story.beat("m1")
    story.at(7_000)
    story.at(9_000)
    rows = story.beat("m1")
    expected = [("m1", HEALTHY, UNHEALTHY, 9_000)]
    assert rows == expected, (
        f"An Unhealthy machine that sends a heartbeat (at 9000 ms) has recovered: "
        f"{_describe(expected)}. {name} emitted {_describe(rows)}."
    )
    quiet = story.at(13_999)
    again = story.at(14_000)
    assert quiet == [] and [r[1:] for r in again] == [(UNHEALTHY, HEALTHY, 14_000)], (
        f"After recovering at 9000 ms, a new silence should turn it Unhealthy again at 14000 ms "
        f"(not before). {name} emitted {_describe(quiet + again)}: is a timer set after the "
        f"recovery?"
    )


@both
def test_timeout_comes_from_the_constructor(nb, name):
    story = Story(nb, name, timeout_ms=2_000)
    story.at(1_000)
    story.beat("m1")
    early = story.at(2_999)
    rows = story.at(3_000)
    assert early == [] and [r[1] for r in rows] == [UNHEALTHY], (
        f"{name}(timeout_ms=2000) should turn a machine Unhealthy 2000 ms after its last "
        f"heartbeat (at 3000 ms), not before; it emitted {_describe(early + rows)}. Use "
        f"self.timeout_ms rather than 5000."
    )


@both
def test_machines_are_independent(nb, name):
    story = Story(nb, name)
    emitted = []
    for t in range(1_000, 12_000, 1_000):
        emitted += story.at(t)
        emitted += story.beat("m1")
        if t <= 2_000:
            emitted += story.beat("m2")
    m1 = [r for r in emitted if r[0] == "m1"]
    m2 = [r for r in emitted if r[0] == "m2"]
    assert [r[1] for r in m1] == [INITIALIZING, HEALTHY], (
        f"m1 beats every second and should only go Initializing, Healthy; {name} emitted "
        f"{_describe(m1)} for it. Is the state or timer of m2 leaking into m1's?"
    )
    assert [r[1:] for r in m2] == [
        (INITIALIZING, None, 1_000),
        (HEALTHY, INITIALIZING, 2_000),
        (UNHEALTHY, HEALTHY, 7_000),
    ], (
        f"m2 beat at 1000 and 2000 ms only, so it should turn Unhealthy at 7000 ms; {name} "
        f"emitted {_describe(m2)} for it."
    )


# --- 4.3 · retirement ---------------------------------------------------------------------


def _silent_machine(nb, retire_after_ms: int = 30_000) -> Story:
    story = Story(nb, "LeanHeartbeatProcessor", retire_after_ms=retire_after_ms)
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    story.beat("m1")
    story.at(7_000)  # Unhealthy
    return story


@exercise("4.3")
def test_a_silent_machine_is_retired_without_output(nb):
    story = _silent_machine(nb)
    before = story.at(31_999)
    assert story.has_state("m1"), (
        "At 31999 ms the machine has been silent for 29999 ms, less than retire_after_ms "
        "(30000): it should still be in the state, Unhealthy. LeanHeartbeatProcessor already "
        "dropped it."
    )
    rows = story.at(32_000)
    assert before + rows == [], (
        f"Retiring a machine is silent: no output row. LeanHeartbeatProcessor emitted "
        f"{_describe(before + rows)}."
    )
    assert not story.has_state("m1"), (
        "30000 ms (retire_after_ms) after its last heartbeat, the machine should be gone from "
        "the state: clear() it when its retirement timer fires. It is still there at 32000 ms."
    )
    assert story.timers("m1") == [], (
        f"A retired machine should leave no timer behind; m1 still has timers at "
        f"{story.timers('m1')} ms."
    )


@exercise("4.3")
def test_a_retired_machine_starts_over(nb):
    story = _silent_machine(nb)
    story.at(40_000)
    rows = story.beat("m1")
    expected = [("m1", INITIALIZING, None, 40_000)]
    assert rows == expected, (
        f"A retired machine that comes back is new again: {_describe(expected)}. "
        f"LeanHeartbeatProcessor emitted {_describe(rows)}."
    )


@exercise("4.3")
def test_retirement_counts_from_the_last_heartbeat(nb):
    story = _silent_machine(nb)
    story.at(20_000)
    story.beat("m1")  # recovery
    story.at(25_000)  # Unhealthy again
    story.at(32_000)  # 30 s after the *first* silence began: must not retire
    assert story.has_state("m1"), (
        "m1 recovered at 20000 ms and went silent again, so it retires 30000 ms after that last "
        "heartbeat (at 50000 ms). At 32000 ms it was already gone: on a recovery, delete the "
        "old retirement timer (last_seen_ms + retire_after_ms, read before you update)."
    )
    rows = story.at(50_000)
    assert rows == [] and not story.has_state("m1"), (
        f"At 50000 ms, 30000 ms after its last heartbeat, m1 should be retired without output; "
        f"it emitted {_describe(rows)} and is {'still' if story.has_state('m1') else 'no longer'} "
        f"in the state."
    )


@exercise("4.3")
def test_a_beating_machine_is_never_retired(nb):
    story = Story(nb, "LeanHeartbeatProcessor", retire_after_ms=10_000)
    emitted = []
    for t in range(1_000, 41_000, 1_000):
        emitted += story.at(t)
        emitted += story.beat("m1")
    assert [r[1] for r in emitted] == [INITIALIZING, HEALTHY] and story.has_state("m1"), (
        f"A machine beating every second should never be retired, even with retire_after_ms "
        f"= 10000; LeanHeartbeatProcessor emitted {_describe(emitted)} over 40 s and the machine "
        f"is {'still' if story.has_state('m1') else 'no longer'} in the state."
    )


# --- 4.3 · the cost of a heartbeat --------------------------------------------------------


def _steady_machine(nb) -> tuple[Story, Meter]:
    story = Story(nb, "LeanHeartbeatProcessor")
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    story.beat("m1")
    return story, Meter(story.tester)


@exercise("4.3")
def test_at_most_two_state_calls_per_steady_heartbeat(nb):
    story, meter = _steady_machine(nb)
    for t in range(3_000, 13_000, 1_000):
        story.at(t)
        meter.take()
        story.beat("m1")
        calls = meter.take()
        assert sum(calls.values()) <= 2, (
            f"A heartbeat of an already Healthy machine should cost at most 2 state calls (one "
            f"get, one update); LeanHeartbeatProcessor made {sum(calls.values())} at {t} ms: "
            f"{Meter.listing(calls)}. get() returns None for a new machine, so exists() is not "
            f"needed, and the timer can stay as it is."
        )


@exercise("4.3")
def test_one_timer_per_machine(nb):
    story, _ = _steady_machine(nb)
    for t in range(3_000, 33_000, 1_000):
        story.at(t)
        story.beat("m1")
        timers = story.timers("m1")
        assert len(timers) == 1, (
            f"A live machine needs exactly one pending timer; at {t} ms m1 has {len(timers)}: "
            f"{timers}. Register a timer on the first heartbeat, and a new one only when the "
            f"old one fires (or on a recovery, after deleting the retirement timer)."
        )


@exercise("4.3")
def test_timers_fire_once_per_timeout_not_per_heartbeat(nb):
    story, meter = _steady_machine(nb)
    beats = 0
    for t in range(3_000, 63_000, 1_000):
        story.at(t)
        story.beat("m1")
        beats += 1
    calls = meter.take()
    per_beat = sum(calls.values()) / beats
    assert per_beat <= 3, (
        f"Over {beats} s of steady heartbeats (one a second, timeout 5 s), LeanHeartbeatProcessor "
        f"made {sum(calls.values())} state calls, {per_beat:.1f} per heartbeat counting its timers "
        f"({Meter.listing(calls)}); expected about 2.5: get and update per heartbeat, plus one timer "
        f"firing (get, registerTimer) per timeout period."
    )


# --- 4.4 · the streaming query ----------------------------------------------------------


def _changes(nb, spark, folder):
    from pyspark.sql import DataFrame

    heartbeats = spark.readStream.schema(nb.HEARTBEAT_SCHEMA).json(str(folder))
    # timeout_ms=1: every timer is due by the next micro-batch, so timeouts show up in the
    # next run without waiting for any clock.
    df = nb.status_changes(
        heartbeats, ReferenceHeartbeatProcessor(timeout_ms=1, retire_after_ms=3_600_000)
    )
    assert isinstance(df, DataFrame), (
        f"status_changes() should return the DataFrame that transformWithState gives; it returned "
        f"{type(df).__name__}. Return it without calling writeStream or start()."
    )
    assert df.isStreaming, "status_changes() returned a batch DataFrame; it should be streaming."
    return df


@exercise("4.4", timeout=60)
def test_query_has_the_status_schema(nb, spark, tmp_path):
    df = _changes(nb, spark, tmp_path)
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expected = [(f.name, f.dataType.simpleString()) for f in nb.STATUS_SCHEMA.fields]
    assert got == expected, (
        f"The query's rows should have STATUS_SCHEMA, {expected}; they have {got}. Pass "
        f"STATUS_SCHEMA as outputStructType."
    )


def _write(folder: Path, name: str, machines: list[str]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    lines = [
        json.dumps({"machine_name": m, "machine_time": "2026-11-22T10:00:00Z"}) for m in machines
    ]
    (folder / f"{name}.json").write_text("\n".join(lines) + "\n")


def _run(nb, spark, incoming, output, checkpoint):
    writer = (
        _changes(nb, spark, incoming)
        .writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    # Processing-time timers make Spark run a batch every trigger even without data, so an
    # availableNow query would never end; without no-data batches it ends once input is done.
    spark.conf.set("spark.sql.streaming.noDataMicroBatches.enabled", "false")
    try:
        query = writer.start()
    finally:
        spark.conf.unset("spark.sql.streaming.noDataMicroBatches.enabled")
    try:
        query.awaitTermination()
    except Exception as error:
        raise AssertionError(
            f"The query failed: {query_cause(error)}. Check the arguments of transformWithState: "
            f'STATUS_SCHEMA, "Append" and "ProcessingTime" (timers need ProcessingTime).'
        ) from None
    return [
        (r.machine_name, r.status, r.previous_status, r.last_status_change_time)
        for r in spark.read.parquet(str(output)).collect()
    ]


@exercise("4.4", timeout=150)
def test_query_runs_the_processor_on_rocksdb(nb, spark, tmp_path, checkpoint_dir):
    provider = spark.conf.get("spark.sql.streaming.stateStore.providerClass")
    assert "RocksDB" in provider, f"The session should use RocksDB; it uses {provider}."
    incoming, output = tmp_path / "incoming", tmp_path / "output"

    _write(incoming, "a", ["m1", "m2", "m1", "m2", "m1"])
    first = _run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in first)
    expected = [("m1", INITIALIZING, None), ("m2", INITIALIZING, None)]
    assert got == expected, (
        f"The first run (m1 three times, m2 twice) should emit one Initializing row per machine, "
        f"{expected}; the query wrote {got}. Is the DataFrame grouped by machine_name?"
    )

    _write(incoming, "b", ["m3"])
    second = _run(nb, spark, incoming, output, checkpoint_dir)
    _write(incoming, "c", ["m1", "m1"])
    third = _run(nb, spark, incoming, output, checkpoint_dir)
    got = sorted(r[:3] for r in set(third) - set(second))
    expected = [("m1", HEALTHY, UNHEALTHY), ("m3", UNHEALTHY, INITIALIZING)]
    assert got == expected, (
        f"After three runs on one checkpoint, the last run should add m1's recovery and m3's "
        f"timeout, {expected}; it added {got}. The state and timers must survive between runs "
        f"(same checkpoint) and timers must be processing-time timers."
    )
    assert all(isinstance(r[3], datetime) for r in third), (
        "last_status_change_time should be a timestamp in every row."
    )
