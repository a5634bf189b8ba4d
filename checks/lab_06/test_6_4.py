"""Checks of exercise 6.4 · Pick a trigger interval and shuffle partitions.

The planner on figures given in the check (examples, not measurements of anything).
"""

from __future__ import annotations

import math

from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_that,
)


def _m(nb, partitions, overhead_ms, rows_per_second):
    return nb.Measurement(partitions, overhead_ms, rows_per_second)


def _figures(nb):
    return [_m(nb, 2, 400.0, 10_000.0), _m(nb, 4, 600.0, 16_000.0)]


def _plan(nb, *args, **kwargs):
    return nb.plan_query(*args, **kwargs)


def _same(plan, expected) -> bool:
    if plan is None or expected is None:
        return plan is expected
    if not isinstance(plan, tuple) or len(plan) != 4:
        return False
    return (
        plan[0] == expected[0]
        and plan[1] == expected[1]
        and math.isclose(plan[2], expected[2])
        and math.isclose(plan[3], expected[3])
    )


def _expect_plan(nb, plan, expected, message: str) -> None:
    """``plan`` against the Plan ``expected`` (a tuple, or None), its two times to a float's
    precision."""
    if not _same(plan, expected):
        raise CheckFailed(
            message,
            expected=None if expected is None else nb.Plan(*expected),
            actual=plan,
        )


def _check_plan(nb, expected, why, machines, target_ms, **kwargs):
    """plan_query(machines, target_ms, the two figures, **kwargs) against ``expected``."""
    args = (machines, target_ms, _figures(nb))
    plan = _plan(nb, *args, **kwargs)
    expect_that(
        plan is None or isinstance(plan, tuple),
        "plan_query() should return a Plan (or None).",
        expected="a Plan or None",
        actual=type(plan).__name__,
    )
    shown = ", ".join(
        [
            *(repr(a) if i != 2 else "measurements" for i, a in enumerate(args)),
            *(f"{k}={v!r}" for k, v in kwargs.items()),
        ]
    )
    _expect_plan(
        nb,
        plan,
        expected,
        f"plan_query({shown}) with 2 partitions at 400 ms + 10,000 rows/s and 4 at 600 ms + "
        f"16,000 rows/s: {why}",
    )


@exercise("6.4")
def test_the_largest_trigger_that_meets_the_target(nb):
    _check_plan(
        nb,
        (2_000, 2, 600.0, 2_600.0),
        "5000 ms waits too long; at 2000 ms both keep up and the fewest partitions win.",
        1_000,
        3_000,
    )


@exercise("6.4")
def test_keeping_up_and_the_target_are_inclusive(nb):
    _check_plan(
        nb,
        (2_000, 2, 2_000.0, 4_000.0),
        "at 2000 ms, 2 partitions take exactly 2000 ms per batch and reach exactly 4000 ms: "
        "that still counts.",
        8_000,
        4_000,
    )


@exercise("6.4")
def test_more_partitions_when_fewer_cannot_keep_up(nb):
    _check_plan(
        nb,
        (5_000, 4, 4_350.0, 9_350.0),
        "at 10000 ms the latency is too high; at 5000 ms only 4 partitions keep up "
        "(2 would take 6400 ms per batch).",
        12_000,
        12_000,
    )


@exercise("6.4")
def test_no_plan_when_nothing_keeps_up(nb):
    _check_plan(
        nb,
        None,
        "20,000 heartbeats/s is more than either configuration processes.",
        20_000,
        60_000,
    )
    _check_plan(
        nb,
        None,
        "a 500 ms target is out of reach: even the 250 ms trigger needs "
        "425 ms batches, longer than the trigger.",
        1_000,
        500,
    )


@exercise("6.4")
def test_the_order_of_measurements_does_not_matter(nb):
    _expect_plan(
        nb,
        _plan(nb, 1_000, 3_000, list(reversed(_figures(nb)))),
        (2_000, 2, 600.0, 2_600.0),
        "With the measurements in the other order (4 partitions first) the answer is the "
        "same: at 2000 ms both keep up and the fewest partitions win.",
    )


@exercise("6.4")
def test_trigger_choices_and_heartbeat_rate_are_parameters(nb):
    _check_plan(
        nb,
        (700, 2, 470.0, 1_170.0),
        "only 300 and 700 ms are allowed here.",
        1_000,
        3_000,
        trigger_choices_ms=(300, 700),
    )
    _check_plan(
        nb,
        (2_000, 2, 2_000.0, 4_000.0),
        "4,000 machines sending 2 heartbeats a second are 8,000 rows a second.",
        4_000,
        4_000,
        heartbeats_per_second=2.0,
    )


@exercise("6.4")
def test_the_plan_is_a_plan(nb):
    plan = _plan(nb, 1_000, 3_000, _figures(nb))
    if not isinstance(plan, nb.Plan):
        raise CheckFailed(
            "plan_query() should return a Plan(trigger_ms, shuffle_partitions, batch_ms, "
            "worst_latency_ms).",
            expected="a Plan",
            actual=f"{type(plan).__name__}: {plan!r}",
        )
    expect_that(
        isinstance(plan.trigger_ms, int) and not isinstance(plan.trigger_ms, bool),
        "Plan.trigger_ms should be one of trigger_choices_ms, an int.",
        expected="an int",
        actual=f"{type(plan.trigger_ms).__name__}: {plan.trigger_ms!r}",
    )
