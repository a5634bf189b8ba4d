"""What lab 04's checks share: a processor of the lab driven by ``TwsTester`` on a clock the
check sets, the checks that hold HeartbeatProcessor (4.2) and LeanHeartbeatProcessor (4.3) to
the same behaviour, and the Spark plumbing of 4.5 and 4.6 (heartbeat files, a query run with
``trigger(availableNow=True)`` to the end of its input). No check sleeps or reads the wall
clock's value.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from pyspark.sql import Row

from streamlab.deadlines import finish
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    CheckFailed,
    ProcessorStory,
    exercise,
    expect_equal,
    is_not_done,
    query_cause,
    start_available,
    write_heartbeats,
)
from streamlab.tws_batches import pending_timers, register_timer

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


ROWS = "Rows as (machine, status, previous_status, at ms)."


# --- 4.2 and 4.3 · the same behaviour from both processors ------------------------------

#: The checks 4.2 and 4.3 share, each called with the name of the processor under test.
#: ``test_4_2.py`` and ``test_4_3.py`` take them from :func:`shared_checks`, listed in
#: :data:`SHARED` below.


def first_heartbeat_is_initializing(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    expect_equal(
        story.beat("m1"),
        [("m1", INITIALIZING, None, 1_000)],
        f"{name}: the first heartbeat of a new machine, in a batch at 1000 ms. {ROWS}",
    )


def heartbeats_in_one_batch_count_once(nb, name):
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


def second_heartbeat_is_healthy_then_nothing(nb, name):
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


def silence_turns_a_machine_unhealthy_once(nb, name):
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


def initializing_machine_can_time_out(nb, name):
    story = Story(nb, name)
    story.at(1_000)
    story.beat("m1")
    expect_equal(
        story.at(6_000),
        [("m1", UNHEALTHY, INITIALIZING, 6_000)],
        f"{name}: one heartbeat at 1000 ms, then nothing until 6000 ms. {ROWS}",
    )


def steady_heartbeats_never_time_out(nb, name):
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


def a_heartbeat_after_unhealthy_is_a_recovery(nb, name):
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


def timeout_comes_from_the_constructor(nb, name):
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


def machines_are_independent(nb, name):
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


def the_state_keeps_the_latest_heartbeat(nb, name):
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


def timers_after_each_heartbeat(story: Story, times) -> list[int]:
    """How many timers m1 has pending after each of its heartbeats, one at each of ``times``."""
    counts = []
    for t in times:
        story.at(t)
        story.beat("m1")
        counts.append(len(pending_timers(story.tester, "m1")))
    return counts


def never_more_than_one_timer(nb, name):
    counts = timers_after_each_heartbeat(Story(nb, name), range(1_000, 9_000, 1_000))
    expect_equal(
        counts,
        [1] * len(counts),
        f"{name}: pending timers of m1 after each of its heartbeats, one a second.",
    )


def a_leftover_timer_emits_nothing(nb, name):
    story = Story(nb, name)
    register_timer(story.tester, "m9", 1_000)
    expect_equal(
        story.at(1_000),
        [],
        f"{name}: a timer fires at 1000 ms for m9, a machine with no state (a timer left over "
        f"after its state was removed). {ROWS}",
        hint="get() returns None for a machine without state: there is nothing to time out.",
    )


#: The shared checks, in the order a grading runs them.
SHARED = [
    first_heartbeat_is_initializing,
    heartbeats_in_one_batch_count_once,
    second_heartbeat_is_healthy_then_nothing,
    silence_turns_a_machine_unhealthy_once,
    initializing_machine_can_time_out,
    steady_heartbeats_never_time_out,
    a_heartbeat_after_unhealthy_is_a_recovery,
    timeout_comes_from_the_constructor,
    machines_are_independent,
    the_state_keeps_the_latest_heartbeat,
    never_more_than_one_timer,
    a_leftover_timer_emits_nothing,
]


def _shared_check(check, exercise_id: str, processor: str):
    @exercise(exercise_id)
    def test(nb):
        check(nb, processor)

    test.__name__ = test.__qualname__ = f"test_{check.__name__}"
    return test


def shared_checks(exercise_id: str, processor: str) -> dict:
    """Each check of :data:`SHARED` as a check of ``exercise_id`` on the notebook's class
    ``processor``, by its name ``test_<check>``: a check file's ``globals().update(...)``
    puts them beside its own."""
    return {
        f"test_{check.__name__}": _shared_check(check, exercise_id, processor) for check in SHARED
    }


# --- Spark plumbing for 4.5 and 4.6 -----------------------------------------------------------


def _write(folder: Path, name: str, machines: list[str]) -> None:
    write_heartbeats(folder, name, [(m, "2026-11-22T10:00:00Z") for m in machines], order=None)


def _run(spark, frame, output: Path, checkpoint: Path, what: str) -> list[Row]:
    """Run ``frame`` to the end of its input (availableNow), appending to parquet; every row."""
    writer = (
        frame.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
    )
    query = start_available(spark, writer)
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
