"""``streamlab.tws_batches``: a TwsTester micro-batch in Spark's order, and its version guard."""

from __future__ import annotations

import pytest
from pyspark.sql import Row
from pyspark.sql.streaming import StatefulProcessor
from pyspark.sql.streaming.tws_tester import TwsTester

from streamlab.tws_batches import (
    TwsTesterChanged,
    pending_timers,
    register_timer,
    spark_batch,
    spark_batch_by_handler,
    spark_initial_state,
)

TIMEOUT_MS = 5_000


class Countdown(StatefulProcessor):
    """A machine is Unhealthy TIMEOUT_MS after its last heartbeat; a heartbeat moves its timer."""

    def init(self, handle):
        self.handle = handle
        self.status = handle.getValueState("status", "status STRING")

    def handleInputRows(self, key, rows, timerValues):
        now = timerValues.getCurrentProcessingTimeInMs()
        for timer in list(self.handle.listTimers()):
            self.handle.deleteTimer(timer)
        self.handle.registerTimer(now + TIMEOUT_MS)
        old = (self.status.get() or (None,))[0]
        self.status.update(("up",))
        if old != "up":
            yield Row(key=key[0], status="up", at=now)

    def handleExpiredTimer(self, key, timerValues, expiredTimerInfo):
        self.status.update(("down",))
        yield Row(key=key[0], status="down", at=timerValues.getCurrentProcessingTimeInMs())


class Resumed(Countdown):
    """Countdown started from an earlier monitor's state: ``last_ms``, the key's last heartbeat."""

    def handleInitialState(self, key, initialState, timerValues):
        self.status.update(("up",))
        self.handle.registerTimer(initialState.last_ms + TIMEOUT_MS)


BEAT = [Row(machine_name="m1")]


def statuses(rows) -> list[tuple]:
    return [(r.key, r.status, r.at) for r in rows]


def test_a_heartbeat_at_the_deadline_comes_before_the_timer():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    assert statuses(spark_batch(tester, 1_000, {"m1": BEAT})) == [("m1", "up", 1_000)]
    assert spark_batch(tester, 6_000, {"m1": BEAT}) == []
    assert pending_timers(tester, "m1") == [11_000]


def test_setProcessingTime_fires_the_timer_before_the_heartbeat():
    # What the module is for: the public API flaps where Spark does not.
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    tester.test("m1", BEAT)
    flapped = tester.setProcessingTime(5_000) + tester.test("m1", BEAT)
    assert statuses(flapped) == [("m1", "down", 5_000), ("m1", "up", 5_000)]


def test_due_timers_of_keys_without_rows_fire_after_the_rows():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    spark_batch(tester, 1_000, {"m1": BEAT, "m2": BEAT})
    out = spark_batch(tester, 7_000, {"m3": BEAT})
    assert statuses(out) == [("m3", "up", 7_000), ("m1", "down", 7_000), ("m2", "down", 7_000)]
    assert pending_timers(tester, "m1") == [] and pending_timers(tester, "m3") == [12_000]


def test_each_handler_s_rows_can_be_told_apart():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    spark_batch(tester, 1_000, {"m1": BEAT})
    from_rows, from_timers = spark_batch_by_handler(tester, 7_000, {"m2": BEAT})
    assert statuses(from_rows) == [("m2", "up", 7_000)]
    assert statuses(from_timers) == [("m1", "down", 7_000)]


def test_a_batch_without_rows_only_fires_timers():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    spark_batch(tester, 1_000, {"m1": BEAT})
    assert spark_batch(tester, 5_999, {}) == []
    assert statuses(spark_batch(tester, 6_000, {})) == [("m1", "down", 6_000)]


def test_processing_time_does_not_go_back():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    spark_batch(tester, 2_000, {})
    with pytest.raises(ValueError, match="only moves forward"):
        spark_batch(tester, 1_000, {})


def test_a_story_can_start_with_a_timer_registered_from_outside():
    tester = TwsTester(Countdown(), timeMode="ProcessingTime")
    tester.updateValueState("status", "m7", ("up",))
    register_timer(tester, "m7", 3_000)
    assert pending_timers(tester, "m7") == [3_000]
    assert statuses(spark_batch(tester, 3_000, {})) == [("m7", "down", 3_000)]
    assert tester.peekValueState("status", "m7") == ("down",)


def test_an_initial_state_is_taken_at_the_given_processing_time():
    tester = TwsTester(Resumed(), timeMode="ProcessingTime")
    returned = spark_initial_state(
        tester, 10_000, [("m1", Row(last_ms=9_000)), ("m2", Row(last_ms=7_000))]
    )
    assert returned == [None, None]
    assert tester.peekValueState("status", "m2") == ("up",)
    assert pending_timers(tester, "m1") == [14_000] and pending_timers(tester, "m2") == [12_000]
    assert spark_batch(tester, 11_000, {}) == []
    assert statuses(spark_batch(tester, 12_000, {})) == [("m2", "down", 12_000)]


def test_an_initial_state_sees_the_clock_it_is_given():
    seen = []

    class Clock(Countdown):
        def handleInitialState(self, key, initialState, timerValues):
            seen.append((key, timerValues.getCurrentProcessingTimeInMs()))

    tester = TwsTester(Clock(), timeMode="ProcessingTime")
    spark_initial_state(tester, 5_000, [("m1", Row(last_ms=0))])
    assert seen == [(("m1",), 5_000)]
    with pytest.raises(ValueError, match="only moves forward"):
        spark_initial_state(tester, 4_000, [("m1", Row(last_ms=0))])


def test_what_handleInitialState_returns_is_handed_back():
    class Yielding(Countdown):
        def handleInitialState(self, key, initialState, timerValues):
            yield Row(key=key[0])

    tester = TwsTester(Yielding(), timeMode="ProcessingTime")
    (returned,) = spark_initial_state(tester, 1_000, [("m1", Row(last_ms=0))])
    assert list(returned) == [Row(key="m1")]


class WithoutPrivates:
    """A TwsTester of a PySpark release that renamed its private members."""

    def __init__(self):
        self.handle = object()

    def test(self, key, rows):
        return []


@pytest.mark.parametrize(
    "call, member",
    [
        (lambda t: spark_batch(t, 1_000, {}), "_currentProcessingTimeMs"),
        (lambda t: pending_timers(t, "m1"), "handle._timers.listTimers"),
        (lambda t: register_timer(t, "m1", 1_000), "handle.setGroupingKey"),
        (lambda t: spark_initial_state(t, 1_000, []), "_currentProcessingTimeMs"),
    ],
)
def test_a_tester_without_the_private_members_gets_a_sentence(call, member):
    with pytest.raises(TwsTesterChanged) as raised:
        call(WithoutPrivates())
    message = str(raised.value)
    assert f"TwsTester.{member}" in message
    assert "checked against on PySpark 4.2 and 4.3" in message
    assert "streamlab/tws_batches.py" in message
