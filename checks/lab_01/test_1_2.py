"""Checks of exercise 1.2 · Parse the events into heartbeats.

The parsing rules on batch DataFrames with the ``eventhubs`` row schema.
"""

from datetime import timedelta

from story_01 import (
    HEARTBEAT_COLUMNS,
    HubFiles,
    body,
    heartbeat_rows,
    run_to_table,
    stream,
)

from streamlab.kit import (
    START,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_that,
)


def stamp(second) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def _parsed(nb, events):
    return expect_dataframe(nb.parse_heartbeats(events), "parse_heartbeats", HEARTBEAT_COLUMNS)


@exercise("1.2", timeout=120)
def test_parse_heartbeats_on_a_batch(nb, spark):
    hub = HubFiles()
    # The machine's clock is 30 s slow: event_time must come from the hub, not the body.
    first = hub.send("m1", body("m1", 0, skew=-30), 0)
    second = hub.send("m2", body("m2", 1), 1)
    third = hub.send("m2", b"not json", 2)
    got = heartbeat_rows(_parsed(nb, hub.batch(spark)))
    expected = [
        ("m1", stamp(-30), stamp(0), first["partition"], first["sequenceNumber"]),
        ("m2", stamp(1), stamp(1), second["partition"], second["sequenceNumber"]),
        (None, None, stamp(2), third["partition"], third["sequenceNumber"]),
    ]
    if any(r[0] == "m1" and r[2] == stamp(-30) for r in got):
        raise CheckFailed(
            "event_time should be the event's enqueuedTime (the hub's clock), not the "
            f"machine_time from the body (m1's clock is 30 s slow); for m1 it is {stamp(-30)}.",
            expected=expected,
            actual=got,
        )
    expect_equal(
        got,
        expected,
        "Expected these heartbeats (an event whose body is not JSON gives nulls, it is not "
        "dropped here).",
    )


@exercise("1.2", timeout=60)
def test_parse_heartbeats_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    hub = HubFiles()
    sent = [
        hub.send(machine, body(machine, s), s) for s in range(2) for machine in ("m1", "m2", "m3")
    ]
    hub.write(tmp_path / "hub", "0")
    parsed = _parsed(nb, stream(spark, tmp_path / "hub"))
    run_to_table(parsed, "check_1_2", checkpoint_dir, "parsed")
    got = heartbeat_rows(spark.table("check_1_2"))
    expect_that(
        len(got) == 6 and all(r[0] and r[1] for r in got),
        "Six heartbeats went in; expected six parsed rows with a machine_name and a machine_time.",
        expected="six rows, each with a machine_name and a machine_time",
        actual=got,
    )
    numbers = sorted((r[0], r[3], r[4]) for r in got)
    expected = sorted((e["partitionKey"], e["partition"], e["sequenceNumber"]) for e in sent)
    expect_equal(
        numbers,
        expected,
        "partition and sequence_number should be each event's partition and sequenceNumber, "
        "shown as (machine, partition, number).",
    )
