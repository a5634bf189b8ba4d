"""Checks of exercise 9.6 · Make the report forget.

The in-maintenance report's rows, and its state after the watermark has moved on.
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

FIX_STORY = [
    [change("m1", 10), change("m2", 12), change("m3", 15, HEALTHY), change("m4", 50)],
    [window("m1", 5, 20), window("m2", 30, 40), window("m4", 45, 100)],
    [change("m5", 120), window("m5", 110, 130), window("m7", 150, 200)],
    [change("m8", 180), window("m9", 200, 210)],
    [change("m10", 185)],
    # m7 comes once the watermark has passed its window's start, still inside the window.
    [change("m7", 195)],
]


@exercise("9.6", timeout=240)
def test_the_report_finds_the_changes_inside_windows_and_forgets(nb, spark, tmp_path):
    write_deliveries(tmp_path / "story", FIX_STORY)
    columns = ["machine_name", "last_status_change_time", "maintenance_start", "maintenance_end"]
    df = expect_dataframe(
        nb.in_maintenance(*streams(spark, tmp_path / "story")), "in_maintenance", columns
    )
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    expect_equal(
        got,
        {
            1: [("m1", shown(10), shown(5), shown(20)), ("m4", shown(50), shown(45), shown(100))],
            2: [("m5", shown(120), shown(110), shown(130))],
            5: [("m7", shown(195), shown(150), shown(200))],
        },
        "The report's rows, as {batch: [(machine, change, window start, window end)]}: each "
        "Unhealthy change inside a window of its machine, in the batch where both are there.",
        hint="Keep the found query's output and join condition: only what Spark needs to clean up "
        "is missing.",
    )
    changes = join_state(spark, tmp_path / "checkpoint", "left")
    windows = join_state(spark, tmp_path / "checkpoint", "right")
    expect_equal(
        {"changes": [m for m, _ in changes], "windows": windows},
        {
            "changes": ["m10", "m7", "m8"],
            "windows": [("m5", shown(110)), ("m7", shown(150)), ("m9", shown(200))],
        },
        "After the last batch (watermark 10:02:50), the join's state should hold only the changes "
        "not yet past the watermark and the windows that a change could still fall in. Read with "
        "the state reader.",
        hint="Read each side's state after a run of the found query: Spark can clean a side only "
        "from a bound on a column that carries a watermark.",
    )
