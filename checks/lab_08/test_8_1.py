"""Checks of exercise 8.1 · Encode a transition for the status hub.

The status events' encoding on fixed rows, in two session time zones.
"""

import json
from datetime import timedelta

from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    TRANSITION_DDL,
    TRANSITION_FIELDS,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    session_conf,
)

ROWS = [
    ("m1", INITIALIZING, None, START),
    ("m1", HEALTHY, INITIALIZING, START + timedelta(seconds=1, microseconds=123_456)),
    ('Rack "7" · Ω', UNHEALTHY, HEALTHY, START + timedelta(hours=13, seconds=7, milliseconds=40)),
]


EXPECTED_BODIES = [
    {
        "machine_name": "m1",
        "status": INITIALIZING,
        "previous_status": None,
        "last_status_change_time": "2026-11-22T10:00:00.000Z",
    },
    {
        "machine_name": "m1",
        "status": HEALTHY,
        "previous_status": INITIALIZING,
        "last_status_change_time": "2026-11-22T10:00:01.123Z",
    },
    {
        "machine_name": 'Rack "7" · Ω',
        "status": UNHEALTHY,
        "previous_status": HEALTHY,
        "last_status_change_time": "2026-11-22T23:00:07.040Z",
    },
]


def _encoded(nb, spark) -> list:
    df = expect_dataframe(
        nb.status_events(spark.createDataFrame(ROWS, TRANSITION_DDL)), "status_events"
    )
    got = [(f.name, f.dataType.simpleString()) for f in df.schema.fields]
    expect_equal(
        got,
        [("body", "string"), ("partitionKey", "string")],
        "status_events() should return the string columns body and partitionKey, in that order.",
    )
    return df.collect()


def _check_bodies(rows, when: str) -> None:
    for row, expected in zip(rows, EXPECTED_BODIES):
        try:
            body = json.loads(row.body, object_pairs_hook=list)
        except (TypeError, ValueError):
            raise CheckFailed(
                "Each body should be JSON.", expected="a JSON object", actual=repr(row.body)
            ) from None
        keys = [k for k, _ in body]
        expect_equal(
            keys,
            TRANSITION_FIELDS,
            f"A body should hold exactly these fields, in that order, null ones included "
            f"(to_json leaves nulls out unless ignoreNullFields is false); {when} one does not: "
            f"{row.body}",
        )
        expect_equal(
            dict(body),
            expected,
            f"{when[0].upper()}{when[1:]}, the transition {expected['machine_name']}: "
            f"{expected['previous_status']} -> {expected['status']} should be encoded with these "
            f"fields and values (its body: {row.body}). Times are UTC, formatted with "
            f"TIMESTAMP_FORMAT.",
        )
        expect_equal(
            row.partitionKey,
            expected["machine_name"],
            "The partition key should be the machine's name.",
            show=repr,
        )


@exercise("8.1", timeout=120)
def test_transitions_become_json_bodies_keyed_by_machine(nb, spark):
    _check_bodies(_encoded(nb, spark), "in a UTC session")


@exercise("8.1", timeout=120)
def test_the_body_does_not_depend_on_the_session_time_zone(nb, spark):
    with session_conf(spark, {"spark.sql.session.timeZone": "America/New_York"}):
        rows = _encoded(nb, spark)
    _check_bodies(rows, "in a session set to America/New_York")


@exercise("8.1", timeout=60)
def test_status_events_works_on_a_stream(nb, spark, tmp_path):
    stream = spark.readStream.schema(TRANSITION_DDL).json(str(tmp_path))
    df = nb.status_events(stream)
    if not (df.isStreaming and df.columns == ["body", "partitionKey"]):
        raise CheckFailed(
            "status_events() on a streaming DataFrame should return a streaming DataFrame with "
            "the columns body and partitionKey: use only transformations (select), no collect().",
            expected="a streaming DataFrame with the columns ['body', 'partitionKey']",
            actual=f"{'a streaming' if df.isStreaming else 'a batch'} "
            f"{type(df).__name__} with the columns {df.columns}",
        )
