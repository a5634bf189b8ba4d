"""Checks of exercise 9.8 · Unhealthy transitions per site and minute.

Lab 05's processor and the learner's count in one query, batch by batch.
"""

import functools

from story_09 import (
    REGISTRY_DDL,
    at,
    per_batch,
    run,
    shown,
)

from streamlab.deliveries import read_deliveries, write_deliveries
from streamlab.kit import (
    exercise,
    expect_dataframe,
    expect_equal,
)


@functools.cache
def _lab05():
    from streamlab.monitor import reference_solution

    return reference_solution()


_numbers = iter(range(10_000))


def heartbeat(machine: str, second: int) -> dict:
    """A heartbeat of the hub's partition 0, as lab 05's processor reads it."""
    return {
        "partition": "0",
        "machine_name": machine,
        "event_time": at(second),
        "sequence_number": next(_numbers),
        "last_enqueued_sequence_number": None,
    }


def hub_story() -> list[list[dict]]:
    return [
        [heartbeat(m, 0) for m in ("m1", "m2", "m3", "m4")],
        [heartbeat(m, 3) for m in ("m1", "m2", "m3")],
        [heartbeat("m1", 30), heartbeat("m3", 30)],
        [heartbeat(m, 60) for m in ("m1", "m2", "m3")],
        [heartbeat("m1", 130)],
        [heartbeat("m1", 200)],
        [heartbeat("m1", 260)],
    ]


@exercise("9.8", timeout=300)
def test_unhealthy_per_site_after_the_processor(nb, spark, tmp_path):
    lab05 = _lab05()
    write_deliveries(tmp_path / "hub", hub_story())
    transitions = lab05.catch_up_changes(
        read_deliveries(spark, tmp_path / "hub", lab05.HEARTBEAT_SCHEMA),
        lab05.CatchUpProcessor(timeout_ms=5_000),
    )
    registry = spark.createDataFrame(
        [("m1", "Lyon", "ops-lyon", 10), ("m2", "Lyon", "ops-lyon", 10), ("m3", "Oslo", None, 10)],
        REGISTRY_DDL,
    )
    columns = ["window_start", "window_end", "site", "unhealthy"]
    df = expect_dataframe(
        nb.unhealthy_per_site(transitions, registry), "unhealthy_per_site", columns
    )
    print("Running lab 05's processor and the count (the first batch starts Python workers) ...")
    batches = run(df, tmp_path / "checkpoint", no_data_batches=False)
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    minute = [shown(0), shown(60)]
    next_minute = [shown(60), shown(120)]
    expect_equal(
        got,
        {
            6: [
                (*minute, "Lyon", 3),
                (*minute, "Oslo", 2),
                (*minute, nb.UNREGISTERED, 1),
                (*next_minute, "Lyon", 2),
                (*next_minute, "Oslo", 1),
            ]
        },
        "Seven deliveries of heartbeats through lab 05's CatchUpProcessor (5 s timeout), then "
        "your count: the rows each batch emitted, as {batch: [(window start, end, site, "
        "Unhealthy transitions)]}. Unhealthy at 10:00:05 (m4), 10:00:08 (m1, m2, m3), "
        "10:00:35 (m1, m3), 10:01:05 (m1, m2, m3), 10:02:15 and 10:03:25 (m1); a window comes out "
        "once the watermark, TRANSITIONS_DELAY behind the newest Unhealthy, has reached its end.",
        hint="Nothing at all means the count has no watermark it can use: declare one on the "
        "processor's output. Counts too high: only transitions to Unhealthy count.",
    )
