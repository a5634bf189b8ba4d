"""Checks of exercise 4.1 · The state machine as a pure function.

The transition function on each event from each status; no Spark.
"""

from __future__ import annotations

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
)

HEARTBEAT, TIMEOUT = "heartbeat", "timeout"


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
