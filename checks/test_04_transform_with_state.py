"""Checks for lab 04 · transformWithState on RocksDB.

Unit checks first: the pure transition function (4.1), both processors driven by
``TwsTester`` on a clock the check sets (4.2, 4.3), the learner's own test run against a right
processor and broken ones (4.4), and the first half of a prediction (4.5). Then Spark, each
with ``trigger(availableNow=True)`` on the RocksDB state store: the other half of 4.5, and for
4.6 the learner's diagnosis of the notebook's found counter against this file's own run of it
(each progress report's input rows and state rows, the state variables the checkpoint's
metadata lists), then a counter whose counts must outlive a micro-batch. No check sleeps or
reads the wall clock's value.
"""

import json
import sys
import traceback
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pyspark import cloudpickle
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    HEARTBEAT_DDL,
    INITIALIZING,
    NO_DATA_BATCHES,
    TRANSITION_DDL,
    UNHEALTHY,
    CheckFailed,
    Field,
    Meter,
    ProcessorStory,
    ReferenceHeartbeatProcessor,
    exercise,
    expect_answer,
    expect_equal,
    is_int,
    is_not_done,
    is_str,
    list_of,
    query_cause,
    session_conf,
    spark_facts,
    write_heartbeats,
)
from streamlab.tws_batches import pending_timers, register_timer

# Spark's Python workers cannot import this file: what it defines goes to them by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

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
    expect_equal(
        (nb.INITIALIZING, nb.HEALTHY, nb.UNHEALTHY, nb.HEARTBEAT, nb.TIMEOUT),
        (INITIALIZING, HEALTHY, UNHEALTHY, HEARTBEAT, TIMEOUT),
        "The graded-setup cell should define the statuses and events as the lab gives them. "
        "Did you edit that cell?",
    )


@exercise("4.1")
def test_heartbeat_transitions(nb):
    rows = TRANSITIONS[:4]
    expect_equal(
        [(current, nb.next_status(current, event)) for current, event, _ in rows],
        [(current, expected) for current, _, expected in rows],
        "next_status(current, HEARTBEAT) for each status, as (current, returned):",
    )


@exercise("4.1")
def test_timeout_transitions(nb):
    rows = TRANSITIONS[4:]
    expect_equal(
        [(current, nb.next_status(current, event)) for current, event, _ in rows],
        [(current, expected) for current, _, expected in rows],
        "next_status(current, TIMEOUT) for each status, as (current, returned):",
        hint="A machine never seen (None) has nothing to time out: it stays None.",
    )


@exercise("4.1")
def test_unknown_event_raises(nb):
    try:
        got = nb.next_status(HEALTHY, "reboot")
    except ValueError:
        return
    raise CheckFailed(
        "next_status('Healthy', 'reboot') should raise ValueError (an unknown event).",
        expected="ValueError raised",
        actual=f"returned {got!r}",
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


BOTH = [
    pytest.param("HeartbeatProcessor", marks=exercise("4.2"), id="HeartbeatProcessor"),
    pytest.param("LeanHeartbeatProcessor", marks=exercise("4.3"), id="LeanHeartbeatProcessor"),
]
both = pytest.mark.parametrize("name", BOTH)

ROWS = "Rows as (machine, status, previous_status, at ms)."


# --- 4.2 and 4.3 · the same behaviour from both processors ------------------------------


@both
def test_first_heartbeat_is_initializing(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    expect_equal(
        story.beat("m1"),
        [("m1", INITIALIZING, None, 1_000)],
        f"{name}: the first heartbeat of a new machine, in a batch at 1000 ms. {ROWS}",
    )


@both
def test_heartbeats_in_one_batch_count_once(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    first = story.beat("m1", count=3)
    story.at(2_000)
    second = story.beat("m1", count=3)
    expect_equal(
        first + second,
        [("m1", INITIALIZING, None, 1_000), ("m1", HEALTHY, INITIALIZING, 2_000)],
        f"{name}: three heartbeats in a batch at 1000 ms, three more at 2000 ms. Each batch is "
        f"one heartbeat. {ROWS}",
    )


@both
def test_second_heartbeat_is_healthy_then_nothing(nb, name):
    story = Story(nb, name)
    emitted = []
    for t in (1_000, 2_000, 3_000, 4_000, 5_000):
        story.at(t)
        emitted += story.beat("m1")
    expect_equal(
        emitted,
        [("m1", INITIALIZING, None, 1_000), ("m1", HEALTHY, INITIALIZING, 2_000)],
        f"{name}: a heartbeat every second from 1000 to 5000 ms. A Healthy machine that beats "
        f"again has not changed. {ROWS}",
    )


@both
def test_silence_turns_a_machine_unhealthy_once(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    story.at(2_000)
    story.beat("m1")
    timeline = [(t, story.at(t)) for t in (6_999, 7_000, 12_000, 30_000)]
    expect_equal(
        timeline,
        [(6_999, []), (7_000, [("m1", UNHEALTHY, HEALTHY, 7_000)]), (12_000, []), (30_000, [])],
        f"{name}: heartbeats at 1000 and 2000 ms, then silence; what each move of the clock "
        f"emitted, as (clock ms, rows). Unhealthy 5000 ms after the last heartbeat, once.",
    )


@both
def test_initializing_machine_can_time_out(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    expect_equal(
        story.at(6_000),
        [("m1", UNHEALTHY, INITIALIZING, 6_000)],
        f"{name}: one heartbeat at 1000 ms, then nothing until 6000 ms. {ROWS}",
    )


@both
def test_steady_heartbeats_never_time_out(nb, name):
    story = Story(nb, name)
    emitted = []
    for t in range(1_000, 31_000, 1_000):
        emitted += story.at(t)
        emitted += story.beat("m1")
    expect_equal(
        emitted,
        [("m1", INITIALIZING, None, 1_000), ("m1", HEALTHY, INITIALIZING, 2_000)],
        f"{name}: a heartbeat every second for 30 s, timeout 5 s. {ROWS}",
        hint="A timer set for an earlier heartbeat must not turn a machine that beat since "
        "Unhealthy.",
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
    emitted = story.beat("m1") + story.at(13_999) + story.at(14_000)
    expect_equal(
        emitted,
        [("m1", HEALTHY, UNHEALTHY, 9_000), ("m1", UNHEALTHY, HEALTHY, 14_000)],
        f"{name}: Unhealthy at 7000 ms, a heartbeat at 9000 ms, then silence until 14000 ms. "
        f"{ROWS}",
        hint="After a recovery the machine needs a timer again, 5000 ms after that heartbeat.",
    )


@both
def test_timeout_comes_from_the_constructor(nb, name):
    story = Story(nb, name, timeout_ms=2_000)
    story.at(1_000)
    story.beat("m1")
    expect_equal(
        story.at(2_999) + story.at(3_000),
        [("m1", UNHEALTHY, INITIALIZING, 3_000)],
        f"{name}(timeout_ms=2000): one heartbeat at 1000 ms, then the clock at 2999 and 3000 ms. "
        f"{ROWS}",
        hint="Use self.timeout_ms rather than 5000.",
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
    expect_equal(
        sorted(emitted, key=lambda r: (r[0], r[3])),
        [
            ("m1", INITIALIZING, None, 1_000),
            ("m1", HEALTHY, INITIALIZING, 2_000),
            ("m2", INITIALIZING, None, 1_000),
            ("m2", HEALTHY, INITIALIZING, 2_000),
            ("m2", UNHEALTHY, HEALTHY, 7_000),
        ],
        f"{name}: m1 beats every second, m2 only at 1000 and 2000 ms. {ROWS}",
    )


@both
def test_the_state_keeps_the_latest_heartbeat(nb, name):
    story = Story(nb, name)
    seen = []
    for t in (1_000, 2_000, 3_000):
        story.at(t)
        story.beat("m1")
        seen.append(story.tester.peekValueState("machine", "m1"))
    story.at(8_000)
    seen.append(story.tester.peekValueState("machine", "m1"))
    expect_equal(
        seen,
        [(INITIALIZING, 1_000), (HEALTHY, 2_000), (HEALTHY, 3_000), (UNHEALTHY, 3_000)],
        f"{name}: the state (status, last_seen_ms) after heartbeats at 1000, 2000 and 3000 ms, "
        f"then after the timeout at 8000 ms.",
        hint="last_seen_ms is the time of the latest heartbeat, stored on every heartbeat, even "
        "when the status stays the same; a timeout leaves it alone.",
    )


@both
def test_never_more_than_one_timer(nb, name):
    story = Story(nb, name)
    counts = []
    for t in range(1_000, 9_000, 1_000):
        story.at(t)
        story.beat("m1")
        counts.append(len(pending_timers(story.tester, "m1")))
    expect_equal(
        counts,
        [1] * len(counts),
        f"{name}: pending timers of m1 after each of its heartbeats, one a second.",
    )


@both
def test_a_leftover_timer_emits_nothing(nb, name):
    story = Story(nb, name)
    register_timer(story.tester, "m9", 1_000)
    expect_equal(
        story.at(1_000),
        [],
        f"{name}: a timer fires at 1000 ms for m9, a machine with no state (a timer left over "
        f"after its state was removed). {ROWS}",
        hint="get() returns None for a machine without state: there is nothing to time out.",
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


def _life(story: Story, key: str = "m1") -> tuple:
    """(in the state, pending timers) of a machine."""
    return story.has_state(key), pending_timers(story.tester, key)


@exercise("4.3")
def test_a_silent_machine_is_retired_without_output(nb):
    story = _silent_machine(nb)
    before = (story.at(31_999), _life(story))
    after = (story.at(32_000), _life(story))
    expect_equal(
        [before, after],
        [([], (True, [32_000])), ([], (False, []))],
        "Heartbeats at 1000 and 2000 ms, retire_after_ms=30000; at 31999 and at 32000 ms: "
        "(rows emitted, (in the state, pending timers)).",
        hint="Retirement is silent: clear() the state when the retirement timer fires, emit "
        "nothing, and register no new timer.",
    )


@exercise("4.3")
def test_a_retired_machine_starts_over(nb):
    story = _silent_machine(nb)
    story.at(40_000)
    expect_equal(
        story.beat("m1"),
        [("m1", INITIALIZING, None, 40_000)],
        f"Retired at 32000 ms, the machine sends a heartbeat at 40000 ms: it is new again. {ROWS}",
    )


@exercise("4.3")
def test_retirement_counts_from_the_latest_heartbeat(nb):
    story = _silent_machine(nb)
    story.at(20_000)
    story.beat("m1")  # recovery
    story.at(25_000)  # Unhealthy again
    at_32 = (story.at(32_000), _life(story))
    at_50 = (story.at(50_000), _life(story))
    expect_equal(
        [at_32, at_50],
        [([], (True, [50_000])), ([], (False, []))],
        "Unhealthy at 7000 ms, recovered at 20000 ms, Unhealthy again at 25000 ms "
        "(retire_after_ms=30000); at 32000 and 50000 ms: (rows, (in the state, pending timers)).",
        hint="On a recovery the retirement timer set at the first silence must go: it was set "
        "at the old last_seen_ms + retire_after_ms, which you can read before you update.",
    )


@exercise("4.3")
def test_a_beating_machine_is_never_retired(nb):
    story = Story(nb, "LeanHeartbeatProcessor", retire_after_ms=10_000)
    emitted = []
    for t in range(1_000, 41_000, 1_000):
        emitted += story.at(t)
        emitted += story.beat("m1")
    expect_equal(
        (emitted, story.has_state("m1")),
        ([("m1", INITIALIZING, None, 1_000), ("m1", HEALTHY, INITIALIZING, 2_000)], True),
        "A machine beating every second for 40 s with retire_after_ms=10000: (rows, still in "
        "the state).",
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
        if sum(calls.values()) > 2:
            raise CheckFailed(
                f"A heartbeat of an already Healthy machine (at {t} ms) should cost at most 2 "
                f"state calls.",
                expected="get x1, update x1",
                actual=Meter.listing(calls),
                hint="get() returns None for a new machine, so exists() is not needed; and a "
                "steady heartbeat can leave the timer as it is.",
            )


@exercise("4.3")
def test_one_timer_per_machine(nb):
    story, _ = _steady_machine(nb)
    counts = []
    for t in range(3_000, 33_000, 1_000):
        story.at(t)
        story.beat("m1")
        counts.append(len(pending_timers(story.tester, "m1")))
    expect_equal(
        counts,
        [1] * len(counts),
        "Pending timers of a machine beating every second, after each heartbeat from 3 to 32 s.",
        hint="A steady machine keeps the one timer it has; when that timer fires early (the "
        "machine was seen since), one new timer replaces it.",
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
    if per_beat > 3:
        raise CheckFailed(
            f"Over {beats} s of steady heartbeats (one a second, timeout 5 s), about 2.5 state "
            f"calls per heartbeat: get and update per heartbeat, plus a timer firing (get, "
            f"registerTimer) once per timeout period.",
            expected="at most 3 per heartbeat",
            actual=f"{per_beat:.1f} per heartbeat: {Meter.listing(calls)}",
        )


# --- 4.4 · the learner's test, against a right processor and broken ones -------------------


def _changed_row(key, status, previous, now):
    return Row(
        machine_name=key[0],
        status=status,
        previous_status=previous,
        last_status_change_time=datetime.fromtimestamp(now / 1000, tz=UTC),
    )


class _Broken(ReferenceHeartbeatProcessor):
    """The reference with its handlers spelled out, so that each variant changes one thing."""

    on_recovery_delete = True
    on_recovery_register = True
    recovery_status = HEALTHY
    recovery_emits = True
    retire_clears = True
    retire_emits = False
    retire_from_timeout = False
    retire_keeps_a_timer = False
    greets_the_retired = False
    recovery_timeout_factor = 1
    tombstone = False

    def init(self, handle):
        super().init(handle)
        self.gone = handle.getValueState("gone", "gone BOOLEAN")

    def handleInputRows(self, key, rows, timerValues):
        now = timerValues.getCurrentProcessingTimeInMs()
        saved = self.machine.get()
        if self.tombstone and saved is not None and saved[0] is None:
            saved = None
        if saved is None and self.greets_the_retired and self.gone.get():
            saved = (UNHEALTHY, now - self.retire_after_ms)
        status = saved[0] if saved else None
        new = INITIALIZING if saved is None else HEALTHY
        if saved is None:
            self.handle.registerTimer(now + self.timeout_ms)
        elif status == UNHEALTHY:
            new = self.recovery_status
            if self.on_recovery_delete:
                self.handle.deleteTimer(saved[1] + self.retire_after_ms)
            if self.on_recovery_register:
                self.handle.registerTimer(now + self.recovery_timeout_factor * self.timeout_ms)
        self.machine.update((new, now))
        if new != status and (status != UNHEALTHY or self.recovery_emits):
            yield _changed_row(key, new, status, now)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        now = timerValues.getCurrentProcessingTimeInMs()
        saved = self.machine.get()
        if saved is None:
            return
        status, seen = saved
        if status == UNHEALTHY:
            if self.tombstone:
                self.machine.update((None, seen))
            elif self.retire_clears:
                self.machine.clear()
            if self.greets_the_retired:
                self.gone.update((True,))
            if self.retire_keeps_a_timer:
                self.handle.registerTimer(now + self.retire_after_ms)
            if self.retire_emits:
                yield _changed_row(key, None, UNHEALTHY, now)
            return
        if now < seen + self.timeout_ms:
            self.handle.registerTimer(seen + self.timeout_ms)
            return
        self.machine.update((UNHEALTHY, seen))
        self.handle.registerTimer(
            (now if self.retire_from_timeout else seen) + self.retire_after_ms
        )
        yield _changed_row(key, UNHEALTHY, status, now)


def _broken(name: str, **changes) -> type:
    """The reference with one of its behaviours changed, named for what it gets wrong."""
    return type(name, (_Broken,), changes)


BROKEN = [
    (
        _broken("NoTimeoutAfterRecovery", on_recovery_register=False),
        "gives a recovered machine no timeout timer, so it never turns Unhealthy again",
        "After a recovery, let the machine go silent for longer than the timeout and expect "
        "Healthy -> Unhealthy at the right time.",
    ),
    (
        _broken("TimesOutLateAfterRecovery", recovery_timeout_factor=2),
        "gives a recovered machine twice the timeout before it turns Unhealthy again",
        "After a recovery, expect Healthy -> Unhealthy exactly timeout_ms after the recovering "
        "heartbeat.",
    ),
    (
        _broken("KeepsTheRetirementTimer", on_recovery_delete=False),
        "keeps the retirement timer of a machine's first silence after it recovers, so a "
        "machine that goes silent again is retired too early",
        "Recover a machine, let it go Unhealthy again, and check that it is still in the state "
        "retire_after_ms after its first silence's heartbeat (and gone only retire_after_ms after "
        "its latest one).",
    ),
    (
        _broken("RecoversSilently", recovery_emits=False),
        "emits nothing when an Unhealthy machine sends a heartbeat",
        "Check the exact rows a recovery emits: one Unhealthy -> Healthy row at the batch's time.",
    ),
    (
        _broken("RecoversAsNew", recovery_status=INITIALIZING),
        "reports a recovered machine as Initializing",
        "Check the status of the recovery row, not only that a row came out.",
    ),
    (
        _broken("RetiresWithARow", retire_emits=True),
        "emits a row when it retires a machine",
        "Check that the moment of retirement emits nothing at all.",
    ),
    (
        _broken("RetiresWithoutForgetting", retire_clears=False),
        "never clears a retired machine's state",
        "After retire_after_ms, peek at the state (peekValueState) and expect None; and a "
        "machine that comes back after that must be Initializing.",
    ),
    (
        _broken("KeepsATombstone", tombstone=True),
        "keeps a retired machine's state as an empty marker instead of removing it",
        "After the retirement, expect no state at all for the machine: peekValueState returns "
        "None.",
    ),
    (
        _broken("RetiresButKeepsATimer", retire_keeps_a_timer=True),
        "leaves a timer behind when it retires a machine",
        "After the retirement, check that the machine has no pending timer (pending_timers).",
    ),
    (
        _broken("GreetsTheRetiredAsRecovered", greets_the_retired=True),
        "remembers retired machines and greets one that comes back as recovered, Unhealthy -> "
        "Healthy",
        "Send a heartbeat after the retirement and check the exact row: None -> Initializing.",
    ),
    (
        _broken("RetiresFromTheTimeout", retire_from_timeout=True),
        "counts retire_after_ms from the moment a machine turned Unhealthy instead of from its "
        "latest heartbeat",
        "Check the state at exactly retire_after_ms after the latest heartbeat: gone then, and "
        "still there a millisecond before.",
    ),
]


def _run_learner_test(nb, processor_class):
    """What the learner's test did: ``("passed", returned)`` or ``("failed", where and why)``."""
    try:
        returned = nb.check_recovery_and_retirement(processor_class)
    except Exception as error:  # a test that fails, whatever it raised
        if is_not_done(error):
            raise
        return "failed", _where(error)
    return "passed", returned


def _where(error: Exception) -> str:
    """The error and the line of the learner's cell that raised it."""
    said = f"{type(error).__name__}: {error}".rstrip(": ")
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if frame.filename.startswith("<") and "cell" in frame.filename and frame.line:
            return f"{said}, at `{frame.line.strip()}`"
    return said


@exercise("4.4")
def test_your_test_passes_on_a_right_processor(nb):
    outcome, detail = _run_learner_test(nb, ReferenceHeartbeatProcessor)
    if outcome == "failed":
        raise CheckFailed(
            "check_recovery_and_retirement failed on a right LeanHeartbeatProcessor (the "
            "course's reference): a test must pass on code that is right.",
            expected="it returns",
            actual=detail,
            hint="Compare your expectations with the worked examples of 4.3 and 4.4: timers fire "
            "in the first callback at or after their time, and rows carry the batch's time.",
        )
    if detail is not None:
        raise CheckFailed(
            "check_recovery_and_retirement should return None when every expectation holds "
            "and raise (an assert) when one does not.",
            expected="None",
            actual=repr(detail),
        )


@pytest.mark.parametrize(
    "broken, mistake",
    [pytest.param(c, m, marks=exercise("4.4", hint=h), id=c.__name__) for c, m, h in BROKEN],
)
def test_your_test_fails_on_a_broken_processor(nb, broken, mistake):
    outcome, detail = _run_learner_test(nb, broken)
    if outcome == "passed":
        raise CheckFailed(
            f"check_recovery_and_retirement passed on a processor that {mistake}: a test must "
            f"fail on it.",
            expected="an AssertionError",
            actual="it returned without raising" + ("" if detail is None else f" ({detail!r})"),
        )


# --- 4.5 · predict: rows or timers first (the TwsTester half) -------------------------------


def _pairs(value, name: str) -> list[tuple]:
    """The learner's prediction as a list of (previous_status, status) tuples."""
    try:
        pairs = [tuple(pair) for pair in value]
    except TypeError:
        pairs = None
    if pairs is None or not all(len(p) == 2 for p in pairs):
        raise CheckFailed(
            f"{name} should be a list of (previous_status, status) pairs, e.g. "
            f"[(INITIALIZING, HEALTHY)].",
            expected="a list of pairs",
            actual=repr(value),
        )
    return pairs


@exercise("4.5")
def test_what_twstester_emits(nb):
    tester = TwsTester(ReferenceHeartbeatProcessor(timeout_ms=5_000), timeMode="ProcessingTime")
    beat = [Row(machine_name="m1", machine_time=None)]
    tester.test("m1", beat)
    rows = tester.setProcessingTime(5_000) + tester.test("m1", beat)
    expect_equal(
        _pairs(nb.TWSTESTER_EMITS, "TWSTESTER_EMITS"),
        [(r.previous_status, r.status) for r in rows],
        "TWSTESTER_EMITS: what setProcessingTime(5000) and then test('m1', beat) emit, as "
        "(previous_status, status), for a machine that beat once at 0 ms (timeout 5000 ms).",
        hint="Read the two calls as two steps of their own: what can each return by itself, "
        "given what the processor has seen before it?",
    )


# --- Spark plumbing for 4.5 and 4.6 -----------------------------------------------------------


def _write(folder: Path, name: str, machines: list[str]) -> None:
    write_heartbeats(folder, name, [(m, "2026-11-22T10:00:00Z") for m in machines], order=None)


def _run(spark, frame, output: Path, checkpoint: Path, what: str) -> list[Row]:
    """Run ``frame`` to the end of its input (availableNow), appending to parquet; every row."""
    writer = (
        frame.writeStream.format("parquet")
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
            query, within=240, what="the check's query over your processor to read its heartbeats"
        )
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(
            f"The query of {what} failed.",
            expected="the query to read its heartbeats and end",
            actual=query_cause(error),
        ) from None
    return spark.read.parquet(str(output)).collect()


# --- 4.5 · predict: rows or timers first (the Spark half) -----------------------------------


@exercise("4.5", timeout=180)
def test_what_spark_emits(nb, spark, tmp_path, checkpoint_dir):
    predicted = _pairs(nb.SPARK_EMITS, "SPARK_EMITS")
    incoming, output = tmp_path / "incoming", tmp_path / "output"

    def run() -> list[Row]:
        heartbeats = spark.readStream.schema(HEARTBEAT_DDL).json(str(incoming))
        # 1 ms: the deadline has passed by the next batch, whatever the wall clock says.
        frame = heartbeats.groupBy("machine_name").transformWithState(
            ReferenceHeartbeatProcessor(timeout_ms=1), TRANSITION_DDL, "Append", "ProcessingTime"
        )
        return _run(spark, frame, output, checkpoint_dir, "the reference processor")

    def measure() -> list[tuple]:
        _write(incoming, "first", ["m1"])
        first = {tuple(r) for r in run()}
        _write(incoming, "second", ["m1"])
        second = sorted(
            (r for r in run() if tuple(r) not in first), key=lambda r: r.last_status_change_time
        )
        return [(r.previous_status, r.status) for r in second]

    expect_equal(
        predicted,
        spark_facts("4.5 what Spark emits", measure, check=__file__),
        "SPARK_EMITS: what a Spark micro-batch emits, as (previous_status, status), when m1's "
        "second heartbeat arrives in the first batch after its deadline.",
        hint="In a Spark micro-batch every key's rows are handled before any timer fires.",
    )


# --- 4.6 · debug: counts that outlive a micro-batch -------------------------------------------

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
    diagnosis = _diagnosis(nb.DIAGNOSIS_4_6)
    spark_shows = spark_facts(
        "4.6 the found counter",
        lambda: _found_counter_shows(spark, tmp_path / "found"),
        check=__file__,
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS_4_6 against a run of MilestoneCounter on Spark over 3, 3 and 4 heartbeats of "
        "m1, one micro-batch each: the input rows and the rows in the operator's state store "
        "after each micro-batch (its progress reports), and the state variables that the "
        "checkpoint's state-metadata lists.",
        hint="Read found_query.recentProgress (numInputRows, stateOperators[0]['numRowsTotal']) "
        "and the stateVariables of the operatorProperties that state-metadata gives for the "
        "checkpoint, rather than reasoning from the code.",
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
