"""Checks of exercise 7.2 · First, middle, last and anomalies.

The sampling rules on batch DataFrames of windows the check builds.
"""

from story_07 import (
    SAMPLE_COLUMNS,
    at,
    compare,
    expected_sample,
    sample_tuples,
)

from streamlab.kit import (
    exercise,
    expect_dataframe,
    expect_that,
)

SAMPLE_FIELDS = ["event_time", "sequence_number", "sensor_freq"]


WINDOWS_DDL = (
    "window_start TIMESTAMP, window_end TIMESTAMP, device_id STRING, readings "
    "ARRAY<STRUCT<event_time: TIMESTAMP, sequence_number: BIGINT, sensor_freq: DOUBLE>>"
)


def window_rows(windows: list[tuple[str, int, list[tuple[float, int, float]]]]) -> list[tuple]:
    """(device, window start second, readings as (second, sequence, freq)) -> DataFrame rows."""
    return [
        (at(start), at(start + 60), device, [(at(s), n, f) for s, n, f in readings])
        for device, start, readings in windows
    ]


def picked(nb, spark, windows) -> list[tuple]:
    result = expect_dataframe(
        nb.pick_samples(spark.createDataFrame(window_rows(windows), WINDOWS_DDL)),
        "pick_samples",
        SAMPLE_COLUMNS,
    )
    return sample_tuples(result)


def picks_as_expected(nb, spark, windows, rule: str) -> None:
    """pick_samples on ``windows`` against the samples each should give (``compare``)."""
    compare(picked(nb, spark, windows), sorted(expected_sample(*w) for w in windows), rule)


@exercise(
    "7.2",
    hint="Each of first, middle and last is one element of the readings array, kept as the "
    "struct it is; anomalies is the array itself, filtered.",
)
def test_samples_are_readings_as_the_window_holds_them(nb, spark):
    result = expect_dataframe(
        nb.pick_samples(
            spark.createDataFrame(window_rows([("s", 0, [(1, 1, 50.0)])]), WINDOWS_DDL)
        ),
        "pick_samples",
        SAMPLE_COLUMNS,
    )
    fields = {c: result.schema[c].dataType for c in ("first", "middle", "last", "anomalies")}
    for name in ("first", "middle", "last"):
        got = getattr(fields[name], "fieldNames", lambda: None)()
        expect_that(
            got == SAMPLE_FIELDS,
            f"`{name}` should be one reading, a struct with the fields {SAMPLE_FIELDS} as in the "
            "readings array.",
            expected=f"struct<{', '.join(SAMPLE_FIELDS)}> (as in the readings array)",
            actual=fields[name].simpleString(),
        )
    element = getattr(fields["anomalies"], "elementType", None)
    expect_that(
        element is not None and getattr(element, "fieldNames", lambda: None)() == SAMPLE_FIELDS,
        f"`anomalies` should be an array of readings (structs with {SAMPLE_FIELDS}).",
        expected=f"array<struct<{', '.join(SAMPLE_FIELDS)}>>",
        actual=fields["anomalies"].simpleString(),
    )


@exercise(
    "7.2",
    hint="With one reading every position names the same element: check where each of your "
    "lookups counts from, the front, the end, 0 or 1.",
)
def test_one_reading_is_first_middle_and_last(nb, spark):
    windows = [("sensor-1", 0, [(20, 3, 50.1)]), ("sensor-2", 30, [(40, 7, -1.0)])]
    picks_as_expected(
        nb,
        spark,
        windows,
        "A window with one reading has it as first, middle and last",
    )


@exercise(
    "7.2",
    hint="The middle is the lower middle position, (n - 1) // 2 counted from 0: one function "
    "of pyspark.sql.functions counts positions from 1, another from 0.",
)
def test_the_middle_is_the_lower_middle_position(nb, spark):
    windows = [
        ("sensor-1", 0, [(50, 2, 50.2), (10, 1, 50.1)]),
        ("sensor-2", 0, [(40, 4, 50.4), (10, 1, 50.1), (30, 3, 50.3), (20, 2, 50.2)]),
        ("sensor-3", 0, [(30, 3, 50.3), (10, 1, 50.1), (20, 2, 50.2)]),
        (
            "sensor-4",
            0,
            [(50, 5, 50.5), (10, 1, 50.1), (40, 4, 50.4), (20, 2, 50.2), (30, 3, 50.3)],
        ),
    ]
    picks_as_expected(
        nb,
        spark,
        windows,
        "With n readings the middle is at position (n - 1) // 2 (from 0): for 2 readings "
        "the first, for 3 and 4 the second, for 5 the third",
    )


@exercise(
    "7.2",
    hint="Sorting an array of structs orders them by their fields, first field first: look at "
    "the order of SAMPLE_FIELDS.",
)
def test_order_is_event_time_then_sequence_number(nb, spark):
    windows = [
        # Ties on event_time, stored in the array with the later sequence number first.
        ("sensor-1", 0, [(10, 12, 50.0), (10, 11, 50.2), (40, 14, 49.9), (55, 15, 50.3)]),
        # Sequence numbers that disagree with event time: event time comes first.
        (
            "sensor-2",
            0,
            [(30, 1, 50.3), (10, 9, 50.1), (20, 5, 50.2), (50, 2, 49.0), (40, 3, 49.5)],
        ),
        # Three readings at one second: only the sequence numbers order them.
        ("sensor-3", 0, [(5, 30, 1.0), (5, 10, 3.0), (5, 20, 2.0)]),
    ]
    picks_as_expected(
        nb,
        spark,
        windows,
        "Readings are ordered by event_time, then by sequence_number (never by sensor_freq "
        "or by their place in the array)",
    )


@exercise(
    "7.2",
    hint="An anomaly is a reading whose sensor_freq is below zero, strictly; filter the sorted "
    "readings, so that the anomalies keep their order.",
)
def test_anomalies_are_strictly_negative_and_in_order(nb, spark):
    windows = [
        ("sensor-1", 0, [(50, 5, -0.5), (0, 1, -1.0), (30, 3, 0.0), (10, 2, -2.25), (40, 4, -0.0)]),
        ("sensor-2", 0, [(10, 1, 50.0), (20, 2, 0.0)]),
        ("sensor-3", 0, [(15, 2, -0.001), (15, 1, 50.0)]),
    ]
    got = picked(nb, spark, windows)
    none = [g for g in got if g[2] == "sensor-2"]
    expect_that(
        none and none[0][7] == [],
        "A window without anomalies should have an empty `anomalies` array.",
        expected="[] (an empty array)",
        actual=repr(none[0][7]) if none else "no row for sensor-2",
    )
    compare(
        got,
        sorted(expected_sample(*w) for w in windows),
        "An anomaly is sensor_freq < 0, strictly (0.0 and -0.0 are not), listed in order",
    )
