"""Checks of exercise 6.6 · The bucket's timer.

The learner's handleExpiredTimer with the course's handleInputRows, on ``TwsTester``: each
machine's timeout and retirement, a superseded timer, one timer per bucket, and the same story
as lab 04's processor; no Spark.
"""

from __future__ import annotations

from story_06 import (
    FOUR,
    Buckets,
    _all_unhealthy,
    _said,
    _same_story_as_lab_04,
    _steady_bucket,
    yours_timer,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    Meter,
    exercise,
    expect_equal,
    expect_that,
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
    fleet.play({1_000: ("m1", "m2"), 2_000: ("m1", "m2"), 4_000: ("m2",)})
    timeline = {
        6_999: (
            [],
            "At 6999 ms m1 has been silent for 4999 ms, less than the 5000 ms timeout: emit "
            "nothing yet.",
        ),
        7_000: (
            [("m1", UNHEALTHY, HEALTHY, 7_000)],
            "At 7000 ms m1 has been silent for 5000 ms: emit m1's Healthy -> Unhealthy, and "
            "nothing for m2, seen at 4000 ms.",
        ),
        8_999: (
            [],
            "At 8999 ms m2 has been silent for 4999 ms and m1 is already Unhealthy: emit nothing.",
        ),
        9_000: (
            [("m2", UNHEALTHY, HEALTHY, 9_000)],
            "At 9000 ms m2 has been silent for 5000 ms: emit m2's Healthy -> Unhealthy. After a "
            "timer fires, register the next one at the earliest deadline of the machines left.",
        ),
    }
    for ms, (expected, message) in timeline.items():
        fleet.expect(fleet.at(ms), expected, message)
    later = []
    for t in range(10_000, 40_000, 1_000):
        later += fleet.at(t)
    fleet.expect(
        later,
        [],
        "An Unhealthy machine that stays silent is reported once: emit nothing from 10 s to 40 s.",
    )


@exercise("6.6")
def test_bucketed_unhealthy_is_stamped_when_the_timer_fires(nb):
    fleet = Buckets(yours_timer(nb))
    fleet.play({1_000: ("m1", "m2"), 2_000: ("m1",)})
    rows = fleet.at(9_500)
    expected = [("m1", UNHEALTHY, HEALTHY, 9_500), ("m2", UNHEALTHY, INITIALIZING, 9_500)]
    fleet.expect(
        rows,
        expected,
        "No micro-batch ran between 2000 and 9500 ms: at 9500 ms both machines are overdue and "
        "turn Unhealthy, stamped with the time the timer fired, as lab 04's processor does.",
    )


@exercise("6.6")
def test_bucketed_retirement_is_silent_and_clears_the_bucket(nb):
    fleet = Buckets(yours_timer(nb), retire_after_ms=30_000)
    fleet.play({1_000: ("m1", "m2"), 2_000: ("m1", "m2"), 5_000: ("m2",)})
    fleet.at(7_000)  # m1 Unhealthy
    fleet.at(10_000)  # m2 Unhealthy
    # At each time: what the machines in the bucket must then satisfy, and the failure's words.
    retiring = {
        31_999: (
            lambda held: {"m1", "m2"} <= held,
            "At 31999 ms m1 has been silent for 29999 ms, less than retire_after_ms (30000): "
            "both machines should still be in the bucket's state.",
            "m1 and m2",
        ),
        32_000: (
            lambda held: "m1" not in held and "m2" in held,
            "At 32000 ms, 30000 ms after its last heartbeat, m1 should be gone from the bucket "
            "and m2 (last seen at 5000 ms) still in it.",
            "m2, without m1",
        ),
        34_999: (
            lambda held: "m2" in held,
            "At 34999 ms m2 has been silent for 29999 ms: it should still be in the bucket.",
            "m2 in the bucket",
        ),
    }
    rows = []
    for ms, (holds, message, expected) in retiring.items():
        rows += fleet.at(ms)
        held = fleet.machines()
        expect_that(holds(held), message, expected=expected, actual=sorted(held))
    rows += fleet.at(35_000)
    fleet.expect(rows, [], "Retiring a machine is silent: no output row while retiring m1 and m2.")
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
    fleet.expect(rows, expected, "A retired machine that comes back is new again.")


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


@exercise("6.6")
def test_your_timer_tells_the_same_story_as_lab_04(nb):
    _same_story_as_lab_04(yours_timer(nb))


@exercise("6.6")
def test_a_superseded_timer_changes_nothing(nb):
    fleet = Buckets(yours_timer(nb), retire_after_ms=30_000)
    fleet.play({1_000: ("m1",), 2_000: ("m1",)})
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
