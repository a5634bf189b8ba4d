"""Checks of exercise 6.5 · A bucket takes its heartbeats.

The learner's handleInputRows with the course's handleExpiredTimer, on ``TwsTester``: the rows
it emits, the bucket's value and timer it leaves, what a batch costs in state calls, and the
same story as lab 04's processor; no Spark.
"""

from __future__ import annotations

from story_06 import (
    Buckets,
    _all_unhealthy,
    _said,
    _same_story_as_lab_04,
    _steady_bucket,
    yours_inputs,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    Meter,
    exercise,
    expect_equal,
    expect_that,
)
from streamlab.tws_batches import register_timer


def _bucket(tester, bucket: int = 0):
    """The bucket's value as plain lists, or None."""
    value = tester.peekValueState("bucket", bucket)
    if value is None:
        return None
    names, statuses, seen, timer = value
    return (list(names), list(statuses), list(seen), timer)


@exercise("6.5")
def test_bucketed_first_heartbeats_are_initializing(nb):
    fleet = Buckets(yours_inputs(nb))
    fleet.at(1_000)
    rows = fleet.beat("m1", "m2")
    expected = [("m1", INITIALIZING, None, 1_000), ("m2", INITIALIZING, None, 1_000)]
    fleet.expect(
        rows,
        expected,
        "The first heartbeats of two new machines of one bucket, at 1000 ms, should emit one "
        "row per machine, named after the machine (not the bucket).",
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
    fleet.expect(
        rows,
        expected,
        "The same heartbeats in the next micro-batch should turn both machines Healthy.",
    )
    fleet.at(3_000)
    rows = fleet.beat("m1", "m2", "m1")
    fleet.expect(
        rows,
        [],
        "Healthy machines that send more heartbeats have not changed: emit nothing (at 3000 ms).",
    )


def _beat_in_a_quiet_bucket(nb, machine: str) -> tuple[Buckets, list[tuple]]:
    """A heartbeat of ``machine`` at 10000 ms in a bucket whose m1 and m2 are both Unhealthy
    (its timer a retirement an hour away): the bucket, and what the heartbeat emitted."""
    fleet = _all_unhealthy(yours_inputs(nb))
    fleet.at(10_000)
    return fleet, fleet.beat(machine)


@exercise("6.5")
def test_bucketed_recovery_arms_an_earlier_timer(nb):
    fleet, rows = _beat_in_a_quiet_bucket(nb, "m2")
    expected = [("m2", HEALTHY, UNHEALTHY, 10_000)]
    fleet.expect(rows, expected, "An Unhealthy machine that sends a heartbeat recovers.")
    early = fleet.at(14_999)
    rows = fleet.at(15_000)
    fleet.expect(
        early + rows,
        [("m2", UNHEALTHY, HEALTHY, 15_000)],
        "m2 recovered at 10000 ms in a bucket whose machines were all Unhealthy, then went "
        "silent: it should turn Unhealthy again at 15000 ms (what the timers emitted up to "
        "then). The bucket's only timer was a retirement an hour away: when a machine's new "
        "deadline is earlier than the armed timer, register one at that deadline.",
    )


@exercise("6.5")
def test_bucketed_newcomer_in_a_quiet_bucket_times_out(nb):
    fleet, rows = _beat_in_a_quiet_bucket(nb, "m3")
    fleet.expect(
        rows,
        [("m3", INITIALIZING, None, 10_000)],
        "A new machine in a bucket that already holds others is Initializing.",
    )
    rows = fleet.at(15_000)
    fleet.expect(
        rows,
        [("m3", UNHEALTHY, INITIALIZING, 15_000)],
        "m3 joined a bucket whose machines were all Unhealthy and never beat again: it should "
        "turn Unhealthy at 15000 ms. Register a timer when a new machine's deadline is earlier "
        "than the bucket's armed timer.",
    )


@exercise("6.5")
def test_your_heartbeats_tell_the_same_story_as_lab_04(nb):
    _same_story_as_lab_04(yours_inputs(nb))


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
