"""Checks of exercise 5.6 · The partition's timer.

The learner's handleExpiredTimer with the course's handleInputRows and read_until, on
``TwsTester``; no Spark.
"""

from __future__ import annotations

from story_05 import (
    ROWS,
    PartitionLogs,
    _by_time,
    _fleet,
    _under_test,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START_MS,
    UNHEALTHY,
    exercise,
    expect_equal,
)
from streamlab.tws_batches import register_timer


def _timers_under_test(nb):
    """5.6: the learner's handleExpiredTimer, the course's handleInputRows and read_until."""
    return _under_test(nb.CatchUpTimers, "handleInputRows", "read_until")


@exercise("5.6")
def test_a_quiet_partition_times_out_at_each_deadline(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed("0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 8_000)}, 13_000)
    hub.seed("1", {"m3": (INITIALIZING, 9_000)}, 14_000)
    rows = hub.run(20_000, every_ms=500)
    expect_equal(
        rows,
        [
            ("m2", HEALTHY, UNHEALTHY, 13_000, 13_000),
            ("m3", INITIALIZING, UNHEALTHY, 14_000, 14_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ],
        f"Partition 0: m1 (Healthy, last heartbeat 10000) and m2 (Healthy, 8000), timer at "
        f"13000; partition 1: m3 (Initializing, 9000), timer at 14000; batches without rows "
        f"every 500 ms to 20000, timeout 5000. {ROWS}",
    )
    expect_equal(
        [hub.state("0"), hub.state("1"), hub.timers("0"), hub.timers("1")],
        [
            ({"m1": (UNHEALTHY, 10_000), "m2": (UNHEALTHY, 8_000)}, 3_608_000),
            ({"m3": (UNHEALTHY, 9_000)}, 3_609_000),
            [3_608_000],
            [3_609_000],
        ],
        "Afterwards: each partition's state (machines, recorded timer) and its pending timers. "
        "Every machine is Unhealthy: nothing can time out, so the one timer waits for the first "
        "retirement, last heartbeat + retire_after_ms (3600000 here).",
        hint="Save the machines with the timer rearm() returns, and keep last_heartbeat_ms as it "
        "was: an Unhealthy machine keeps the time of its last heartbeat.",
    )


@exercise("5.6")
def test_one_timer_moves_to_the_next_deadline(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed(
        "0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 10_001), "m6": (UNHEALTHY, 2_000)}, 15_000
    )
    rows = hub.batch(15_000)
    expect_equal(
        [rows, hub.timers("0"), hub.state("0")],
        [
            [("m1", HEALTHY, UNHEALTHY, 15_000, 15_000)],
            [15_001],
            (
                {"m1": (UNHEALTHY, 10_000), "m2": (HEALTHY, 10_001), "m6": (UNHEALTHY, 2_000)},
                15_001,
            ),
        ],
        "Partition 0: m1 (Healthy, 10000), m2 (Healthy, 10001), m6 (Unhealthy, 2000), timer at "
        "15000; a batch without rows at exactly 15000: [rows, pending timers, state].",
        hint="A deadline at now is due. The one timer then goes to the earliest deadline still "
        "to come (here a millisecond after now), and the state records it.",
    )


@exercise("5.6")
def test_changes_come_in_deadline_order(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed(
        "0", {"m1": (HEALTHY, 10_000), "m2": (INITIALIZING, 8_000), "m6": (HEALTHY, 9_000)}, 13_000
    )
    expect_equal(
        hub.batch(16_000),
        [
            ("m2", INITIALIZING, UNHEALTHY, 13_000, 16_000),
            ("m6", HEALTHY, UNHEALTHY, 14_000, 16_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 16_000),
        ],
        f"Partition 0: m1 (last heartbeat 10000), m2 (8000), m6 (9000), timer at 13000; the "
        f"first batch after it comes at 16000. {ROWS}",
    )


@exercise("5.6")
def test_a_leftover_timer_changes_nothing(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    hub.seed("0", {"m1": (HEALTHY, 10_000), "m2": (HEALTHY, 10_000)}, 15_000)
    register_timer(hub.tester, "0", START_MS + 12_000)  # not the timer the state records
    # The partition's rows of the batch at 20000: a range cut short, read up to 11000 only.
    hub.extra["0"] = [
        PartitionLogs._row("0", "m1", 11_000, 5, 9),
        PartitionLogs._row("0", "m2", 11_000, 6, 9),
    ]
    rows = hub.batch(20_000)
    expect_equal(
        [rows, hub.timers("0"), hub.state("0")],
        [[], [20_001], ({"m1": (HEALTHY, 11_000), "m2": (HEALTHY, 11_000)}, 20_001)],
        "Partition 0 (m1 and m2, last heartbeats at 10000, timer at 15000) also has a leftover "
        "timer at 12000. The batch at 20000 holds its rows up to 11000 only (a range cut "
        "short), so their deadlines, 16000, are not known to have passed; the rows handler "
        "moves the partition's timer to 20001, then the leftover fires: [rows, pending timers, "
        "state].",
        hint="Compare the timer that fired (expiredTimerInfo) with the one the state records: "
        "any other changes nothing.",
    )


@exercise("5.6")
def test_a_fleet_gone_silent_times_out_on_its_timers(nb):
    hub = PartitionLogs(_timers_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3"], 1, 10)
    _fleet(hub, ["m4"], 1, 8)
    rows = [r for r in hub.run(30_000) if r[2] == UNHEALTHY]
    expect_equal(
        sorted(rows, key=_by_time),
        [
            ("m4", HEALTHY, UNHEALTHY, 13_000, 13_000),
            ("m1", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m3", HEALTHY, UNHEALTHY, 15_000, 15_000),
        ],
        f"Every machine stopped (m4 after 8 s, the others after 10 s) and no row arrives any "
        f"more: only the partitions' timers can tell. {ROWS}",
    )


@exercise("5.6")
def test_a_machine_silent_for_retire_after_ms_is_retired(nb):
    hub = PartitionLogs(_timers_under_test(nb), retire_after_ms=30_000)
    _fleet(hub, ["m1"], 1, 10)
    _fleet(hub, ["m2"], 1, 4)
    hub.run(10_000)
    rows = hub.run(36_000)
    expect_equal(
        [rows, hub.state("0"), hub.timers("0")],
        [
            [("m1", HEALTHY, UNHEALTHY, 15_000, 15_000)],
            ({"m1": (UNHEALTHY, 10_000)}, 40_000),
            [40_000],
        ],
        f"Partition 0: m1 sends from 1000 to 10000 ms, m2 from 1000 to 4000 (Unhealthy at 9000), "
        f"then nothing; timeout 5000, retire_after_ms 30000. Batches without rows every 500 ms "
        f"from 10500 to 36000: [rows, the state at 36000 (machines, recorded timer), pending "
        f"timers]. m2 retired at 34000, without a row. {ROWS}",
        hint="A retirement is a deadline too: what expire() did must be saved even when no row "
        "comes of it, and the timer goes on to the next retirement.",
    )
    rows = hub.run(41_000)
    expect_equal(
        [rows, hub.state("0") or ({}, None), hub.timers("0")],
        [[], ({}, None), []],
        "The same partition at 41000 ms, after m1's retirement at 40000: [rows, the state "
        "(machines, recorded timer; no value at all counts as no machine), pending timers].",
    )
    hub.extra["0"] = [PartitionLogs._row("0", "m2", 45_000, None, None)]
    expect_equal(
        hub.batch(45_500),
        [("m2", None, INITIALIZING, 45_000, 45_500)],
        f"m2, retired at 34000, sends again at 45000 ms, read at 45500: it starts over as a new "
        f"machine. {ROWS}",
    )
