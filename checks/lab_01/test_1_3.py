"""Checks of exercise 1.3 · Quarantine bad events with a reason.

Bad events quarantined with a reason, on batch DataFrames and on a stream over parquet files in
the ``eventhubs`` schema.
"""

import json

from pyspark.sql import DataFrame
from story_01 import (
    HEARTBEAT_COLUMNS,
    HubFiles,
    body,
    heartbeat_rows,
    run_to_table,
    stream,
)

from streamlab.eventhubs import SCHEMA as EVENTHUBS_SCHEMA
from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    expect_that,
)

EVENT_COLUMNS = EVENTHUBS_SCHEMA.fieldNames()


def needs(nb, exercise_id: str, name: str, here: str) -> None:
    problem = nb.problem_for(exercise_id)
    if problem is not None:
        raise CheckFailed(
            f"Exercise {here} uses {name} from exercise {exercise_id}, which does not run yet.",
            expected=f"exercise {exercise_id} to run",
            actual=problem.sentence(),
        )


MAX_BODY_BYTES = 1024


def padded(payload: bytes, size: int) -> bytes:
    """A JSON body grown to exactly ``size`` bytes with a field the schema does not name."""
    document = json.loads(payload)
    document["padding"] = ""
    document["padding"] = "x" * (size - len(json.dumps(document).encode()))
    return json.dumps(document).encode()


BAD = [  # (body, expected reason)
    (b"", "empty body"),
    (None, "empty body"),
    (b'{"machine_name": "m1", "pad": "' + b"x" * 1100 + b'"}', "oversized body"),
    (
        padded(b'{"machine_name": "m1", "machine_time": "2026-11-22T10:00:05+00:00"}', 1025),
        "oversized body",
    ),
    (b"y" * 1500, "oversized body"),
    (b"machine_name=m1", "not JSON"),
    (b'{"machine_name": "m1", "machine_time": ', "not JSON"),
    (b'{"machine_time": "2026-11-22T10:00:05+00:00"}', "missing machine_name"),
    (
        b'{"machine_name": "  ", "machine_time": "2026-11-22T10:00:05+00:00"}',
        "missing machine_name",
    ),
    (b"[1, 2]", "missing machine_name"),
    (b'{"machine_name": "m1", "machine_time": "yesterday"}', "bad timestamp"),
    (b'{"machine_name": "m1"}', "bad timestamp"),
]


def _split(nb, events):
    needs(nb, "1.2", "parse_heartbeats", "1.3")
    result = nb.split_heartbeats(events)
    expect_that(
        isinstance(result, tuple) and len(result) == 2,
        "split_heartbeats() should return a pair (heartbeats, quarantine).",
        expected="a tuple of 2",
        actual=f"{type(result).__name__}"
        f"{f' of {len(result)}' if isinstance(result, (tuple, list)) else ''}",
    )
    heartbeats, quarantine = result
    for name, df in (("heartbeats", heartbeats), ("quarantine", quarantine)):
        expect_that(
            isinstance(df, DataFrame),
            f"The {name} half of split_heartbeats() should be a DataFrame.",
            expected="a DataFrame",
            actual=type(df).__name__,
        )
    expect_equal(
        heartbeats.columns,
        HEARTBEAT_COLUMNS,
        "The heartbeats should have these columns (parse_heartbeats' output).",
    )
    expect_equal(
        quarantine.columns,
        EVENT_COLUMNS + ["reason"],
        "The quarantine should keep every event column and add reason.",
    )
    return heartbeats, quarantine


@exercise("1.3", timeout=90)
def test_each_bad_event_gets_its_reason(nb, spark):
    hub = HubFiles()
    for i, (payload, _) in enumerate(BAD):
        hub.send("bad", payload, i, partition=0)  # sequence number i identifies the event
    hub.send("m1", body("m1", 20), 20)
    hub.send("m2", padded(body("m2", 21), MAX_BODY_BYTES), 21)  # exactly at the limit: good
    heartbeats, quarantine = _split(nb, hub.batch(spark))
    got = {
        r["sequenceNumber"]: r["reason"]
        for r in quarantine.select("sequenceNumber", "reason").collect()
    }
    wrong = []  # (body as shown, reason expected, reason given)
    for i, (payload, reason) in enumerate(BAD):
        if got.get(i) != reason:
            shown = (
                "null"
                if payload is None
                else repr(payload[:45].decode() + ("..." if len(payload) > 45 else ""))
            )
            wrong.append((shown, reason, got.get(i)))
    expect_that(
        not wrong,
        f"{len(wrong)} of the {len(BAD)} bad events were not quarantined with their reason "
        "(shown as body: reason; None: not in the quarantine).",
        expected="\n".join(f"body {shown}: {reason!r}" for shown, reason, _ in wrong),
        actual="\n".join(f"body {shown}: {given!r}" for shown, _, given in wrong),
    )
    expect_equal(
        [r[0] for r in heartbeat_rows(heartbeats)],
        ["m1", "m2"],
        "The two good heartbeats should come out in heartbeats, and nothing else; m2's body is "
        f"exactly {MAX_BODY_BYTES} bytes long, which is not over the limit.",
        hint="A body is oversized only when it is longer than MAX_BODY_BYTES.",
    )


@exercise("1.3", timeout=90)
def test_quarantine_keeps_the_event_as_it_came(nb, spark):
    hub = HubFiles()
    hub.send("m7", b"oops", 3)
    _, quarantine = _split(nb, hub.batch(spark))
    rows = quarantine.collect()
    expect_equal(len(rows), 1, "One bad event went in; the quarantine should hold one row.")
    row = rows[0]
    expect_that(
        bytes(row["body"]) == b"oops"
        and row["partitionKey"] == "m7"
        and row["properties"] == {"source": "check"},
        "The quarantined row should be the event unchanged (body, partitionKey, properties, ...).",
        expected="body b'oops', partitionKey 'm7', properties {'source': 'check'}, ...",
        actual=row.asDict(),
    )


@exercise("1.3", timeout=90)
def test_a_stream_with_bad_events_keeps_running(nb, spark, tmp_path):
    hub = HubFiles()
    for s in range(3):
        hub.send("m1", body("m1", s), s)
        hub.send("m2", BAD[s * 3][0], s)
    hub.write(tmp_path / "hub", "0")
    heartbeats, quarantine = _split(nb, stream(spark, tmp_path / "hub"))
    run_to_table(heartbeats, "check_1_3_good", str(tmp_path / "ck-good"), "heartbeats")
    run_to_table(quarantine, "check_1_3_bad", str(tmp_path / "ck-bad"), "quarantine")
    good = spark.table("check_1_3_good").count()
    reasons = sorted(r["reason"] for r in spark.table("check_1_3_bad").collect())
    expected = sorted(reason for _, reason in (BAD[0], BAD[3], BAD[6]))
    expect_equal(
        (good, reasons),
        (3, expected),
        "Three good and three bad events went into the stream: expected 3 heartbeats and the "
        "reasons of the 3 bad events, shown as (heartbeats, reasons).",
    )
