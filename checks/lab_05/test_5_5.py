"""Checks of exercise 5.5 · The audit.

The audit of a run's transitions and state, on transitions built here; no Spark.
"""

from __future__ import annotations

from datetime import UTC, datetime

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
)


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
    if not isinstance(problems, list) or not all(
        isinstance(p, tuple) and len(p) == 2 for p in problems
    ):
        raise CheckFailed(
            "audit() should return a list of (machine_name, problem) tuples.",
            expected="a list of 2-tuples",
            actual=repr(problems),
        )
    return problems


@exercise("5.5")
def test_a_clean_run_has_no_problem(nb):
    expect_equal(
        [
            _audit(nb, CLEAN, {"m1": HEALTHY, "m2": HEALTHY}),
            _audit(nb, CLEAN, {"m2": HEALTHY}),
        ],
        [[], []],
        "Every transition follows from the one before and the state agrees; then the same with "
        "m1 absent from the state (retired), which is fine.",
    )


@exercise("5.5")
def test_a_batch_written_twice_is_a_duplicate(nb):
    twice = CLEAN[:4] + CLEAN[2:4] + CLEAN[4:]
    expect_equal(
        _audit(nb, twice, {"m1": HEALTHY, "m2": HEALTHY}),
        [("m1", "duplicate"), ("m2", "duplicate")],
        "Batch 1 appears twice: both machines' Initializing -> Healthy rows repeated.",
    )


@exercise("5.5")
def test_a_missing_transition_is_lost(nb):
    gap = [r for r in CLEAN if not (r["machine_name"] == "m2" and r["status"] == UNHEALTHY)]
    expect_equal(
        [
            _audit(nb, gap, {"m1": HEALTHY, "m2": HEALTHY}),
            _audit(nb, CLEAN[2:3], {"m1": HEALTHY}),
        ],
        [[("m2", "lost")], [("m1", "lost")]],
        "m2's Healthy -> Unhealthy row is missing, so its Unhealthy -> Healthy row does not "
        "follow from Healthy; then a machine whose first row is Initializing -> Healthy.",
    )


@exercise("5.5")
def test_the_state_must_agree_with_the_output(nb):
    expect_equal(
        _audit(nb, CLEAN, {"m3": INITIALIZING, "m1": UNHEALTHY, "m2": HEALTHY}),
        [("m1", "state"), ("m3", "state")],
        "The state says m1 is Unhealthy (its rows end Healthy) and holds m3, which has no rows "
        "(they end in None). State problems come last, by machine name.",
    )


@exercise("5.5")
def test_problems_do_not_hide_each_other_and_keep_their_order(nb):
    messy = [
        CLEAN[0],
        CLEAN[2],
        CLEAN[2],
        _t("m1", UNHEALTHY, HEALTHY, 12, 7),
        CLEAN[1],
        CLEAN[3],
        CLEAN[3],
    ]
    expect_equal(
        _audit(nb, messy, {"m1": UNHEALTHY, "m2": UNHEALTHY}),
        [
            ("m1", "duplicate"),
            ("m1", "lost"),
            ("m2", "duplicate"),
            ("m1", "state"),
            ("m2", "state"),
        ],
        "m1's Healthy row twice, then a recovery from an Unhealthy it never reported; m2's "
        "Healthy row twice; and a state that says both are Unhealthy.",
        hint="After a bad row, carry on from its status; list the transitions' problems in "
        "their order, then the state's problems by machine name.",
    )
