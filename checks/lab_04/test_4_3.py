"""Checks of exercise 4.3 · LeanHeartbeatProcessor.

The processor on ``TwsTester`` on a clock the check sets; no Spark. First the checks 4.2's
HeartbeatProcessor passes too (story_04.py), run on LeanHeartbeatProcessor; then retirement,
and the cost of a heartbeat in state calls and timers.
"""

from __future__ import annotations

from story_04 import ROWS, Story, shared_checks, timers_after_each_heartbeat

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    CheckFailed,
    Meter,
    exercise,
    expect_equal,
)
from streamlab.tws_batches import pending_timers

# test_first_heartbeat_is_initializing, ...: one check of 4.3 a function of story_04.SHARED.
globals().update(shared_checks("4.3", "LeanHeartbeatProcessor"))


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
    counts = timers_after_each_heartbeat(story, range(3_000, 33_000, 1_000))
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
