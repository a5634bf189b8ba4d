"""Checks of exercise 3.2 · Run the seed as a stream.

The learner's query around a reference seed function: another machine's traffic times a
silent machine out, and once every event has been processed the watermark stands still and
nothing more happens.
"""

from story_03 import (
    SCHEMA,
    SEED_FIRST,
    at,
    deliver,
    ran,
    reference_transition,
    show,
    start,
    status_rows,
)

from streamlab.deadlines import drain
from streamlab.kit import (
    HEALTHY,
    UNHEALTHY,
    exercise,
    expect_equal,
)


@exercise("3.2", timeout=150)
def test_seed_times_out_only_when_others_move_the_watermark(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "in"
    folder.mkdir()
    status = nb.seed_status(
        spark.readStream.schema(SCHEMA).json(str(folder)), reference_transition, 5_000
    )
    query = start(status, "check_3_2", checkpoint_dir, "seed_status", "EventTimeTimeout")
    deliver(folder, "a", ["m1", "m2"], [0, 1])
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expect_equal(
        status_rows(spark, "check_3_2"),
        SEED_FIRST,
        "After heartbeats of m1 and m2 at 10:00:00 and 10:00:01.",
        show=show,
        hint="Is the transition given its timeout_ms through functools.partial?",
    )
    expect_equal(
        [p["eventTime"].get("watermark") for p in ran(query)][-1:],
        ["2026-11-22T09:59:59.000Z"],
        "The watermark the last batch ran with: the newest event time minus WATERMARK_DELAY.",
        hint="The watermark goes on event_time, with WATERMARK_DELAY as its delay.",
    )
    deliver(folder, "b", ["m2"], [10])
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expected = SEED_FIRST + [("m1", UNHEALTHY, HEALTHY, at(6))]
    expect_equal(
        status_rows(spark, "check_3_2"),
        expected,
        "m2's heartbeat at 10:00:10 moves a 2-second watermark to 10:00:08, past m1's timeout "
        "(10:00:01 + 5 s): m1 turns Unhealthy.",
        show=show,
    )
    batches = len(ran(query))
    # Silence: nothing arrived, the watermark did not move: Spark runs no micro-batch, and a
    # timeout (m2's, at 10:00:15) fires only in one.
    drain(
        query, within=240, what="the check's query over your processor to process what it was given"
    )
    expect_equal(
        (len(ran(query)) - batches, status_rows(spark, "check_3_2")),
        (0, expected),
        "Without new events the seed runs no further micro-batch and emits nothing more: "
        "(batches run, rows).",
    )
