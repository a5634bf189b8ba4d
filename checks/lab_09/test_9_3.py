"""Checks of exercise 9.3 · Unhealthy outside maintenance.

A story of status changes and maintenance windows with an alert per batch expected (edges of a
window, another machine's window, a late window, a long one), then the join's state read back
with the state reader.
"""

from story_09 import (
    change,
    join_state,
    per_batch,
    run,
    shown,
    streams,
    window,
)

from streamlab.deliveries import write_deliveries
from streamlab.kit import (
    HEALTHY,
    exercise,
    expect_dataframe,
    expect_equal,
)

# Delays: changes 10 s, windows 30 s; a window lasts 60 s at most.
MAINTENANCE_STORY = [
    [
        change("m1", 10),  # another machine's window covers it: an alert
        change("m2", 12),  # in its window
        change("m3", 11, HEALTHY),  # not Unhealthy: never an alert
        change("m5", 20),  # exactly at its window's start
        change("m6", 40),  # exactly at its window's end
        change("m12", 45),  # its window comes a batch later
        change("m4", 110),
    ],
    [
        window("m2", 5, 20),
        window("m9", 0, 30),
        window("m5", 20, 50),
        window("m6", 15, 40),
        window("m11", 35, 95),  # 60 s long
        window("m9", 60, 70),
    ],
    [window("m12", 40, 50), change("m10", 52)],
    [window("m9", 100, 101)],
    [change("m13", 75)],
    # m11 comes once the watermark has passed its window's start, still inside the window,
    # and again at the window's very end, 60 s after its start.
    [change("m11", 85), change("m11", 95), window("m9", 200, 201)],
]


EXPECTED_ALERTS = {
    2: [("m1", shown(10))],
    4: [("m10", shown(52))],
    6: [("m13", shown(75))],
}


@exercise("9.3", timeout=240)
def test_each_alert_comes_out_once_when_the_watermark_passes_it(nb, spark, tmp_path):
    write_deliveries(tmp_path / "story", MAINTENANCE_STORY)
    df = expect_dataframe(
        nb.outside_maintenance(*streams(spark, tmp_path / "story")),
        "outside_maintenance",
        ["machine_name", "last_status_change_time"],
    )
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: (r["machine_name"], r["last_status_change_time"]))
    expect_equal(
        got,
        EXPECTED_ALERTS,
        "Six deliveries, one micro-batch each, and the batch without data that ends the run: "
        "the alerts each batch emitted, as {batch: [(machine, time)]}. Each Unhealthy change "
        "that no window of its machine covers comes out once, in the first batch whose "
        "watermark has passed it; a change at a window's start or end is inside it.",
        hint="Compare batch by batch: an alert too early means a watermark missing or too short "
        "on one side; a missing or extra one, a condition on the window's ends or the machine; "
        "one for m11, a window forgotten too soon.",
    )
    changes = join_state(spark, tmp_path / "checkpoint", "left")
    windows = join_state(spark, tmp_path / "checkpoint", "right")
    expect_equal(
        {"changes": [m for m, _ in changes], "windows": windows},
        {
            "changes": ["m4"],
            "windows": [
                ("m12", shown(40)),
                ("m9", shown(60)),
                ("m9", shown(100)),
                ("m9", shown(200)),
            ],
        },
        "After the last batch (watermark 10:01:40), the join's state should hold only the change "
        "that can still be alerted (m4 at 10:01:50) and the windows that a change not yet late "
        "could still fall in (started within 60 s of the watermark). Read with the state reader.",
        hint="Spark forgets a window only through a bound on the windows' watermarked column in "
        "the join condition.",
    )
