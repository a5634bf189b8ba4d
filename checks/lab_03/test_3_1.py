"""Checks of exercise 3.1 · The seed's state machine: each call as Spark makes it, no Spark."""

from story_03 import (
    EVENT,
    at,
    call,
    clock,
    group_state,
    heartbeats,
    show,
    stored,
    timeout_of,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    exercise,
    expect_equal,
)


def _transition(nb, state, *frames, **kwargs) -> list[tuple]:
    """The notebook's heartbeat_state_transition called as Spark calls it (story_03's call)."""
    return call(
        nb.heartbeat_state_transition, "heartbeat_state_transition", state, *frames, **kwargs
    )


@exercise("3.1")
def test_first_heartbeat_initializes_a_machine(nb):
    state = group_state(conf=EVENT)
    rows = _transition(nb, state, heartbeats("m1", 0))
    expect_equal(
        rows,
        [("m1", INITIALIZING, None, at(0))],
        "The first heartbeat of an unknown machine, at 10:00:00, initializes it.",
        show=show,
    )
    expect_equal(
        stored(state),
        (INITIALIZING, at(0)),
        "After it the state holds the status and the heartbeat's event time in ms.",
    )
    expect_equal(
        timeout_of(state),
        clock(at(5)),
        "With the default arm (arm_event_time), the timeout is the heartbeat's time plus "
        "timeout_ms.",
        hint="Arm the timeout with arm(state, last_seen_ms, timeout_ms) after every call with "
        "heartbeats.",
    )


@exercise("3.1")
def test_heartbeats_in_order_within_one_batch(nb):
    state = group_state(conf=EVENT)
    # Two frames, the later heartbeat first: the function must order them by event time.
    rows = _transition(nb, state, heartbeats("m1", 1.5), heartbeats("m1", 0, 3))
    expect_equal(
        rows,
        [("m1", INITIALIZING, None, at(0)), ("m1", HEALTHY, INITIALIZING, at(1.5))],
        "Heartbeats at 10:00:00, 10:00:01.5 and 10:00:03 of a new machine, in two "
        "DataFrames and not in order: one row per change, none for the third.",
        show=show,
        hint="Gather the event times of every DataFrame and sort them before the replay.",
    )
    expect_equal(stored(state), (HEALTHY, at(3)), "The state keeps the latest heartbeat.")
    expect_equal(timeout_of(state), clock(at(8)), "The timeout follows the latest heartbeat.")


@exercise("3.1")
def test_healthy_machine_emits_nothing_on_a_heartbeat(nb):
    state = group_state((HEALTHY, at(3)), conf=EVENT)
    rows = _transition(nb, state, heartbeats("m1", 4))
    expect_equal(rows, [], "A heartbeat of a Healthy machine changes nothing.", show=show)
    expect_equal(
        (stored(state), timeout_of(state)),
        ((HEALTHY, at(4)), clock(at(9))),
        "The state and the timeout follow the new heartbeat.",
    )


@exercise("3.1")
def test_last_seen_never_goes_backwards(nb):
    state = group_state((HEALTHY, at(10)), conf=EVENT)
    rows = _transition(nb, state, heartbeats("m1", 8))
    expect_equal(rows, [], "A late heartbeat of a Healthy machine changes nothing.", show=show)
    expect_equal(
        (stored(state), timeout_of(state)),
        ((HEALTHY, at(10)), clock(at(15))),
        "A heartbeat older than the last one seen (10:00:08 after 10:00:10) leaves "
        "last_seen_ms, and so the timeout, where they were.",
        hint="Keep the larger of the stored time and the new heartbeat's.",
    )


@exercise("3.1")
def test_timeout_makes_a_machine_unhealthy(nb):
    state = group_state((HEALTHY, at(4)), conf=EVENT, timed_out=True, watermark_ms=at(10))
    rows = _transition(nb, state, timeout_ms=2_000)
    expect_equal(
        rows,
        [("m1", UNHEALTHY, HEALTHY, at(6))],
        "A timed-out Healthy machine last seen at 10:00:04, with timeout_ms=2000, turns "
        "Unhealthy, stamped last seen + timeout_ms.",
        show=show,
    )
    expect_equal(
        (stored(state), timeout_of(state)),
        ((UNHEALTHY, at(4)), "not set"),
        "After a timeout the state holds Unhealthy with the same last heartbeat, and no new "
        "timeout is armed.",
    )


@exercise("3.1")
def test_unhealthy_machine_recovers_on_a_heartbeat(nb):
    state = group_state((UNHEALTHY, at(4)), conf=EVENT, watermark_ms=at(10))
    rows = _transition(nb, state, heartbeats("m1", 20))
    expect_equal(
        rows,
        [("m1", HEALTHY, UNHEALTHY, at(20))],
        "A heartbeat of an Unhealthy machine makes it Healthy again.",
        show=show,
    )


class Arms:
    """An arm function that records its calls and arms nothing."""

    def __init__(self):
        self.calls: list[tuple] = []

    def __call__(self, state, last_seen_ms, timeout_ms):
        self.calls.append((stored(state), last_seen_ms, timeout_ms))


@exercise("3.1")
def test_the_timeout_is_armed_by_the_arm_argument(nb):
    arms = Arms()
    state = group_state((HEALTHY, at(1)), conf=EVENT)
    result = nb.heartbeat_state_transition(
        ("m1",), iter([heartbeats("m1", 2, 3)]), state, timeout_ms=4_000, arm=arms
    )
    list(result or [])
    expect_equal(
        arms.calls,
        [((HEALTHY, at(3)), at(3), 4_000)],
        "After a call with heartbeats, arm is called once, after the state is stored, with "
        "(state, last_seen_ms, timeout_ms).",
        hint="Call the arm argument instead of setting a timeout yourself.",
    )
    timed_out = group_state((HEALTHY, at(3)), conf=EVENT, timed_out=True)
    list(nb.heartbeat_state_transition(("m1",), iter([]), timed_out, arm=arms) or [])
    expect_equal(len(arms.calls), 1, "A timeout call arms nothing.")
