"""Checks of exercise 9.7 · Uptime sessions.

Sessions per machine with gaps from the registry, batch by batch.
"""

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

SESSION_REGISTRY = [
    ("m1", "Lyon", "ops-lyon", 10),
    ("m2", "Lyon", "ops-lyon", 30),
    ("m3", "Oslo", "ops-oslo", None),  # no gap: the default
    ("m5", "Oslo", "ops-oslo", 4),
]  # m4 is not registered: the default


def beat(machine: str, second: int) -> dict:
    return {"machine_name": machine, "event_time": at(second)}


SESSION_STORY = [
    [beat("m1", 0), beat("m1", 4), beat("m2", 0), beat("m3", 0), beat("m4", 2), beat("m5", 0)],
    # m1 and m5 exactly one gap after their last heartbeat; m4 one second more.
    [beat("m1", 14), beat("m2", 25), beat("m3", 7), beat("m4", 13), beat("m5", 4)],
    [beat("m1", 40), beat("m2", 50), beat("m5", 22)],
    [beat("m1", 100)],
]


@exercise("9.7", timeout=240)
def test_sessions_close_per_machine_gap(nb, spark, tmp_path):
    write_deliveries(tmp_path / "heartbeats", SESSION_STORY)
    heartbeats = read_deliveries(spark, tmp_path / "heartbeats", nb.HEARTBEAT_DDL)
    registry = spark.createDataFrame(SESSION_REGISTRY, REGISTRY_DDL)
    columns = ["machine_name", "session_start", "session_end", "heartbeats"]
    df = expect_dataframe(nb.uptime_sessions(heartbeats, registry), "uptime_sessions", columns)
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    expect_equal(
        got,
        {
            2: [
                ("m3", shown(0), shown(17), 2),
                ("m4", shown(2), shown(12), 1),
                ("m5", shown(0), shown(8), 2),
            ],
            3: [
                ("m1", shown(0), shown(24), 3),
                ("m4", shown(13), shown(23), 1),
                ("m5", shown(22), shown(26), 1),
            ],
            4: [("m1", shown(40), shown(50), 1), ("m2", shown(0), shown(80), 3)],
        },
        "Four deliveries and the batch without data that ends the run: the sessions each batch "
        "emitted, as {batch: [(machine, start, end, heartbeats)]}. Gaps: m1 10 s, m2 30 s, m5 4 s, "
        "m3 (none given) and m4 (not registered) DEFAULT_GAP_SECONDS; a heartbeat exactly one "
        "gap after the last stays in the session; the watermark is HEARTBEATS_DELAY behind.",
        hint="A session missing for m3 or m4 means their gap came out null (Spark drops such "
        "rows); a session a batch early or late, a watermark delay other than HEARTBEATS_DELAY.",
    )
