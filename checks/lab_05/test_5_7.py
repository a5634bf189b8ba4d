"""Checks of exercise 5.7 · Heartbeats in event time, every range read to its end.

The learner's handleInputRows with the course's handleExpiredTimer, on ``TwsTester``; no Spark.
"""

from __future__ import annotations

import pytest
from story_05 import (
    FACTS,
    PARTITION_OF,
    ROWS,
    STORY,
    PartitionLogs,
    _by_time,
    _facts,
    _fleet,
    _story,
    _under_test,
)

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    UNHEALTHY,
    exercise,
    expect_equal,
)


def _reader_under_test(nb):
    """5.7: the learner's handleInputRows, the course's handleExpiredTimer."""
    return _under_test(nb.CatchUpReader, "handleExpiredTimer")


def _reader_story(nb, down=None) -> list[tuple]:
    return _story(_reader_under_test(nb), down)


@exercise("5.7")
def test_steady_traffic_is_initializing_then_healthy(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3", "m4", "m5"], 1, 30)
    expect_equal(
        sorted(hub.run(30_000), key=_by_time),
        sorted(
            [(m, None, INITIALIZING, 1_000, 1_000) for m in ("m1", "m2", "m3", "m4", "m5")]
            + [(m, INITIALIZING, HEALTHY, 2_000, 2_000) for m in ("m1", "m2", "m3", "m4", "m5")],
            key=_by_time,
        ),
        f"Five machines sending a heartbeat a second from 1000 to 30000, read every 500 ms. {ROWS}",
    )


@exercise("5.7")
def test_a_silent_machine_is_unhealthy_at_its_deadline_and_healthy_when_back(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1"], 1, 40)
    _fleet(hub, ["m2"], 1, 40, skip=range(11, 20))
    rows = [r for r in hub.run(40_000) if r[0] == "m2" and r[1] is not None]
    expect_equal(
        rows,
        [
            ("m2", INITIALIZING, HEALTHY, 2_000, 2_000),
            ("m2", HEALTHY, UNHEALTHY, 15_000, 15_000),
            ("m2", UNHEALTHY, HEALTHY, 20_000, 20_000),
        ],
        f"m2 sends nothing from 11000 to 19000 while m1, on the same partition, keeps sending "
        f"and every batch reads the partition to its end. {ROWS}",
        hint="The partition read to its end holds nothing newer up to read_until's answer: a "
        "deadline at or before it has passed in silence.",
    )


@exercise("5.7")
def test_a_backlog_in_one_batch_tells_the_whole_story(nb):
    restarted = _reader_story(nb, down=(10_000, 130_000))
    first = [r for r in restarted if r[4] == 130_000]
    expect_equal(
        first,
        sorted(
            [(*r, 130_000) for r in STORY if r[3] >= 10_000],
            key=lambda r: (PARTITION_OF[r[0]], *_by_time(r)),
        ),
        f"Down from 10000 to 130000 ms; the restart's first batch reads the whole backlog: m2 "
        f"stopped after 11 s, m5 started at 12 s, m6 sent once at 20 s, m4 paused from 31 to "
        f"49 s. Its rows, partition 0's and then partition 1's, each in the order the changes "
        f"happened. {ROWS}",
        hint="Inside one batch, a machine can fall silent and come back: before each "
        "heartbeat, the deadlines that passed before it are due.",
    )


@pytest.mark.parametrize("down_ms", [3_000, 120_000], ids=["3 s", "2 min"])
@exercise("5.7")
def test_downtime_is_not_silence(nb, down_ms):
    live = _reader_story(nb)
    restarted = _reader_story(nb, down=(10_000, 10_000 + down_ms))
    expect_equal(
        _facts(restarted),
        _facts(live),
        f"Down from 10000 ms for {down_ms} ms, against the same story without downtime: the "
        f"same changes, at the same times. {FACTS}",
    )


@exercise("5.7")
def test_a_heartbeat_at_the_deadline_is_in_time(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    hub.send("m1", 1_000, 2_000, 7_000, 12_000, 17_001)
    rows = hub.run(25_000, down=(2_500, 24_000))
    expect_equal(
        _facts(rows),
        [
            ("m1", None, INITIALIZING, 1_000),
            ("m1", INITIALIZING, HEALTHY, 2_000),
            ("m1", HEALTHY, UNHEALTHY, 17_000),
            ("m1", UNHEALTHY, HEALTHY, 17_001),
            ("m1", HEALTHY, UNHEALTHY, 22_001),
        ],
        f"m1 sends at 1000, 2000, 7000, 12000 and 17001 ms (timeout 5000), the last three read "
        f"in one batch at 24000 after a downtime. {FACTS}",
        hint="A heartbeat exactly at the deadline is in time; one a millisecond later is not.",
    )


@exercise("5.7")
def test_late_and_duplicate_heartbeats_change_nothing(nb):
    plain = PartitionLogs(_reader_under_test(nb))
    _fleet(plain, ["m1", "m2"], 1, 20)
    expected = plain.run(20_000)
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2"], 1, 20)
    out = hub.run(6_000)
    again = PartitionLogs._row("0", "m1", 5_000, 9, 9)  # a heartbeat delivered twice
    old = PartitionLogs._row("0", "m2", 1_500, None, None)  # one from before the machine's newest
    hub.extra["0"] = [again, old]
    out += hub.run(27_000)
    # m2 is Unhealthy since 25000; its last heartbeat, at 20000, delivered once more.
    hub.extra["0"] = [PartitionLogs._row("0", "m2", 20_000, 40, 40)]
    out += hub.run(28_000)
    expected += plain.run(28_000)
    expect_equal(
        _facts(out),
        _facts(expected),
        f"m1's heartbeat at 5000 ms delivered a second time, one of m2 stamped 1500 ms arriving "
        f"after newer ones, and m2's last heartbeat (20000 ms) delivered again after m2 turned "
        f"Unhealthy, against the same story without them. {FACTS}",
        hint="A heartbeat no newer than the machine's latest one, equal included, is old news.",
    )


@exercise("5.7")
def test_one_value_and_one_timer_per_partition(nb):
    hub = PartitionLogs(_reader_under_test(nb))
    _fleet(hub, ["m1", "m2", "m3", "m4", "m5"], 1, 30)
    _fleet(hub, ["m6"], 1, 3)
    hub.send("m6", 25_001)
    hub.run(30_000)
    expect_equal(
        [hub.timers("0"), hub.state("0"), hub.timers("1"), sorted(hub.state("1")[0])],
        [
            [30_001],
            ({"m1": (HEALTHY, 30_000), "m2": (HEALTHY, 30_000), "m6": (HEALTHY, 25_001)}, 30_001),
            [35_000],
            ["m3", "m4", "m5"],
        ],
        "After 30 s of heartbeats (m6 only until 3 s, and once more at 25001), at 30000 ms: "
        "partition 0's pending timers and state (machines, recorded timer), then partition 1's "
        "timers and machines. m6's deadline is a millisecond after the batch.",
        hint="rearm() moves the partition's one timer and returns it: save that. Never at or "
        "before now, but no later than the earliest deadline after it.",
    )


@exercise("5.7")
def test_a_machine_silent_for_retire_after_ms_comes_back_as_a_new_one(nb):
    expected = [
        ("m2", None, INITIALIZING, 1_000),
        ("m2", INITIALIZING, HEALTHY, 2_000),
        ("m2", HEALTHY, UNHEALTHY, 10_000),
        ("m2", None, INITIALIZING, 50_000),
        ("m2", INITIALIZING, HEALTHY, 51_000),
        ("m2", HEALTHY, UNHEALTHY, 56_000),
    ]
    for down in (None, (20_000, 60_000)):
        hub = PartitionLogs(_reader_under_test(nb), retire_after_ms=30_000)
        _fleet(hub, ["m1"], 1, 70)
        hub.send("m2", 1_000, 2_000, 3_000, 4_000, 5_000, 50_000, 51_000)
        rows = hub.run(35_000, down)
        if down is None:
            expect_equal(
                sorted(hub.state("0")[0]),
                ["m1"],
                "m1 sends every second; m2 from 1000 to 5000 ms, then nothing until 50000 "
                "(timeout 5000, retire_after_ms 30000). The machines partition 0's state holds "
                "after the batch at 35000 ms, m2's retirement.",
                hint="The partition read up to read_until's answer shows m2 silent past its "
                "retirement: expire() up to that time retires it.",
            )
        rows += hub.run(60_000, down)
        when = "read live" if down is None else "read in one batch at 60000 after a downtime"
        expect_equal(
            _facts(r for r in rows if r[0] == "m2"),
            expected,
            f"m2 sends from 1000 to 5000 ms, then at 50000 and 51000, while m1 sends every second "
            f"(timeout 5000, retire_after_ms 30000), {when}: m2 retires at 35000 and comes back "
            f"as a new machine. {FACTS}",
            hint="Before each heartbeat, what was due before it happens first: a retirement too.",
        )
