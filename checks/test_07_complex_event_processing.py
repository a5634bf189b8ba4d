"""Checks for lab 07 · Complex event processing.

Pure-Python checks first (the scheduler's allocation file), then Spark: batch DataFrames for
the parsing and sampling rules, then streams over JSON files the check writes, run with
``trigger(availableNow=True)``, twice on one checkpoint where the watermark matters. Times
are compared as seconds after ``START`` computed by Spark, never as Python datetimes (which
``collect()`` turns into the machine's local time).
"""

import json
import os
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamlab.eventhubs import SCHEMA as EVENTHUBS_SCHEMA
from streamlab.grading import exercise

START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
EPOCH = int(START.timestamp())
EVENT_COLUMNS = EVENTHUBS_SCHEMA.fieldNames()
READING_COLUMNS = ["device_id", "sensor_freq", "event_time", "sequence_number"]
READING_DDL = "device_id STRING, sensor_freq DOUBLE, event_time TIMESTAMP, sequence_number BIGINT"
SAMPLE_FIELDS = ["event_time", "sequence_number", "sensor_freq"]
SAMPLE_COLUMNS = [
    "window_start",
    "window_end",
    "device_id",
    "events",
    "first",
    "middle",
    "last",
    "anomalies",
]
WINDOWS_DDL = (
    "window_start TIMESTAMP, window_end TIMESTAMP, device_id STRING, readings "
    "ARRAY<STRUCT<event_time: TIMESTAMP, sequence_number: BIGINT, sensor_freq: DOUBLE>>"
)
POOL_PROPERTY = "spark.scheduler.pool"


def at(second: float) -> datetime:
    return START + timedelta(seconds=second)


def clock(second: float) -> str:
    return at(second).strftime("%H:%M:%S")


def returned_dataframe(result, name: str) -> DataFrame:
    assert isinstance(result, DataFrame), (
        f"{name}() should return a DataFrame; it returned {type(result).__name__}. Build the "
        "query and return it, without collecting or starting it."
    )
    return result


def has_columns(df: DataFrame, name: str, columns: list[str]) -> None:
    assert df.columns == columns, (
        f"{name}() should return the columns {columns}, in that order; it returned {df.columns}."
    )


def deliver(folder: Path, name: str, lines: list[dict], order: int = 0) -> None:
    """One JSON file, written atomically; ``order`` fixes the order the file source sees."""
    folder.mkdir(parents=True, exist_ok=True)
    hidden = folder / f".{name}.tmp"
    hidden.write_text("".join(json.dumps(line) + "\n" for line in lines))
    stamp = 1_700_000_000 + order
    os.utime(hidden, (stamp, stamp))
    os.replace(hidden, folder / f"{name}.json")


def reading_line(device: str, second: float, freq: float, sequence: int) -> dict:
    return {
        "device_id": device,
        "sensor_freq": freq,
        "event_time": at(second).isoformat(),
        "sequence_number": sequence,
    }


# --- 7.1 · the scheduler's pools (pure Python) ----------------------------------------------


def _parse(text: str) -> ET.Element:
    try:
        return ET.fromstring(text.strip())
    except ET.ParseError as error:
        raise AssertionError(
            f"fair_scheduler_xml() returned text that is not XML ({error}): {text[:200]!r}"
        ) from None


@exercise("7.1")
def test_one_pool_element_per_pool(nb):
    root = _parse(
        nb.fair_scheduler_xml(
            {"alerts": nb.Pool(weight=2, min_share=1), "windows": nb.Pool(3, 0, "FAIR")}
        )
    )
    assert root.tag == "allocations", (
        f"The root element should be <allocations>; it is <{root.tag}>."
    )
    pools = root.findall("pool")
    names = [p.get("name") for p in pools]
    assert names == ["alerts", "windows"], (
        f"Expected one <pool name=...> per pool, in the dict's order: ['alerts', 'windows']; "
        f"got {names}."
    )
    got = {p.get("name"): {child.tag: (child.text or "").strip() for child in p} for p in pools}
    expected = {
        "alerts": {"schedulingMode": "FIFO", "weight": "2", "minShare": "1"},
        "windows": {"schedulingMode": "FAIR", "weight": "3", "minShare": "0"},
    }
    assert got == expected, (
        f"Each pool holds exactly <schedulingMode>, <weight> and <minShare>; expected "
        f"{expected}, got {got}."
    )


@exercise("7.1")
def test_pool_names_come_out_exactly(nb):
    name = 'R&D <"night"> shift'
    root = _parse(nb.fair_scheduler_xml({name: nb.Pool()}))
    got = [p.get("name") for p in root.findall("pool")]
    assert got == [name], (
        f"A pool named {name!r} should come back with that exact name when the file is read; "
        f"got {got}. Let xml.etree.ElementTree write the attribute: it escapes &, < and quotes."
    )


@exercise("7.1")
def test_no_pools_is_an_empty_file(nb):
    root = _parse(nb.fair_scheduler_xml({}))
    assert root.tag == "allocations" and len(root) == 0, (
        "With no pools, the file is an empty <allocations/> element."
    )


@exercise("7.1")
def test_bad_pools_raise_value_error(nb):
    cases = [
        ("an empty name", {"": nb.Pool()}),
        ("a blank name", {"  ": nb.Pool()}),
        ("weight 0", {"a": nb.Pool(weight=0)}),
        ("a negative min share", {"a": nb.Pool(min_share=-1)}),
        ("scheduling mode 'ROUND_ROBIN'", {"a": nb.Pool(scheduling_mode="ROUND_ROBIN")}),
        ("scheduling mode 'fair' (lower case)", {"a": nb.Pool(scheduling_mode="fair")}),
        ("a good pool followed by weight 0", {"a": nb.Pool(), "b": nb.Pool(weight=0)}),
    ]
    for what, pools in cases:
        try:
            text = nb.fair_scheduler_xml(pools)
        except ValueError:
            continue
        raise AssertionError(
            f"fair_scheduler_xml() should raise ValueError for a pool with {what}; it returned "
            f"{text[:120]!r}."
        )


# --- 7.2 · parse the readings, quarantine the rest ------------------------------------------


def hub_events(spark, bodies: list) -> DataFrame:
    """Events as the hub stores them: one partition, sequence numbers 100, 101, ..."""
    rows = [
        (body, "1", str(n * 128), 100 + n, at(n), None, "sensor-1", {"source": "check"})
        for n, body in enumerate(bodies)
    ]
    return spark.createDataFrame(rows, EVENTHUBS_SCHEMA)


def body(**fields) -> bytes:
    return json.dumps(fields).encode()


def split(nb, events: DataFrame) -> tuple[DataFrame, DataFrame]:
    result = nb.split_readings(events)
    assert isinstance(result, tuple) and len(result) == 2, (
        f"split_readings() should return a pair (readings, quarantine); it returned "
        f"{type(result).__name__}."
    )
    readings, quarantine = result
    has_columns(
        returned_dataframe(readings, "split_readings"),
        "split_readings (the readings)",
        READING_COLUMNS,
    )
    has_columns(
        returned_dataframe(quarantine, "split_readings"),
        "split_readings (the quarantine)",
        EVENT_COLUMNS + ["reason"],
    )
    return readings, quarantine


def reading_tuples(readings: DataFrame) -> list[tuple]:
    """(device, seconds after START, freq, sequence number), sorted by sequence number."""
    rows = (
        readings.select(
            "device_id",
            (F.col("event_time").cast("double") - EPOCH).alias("s"),
            "sensor_freq",
            "sequence_number",
        )
        .orderBy("sequence_number")
        .collect()
    )
    return [(r.device_id, r.s, r.sensor_freq, r.sequence_number) for r in rows]


@exercise("7.2")
def test_good_events_become_readings(nb, spark):
    events = hub_events(
        spark,
        [
            body(device_id="sensor-1", sensor_freq=50.02, event_time="2026-11-22T10:00:01.250Z"),
            body(device_id="sensor-2", sensor_freq=-1.5, event_time="2026-11-22T12:00:05+02:00"),
            body(device_id="sensor-3", sensor_freq=50, event_time="2026-11-22T10:00:07Z", extra=1),
            body(device_id="sensor-1", sensor_freq=0.0, event_time="2026-11-22T10:00:09Z"),
        ],
    )
    readings, quarantine = split(nb, events)
    expected = [
        ("sensor-1", 1.25, 50.02, 100),
        ("sensor-2", 5.0, -1.5, 101),
        ("sensor-3", 7.0, 50.0, 102),
        ("sensor-1", 9.0, 0.0, 103),
    ]
    got = reading_tuples(readings)
    assert got == expected, (
        f"Four good events (one with an anomaly, -1.5, one reading 0.0, one with an extra field) "
        f"should give the readings {expected} as (device_id, seconds after 10:00:00, "
        f"sensor_freq, sequence_number); got {got}. The event time is the body's event_time, "
        "and sequence_number the event's sequenceNumber."
    )
    bad = [r.reason for r in quarantine.collect()]
    assert bad == [], f"No good event belongs in quarantine; these were put there: {bad}."


BAD_EVENTS = [
    (None, "not JSON", "a null body"),
    (b"", "not JSON", "an empty body"),
    (b"sensor-2 reboots", "not JSON", "plain text"),
    (b'{"device_id": "sensor-1", oops', "not JSON", "broken JSON"),
    (
        b'{"device_id": "s", "sensor_freq": NaN, "event_time": "2026-11-22T10:00:00Z"}',
        "not JSON",
        "NaN, which JSON does not have",
    ),
    (
        body(sensor_freq=50.0, event_time="2026-11-22T10:00:00Z"),
        "missing device_id",
        "no device_id",
    ),
    (
        body(device_id="   ", sensor_freq=50.0, event_time="2026-11-22T10:00:00Z"),
        "missing device_id",
        "a blank device_id",
    ),
    (
        body(device_id=None, sensor_freq="x", event_time="soon"),
        "missing device_id",
        "a null device_id (and everything else wrong: the first reason wins)",
    ),
    (
        body(device_id="s", sensor_freq="50.1", event_time="2026-11-22T10:00:00Z"),
        "bad sensor_freq",
        "sensor_freq as a string",
    ),
    (body(device_id="s", event_time="2026-11-22T10:00:00Z"), "bad sensor_freq", "no sensor_freq"),
    (
        body(device_id="s", sensor_freq=True, event_time="2026-11-22T10:00:00Z"),
        "bad sensor_freq",
        "sensor_freq true",
    ),
    (
        body(device_id="s", sensor_freq="x", event_time="soon"),
        "bad sensor_freq",
        "a bad sensor_freq and a bad event_time (the first reason wins)",
    ),
    (
        body(device_id="s", sensor_freq=50.0, event_time="soon"),
        "bad event_time",
        "event_time 'soon'",
    ),
    (body(device_id="s", sensor_freq=50.0), "bad event_time", "no event_time"),
]


@exercise("7.2")
def test_each_bad_event_gets_its_reason(nb, spark):
    events = hub_events(spark, [payload for payload, _, _ in BAD_EVENTS])
    readings, quarantine = split(nb, events)
    let_through = reading_tuples(readings)
    got = {r.sequenceNumber: r.reason for r in quarantine.collect()}
    for n, (_payload, reason, what) in enumerate(BAD_EVENTS):
        seq = 100 + n
        assert seq in got, (
            f"An event with {what} should be quarantined as {reason!r}; it was not in the "
            f"quarantine"
            + (" (it came out as a reading)" if any(r[3] == seq for r in let_through) else "")
            + "."
        )
        assert got[seq] == reason, (
            f"An event with {what} should be quarantined as {reason!r}; its reason is "
            f"{got[seq]!r}. The reasons are checked in the order of the table."
        )
    assert let_through == [], f"Bad events came out as readings: {let_through}."


@exercise("7.2")
def test_quarantine_keeps_the_event_as_it_came(nb, spark):
    payloads = [
        b"not json",
        body(device_id="sensor-1", sensor_freq=1.0, event_time="2026-11-22T10:00:00Z"),
    ]
    readings, quarantine = split(nb, hub_events(spark, payloads))
    rows = quarantine.collect()
    assert len(rows) == 1, f"One of two events is bad; the quarantine holds {len(rows)}."
    row = rows[0]
    kept = (
        bytes(row.body),
        row.partition,
        row.sequenceNumber,
        row.partitionKey,
        dict(row.properties),
    )
    expected = (b"not json", "1", 100, "sensor-1", {"source": "check"})
    assert kept == expected, (
        f"A quarantined event keeps every column as it came (body, partition, sequenceNumber, "
        f"partitionKey, properties, ...): expected {expected}, got {kept}."
    )
    assert readings.count() == 1, "The good event should still come out as a reading."


@exercise("7.2", timeout=90)
def test_split_readings_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "events"
    hub_events(
        spark,
        [b"oops", body(device_id="sensor-9", sensor_freq=-2.0, event_time="2026-11-22T10:00:03Z")],
    ).write.parquet(str(folder))
    readings, quarantine = split(nb, spark.readStream.schema(EVENTHUBS_SCHEMA).parquet(str(folder)))
    for df, table in ((readings, "check_7_2_readings"), (quarantine, "check_7_2_quarantine")):
        (
            df.writeStream.format("memory")
            .queryName(table)
            .option("checkpointLocation", f"{checkpoint_dir}-{table}")
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )
    got = (
        reading_tuples(spark.table("check_7_2_readings")),
        [r.reason for r in spark.table("check_7_2_quarantine").collect()],
    )
    expected = ([("sensor-9", 3.0, -2.0, 101)], ["not JSON"])
    assert got == expected, (
        f"On a stream, split_readings() should give the readings and the quarantine "
        f"{expected}; got {got}."
    )


# --- 7.3 · first, middle, last and anomalies -------------------------------------------------


def window_rows(windows: list[tuple[str, int, list[tuple[float, int, float]]]]) -> list[tuple]:
    """(device, window start second, readings as (second, sequence, freq)) -> DataFrame rows."""
    return [
        (at(start), at(start + 60), device, [(at(s), n, f) for s, n, f in readings])
        for device, start, readings in windows
    ]


def expected_sample(device: str, start: int, readings) -> tuple:
    ordered = sorted(readings, key=lambda r: (r[0], r[1]))
    n = len(ordered)
    return (
        start,
        start + 60,
        device,
        n,
        ordered[0],
        ordered[(n - 1) // 2],
        ordered[-1],
        [r for r in ordered if r[2] < 0],
    )


def sample_tuples(samples: DataFrame) -> list[tuple]:
    """Rows of SAMPLE_COLUMNS as tuples of plain values, times in seconds after START."""

    def reading(column):
        return F.struct(
            (column.event_time.cast("double") - EPOCH).alias("s"),
            column.sequence_number.alias("n"),
            column.sensor_freq.alias("f"),
        )

    rows = samples.select(
        (F.col("window_start").cast("long") - EPOCH).alias("ws"),
        (F.col("window_end").cast("long") - EPOCH).alias("we"),
        "device_id",
        "events",
        *[reading(F.col(c)).alias(c) for c in ("first", "middle", "last")],
        F.transform("anomalies", reading).alias("anomalies"),
    ).collect()

    def plain(r):
        return None if r is None else (int(r.s) if r.s == int(r.s) else r.s, r.n, r.f)

    return sorted(
        (
            r.ws,
            r.we,
            r.device_id,
            r.events,
            plain(r.first),
            plain(r.middle),
            plain(r.last),
            None if r.anomalies is None else [plain(a) for a in r.anomalies],
        )
        for r in rows
    )


def one(reading) -> str:
    return "none" if reading is None else f"{clock(reading[0])} #{reading[1]} ({reading[2]:g})"


def label(sample: tuple) -> str:
    return f"{sample[2]} [{clock(sample[0])}, {clock(sample[1])})"


def describe(sample: tuple) -> str:
    anomalies = ", ".join(one(a) for a in sample[7]) if sample[7] else "none"
    return (
        f"{label(sample)}: {sample[3]} readings, first {one(sample[4])}, middle "
        f"{one(sample[5])}, last {one(sample[6])}, anomalies {anomalies}"
    )


SAMPLE_PARTS = ("events", "first", "middle", "last", "anomalies")


def compare(got: list[tuple], expected: list[tuple], rule: str, samples_from: str = "") -> None:
    """Fail with the first difference, said briefly: which window, which part, and ``rule``."""
    if got == expected:
        return
    by_key = {g[:3]: g for g in got}
    for want in expected:
        have = by_key.get(want[:3])
        if have is None:
            raise AssertionError(f"{rule}. The window {label(want)} is missing.")
        if have == want:
            continue
        wrong = []
        for index, part in enumerate(SAMPLE_PARTS, start=3):
            if have[index] != want[index]:
                if part == "anomalies":
                    shown = [
                        ", ".join(one(a) for a in v) if v else "none"
                        for v in (want[index], have[index])
                    ]
                else:
                    shown = [
                        str(v) if part == "events" else one(v) for v in (want[index], have[index])
                    ]
                wrong.append(f"{part} should be {shown[0]}, not {shown[1]}")
        sorting = (
            " Are the readings sorted by event_time, then sequence_number?"
            if have[4] != want[4] or have[6] != want[6]
            else ""
        )
        raise AssertionError(
            f"{rule}. In {label(want)}, " + "; ".join(wrong) + "." + sorting + samples_from
        )
    extra = [g for g in got if g[:3] not in {e[:3] for e in expected}]
    raise AssertionError(
        f"{rule}. Unexpected window(s): " + "; ".join(describe(g) for g in extra[:2]) + "."
    )


def picked(nb, spark, windows) -> list[tuple]:
    result = returned_dataframe(
        nb.pick_samples(spark.createDataFrame(window_rows(windows), WINDOWS_DDL)), "pick_samples"
    )
    has_columns(result, "pick_samples", SAMPLE_COLUMNS)
    return sample_tuples(result)


@exercise("7.3")
def test_samples_are_readings_as_the_window_holds_them(nb, spark):
    result = returned_dataframe(
        nb.pick_samples(
            spark.createDataFrame(window_rows([("s", 0, [(1, 1, 50.0)])]), WINDOWS_DDL)
        ),
        "pick_samples",
    )
    has_columns(result, "pick_samples", SAMPLE_COLUMNS)
    fields = {c: result.schema[c].dataType for c in ("first", "middle", "last", "anomalies")}
    for name in ("first", "middle", "last"):
        got = getattr(fields[name], "fieldNames", lambda: None)()
        assert got == SAMPLE_FIELDS, (
            f"`{name}` should be one reading, a struct with the fields {SAMPLE_FIELDS} as in the "
            f"readings array; its type is {fields[name].simpleString()}."
        )
    element = getattr(fields["anomalies"], "elementType", None)
    assert element is not None and element.fieldNames() == SAMPLE_FIELDS, (
        f"`anomalies` should be an array of readings (structs with {SAMPLE_FIELDS}); its type "
        f"is {fields['anomalies'].simpleString()}."
    )


@exercise("7.3")
def test_one_reading_is_first_middle_and_last(nb, spark):
    windows = [("sensor-1", 0, [(20, 3, 50.1)]), ("sensor-2", 30, [(40, 7, -1.0)])]
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
        "A window with one reading has it as first, middle and last",
    )


@exercise("7.3")
def test_the_middle_of_an_even_count_is_the_earlier(nb, spark):
    windows = [
        ("sensor-1", 0, [(50, 2, 50.2), (10, 1, 50.1)]),
        ("sensor-2", 0, [(40, 4, 50.4), (10, 1, 50.1), (30, 3, 50.3), (20, 2, 50.2)]),
    ]
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
        "With n readings the middle is at position (n - 1) // 2 (from 0): for 2 readings "
        "the first, for 4 the second",
    )


@exercise("7.3")
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
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
        "Readings are ordered by event_time, then by sequence_number (never by sensor_freq "
        "or by their place in the array)",
    )


@exercise("7.3")
def test_anomalies_are_strictly_negative_and_in_order(nb, spark):
    windows = [
        ("sensor-1", 0, [(50, 5, -0.5), (0, 1, -1.0), (30, 3, 0.0), (10, 2, -2.25), (40, 4, -0.0)]),
        ("sensor-2", 0, [(10, 1, 50.0), (20, 2, 0.0)]),
        ("sensor-3", 0, [(15, 2, -0.001), (15, 1, 50.0)]),
    ]
    got = picked(nb, spark, windows)
    none = [g for g in got if g[2] == "sensor-2"]
    assert none and none[0][7] == [], (
        f"A window without anomalies should have an empty `anomalies` array, not "
        f"{none[0][7] if none else 'no row'!r}."
    )
    compare(
        got,
        sorted(expected_sample(*w) for w in windows),
        "An anomaly is sensor_freq < 0, strictly (0.0 and -0.0 are not), listed in order",
    )


# --- 7.4 · the sliding-window query ------------------------------------------------------------


@exercise("7.4", timeout=60)
def test_sliding_windows_on_a_batch(nb, spark):
    readings = spark.createDataFrame(
        [("d1", 50.0, at(s), n) for n, s in enumerate((1, 12, 13, 25))] + [("d2", -1.0, at(9), 0)],
        READING_DDL,
    )
    result = returned_dataframe(
        nb.window_samples(readings, "20 seconds", "10 seconds", "5 seconds"), "window_samples"
    )
    has_columns(result, "window_samples", SAMPLE_COLUMNS)
    got = [(g[0], g[2], g[3]) for g in sample_tuples(result)]
    expected = sorted(
        [(-10, "d1", 1), (0, "d1", 3), (10, "d1", 3), (20, "d1", 1), (-10, "d2", 1), (0, "d2", 1)]
    )
    assert got == expected, (
        f"Windows of 20 s sliding every 10 s over d1's readings at 1, 12, 13 and 25 s and d2's at "
        f"9 s should give (window start in seconds after 10:00:00, device, readings) "
        f"{expected}; got {got}. Are size and slide both passed to F.window?"
    )


FROM_PICK_SAMPLES = (
    " (window_samples() collects structs with the fields SAMPLE_FIELDS, in that "
    "order, and ends with your pick_samples(): if exercise 7.3 fails, fix it "
    "first.)"
)


def run_windows(nb, spark, folder: Path, output: Path, checkpoint_dir: str) -> list[tuple]:
    stream = spark.readStream.schema(READING_DDL).json(str(folder))
    samples = returned_dataframe(nb.window_samples(stream), "window_samples")
    has_columns(samples, "window_samples", SAMPLE_COLUMNS)
    try:
        query = (
            samples.writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", checkpoint_dir)
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
    except AnalysisException as error:
        raise AssertionError(
            "Spark refused to run window_samples() in append mode: set a watermark with "
            '.withWatermark("event_time", lateness) before grouping by a window on that same '
            f"column. (Spark said: {str(error).splitlines()[0][:200]})"
        ) from None
    query.awaitTermination()
    if not any(output.glob("*.parquet")):
        return []
    return sample_tuples(spark.read.parquet(str(output)))


def expected_windows(readings: list[tuple], windows: list[tuple[str, int]]) -> list[tuple]:
    """The samples of ``windows`` (device, start) over ``readings`` (device, s, freq, seq)."""
    return sorted(
        expected_sample(
            device,
            start,
            [(s, n, f) for d, s, f, n in readings if d == device and start <= s < start + 60],
        )
        for device, start in windows
    )


# Run 1: d1 and a single reading of d2, then d1 at 90 s: the watermark becomes 60 s.
RUN_1 = [
    ("d1", 5, 50.0, 1),
    ("d1", 20, -1.0, 2),
    ("d1", 40, 51.0, 3),
    ("d2", 10, 49.0, 1),
    ("d1", 90, 50.5, 4),
]
# Run 2, all late for some window: 35 s (too late for [0, 60), in time for [30, 90)), 25 s
# (too late for both its windows), 60 s exactly (a window boundary), two at 70 s (a tie), and
# d2 at 200 s, which moves the watermark for every device to 170 s.
RUN_2 = [
    ("d1", 35, -2.0, 5),
    ("d1", 25, -3.0, 6),
    ("d1", 60, 0.0, 7),
    ("d1", 70, -0.5, 9),
    ("d1", 70, 1.0, 8),
    ("d2", 200, 49.0, 2),
]


@exercise("7.4", timeout=240)
def test_windows_are_written_once_when_the_watermark_closes_them(
    nb, spark, tmp_path, checkpoint_dir
):
    folder, output = tmp_path / "readings", tmp_path / "samples"
    deliver(folder, "run-1", [reading_line(d, s, f, n) for d, s, f, n in RUN_1], order=0)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    closed = expected_windows(RUN_1, [("d1", -30), ("d1", 0), ("d2", -30), ("d2", 0)])
    assert got, (
        "After readings up to 10:01:30 the watermark is 10:01:00 (30 s of lateness), which closes "
        "the windows ending at 10:00:30 and 10:01:00, but the query wrote no window. Is the "
        "watermark 30 seconds (the lateness argument) on event_time?"
    )
    compare(
        got,
        closed,
        "After the first run (readings up to 10:01:30, watermark 10:01:00), only "
        "the closed windows are written",
        FROM_PICK_SAMPLES,
    )

    deliver(folder, "run-2", [reading_line(d, s, f, n) for d, s, f, n in RUN_2], order=1)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    assert not any(r[0] == 25 for g in got for r in (g[4], g[5], g[6])), (
        "The reading from 10:00:25 arrived when the watermark was 10:01:00: both its windows "
        "were closed, so it must be in none. Append mode and a watermark drop it for you."
    )
    kept = [r for r in RUN_1 + RUN_2 if r[1] != 25]
    expected = closed + expected_windows(kept, [("d1", 30), ("d1", 60), ("d1", 90)])
    compare(
        got,
        sorted(expected),
        "After the second run (late readings, then d2 at 10:03:20: "
        "watermark 10:02:50), each closed window is written once, with the late readings "
        "its window was still open for",
        FROM_PICK_SAMPLES,
    )


# --- 7.5 · the alerts ----------------------------------------------------------------------------


def alerts_of(nb, readings: DataFrame) -> DataFrame:
    alerts = returned_dataframe(nb.alert_events(readings), "alert_events")
    has_columns(alerts, "alert_events", ["body", "partitionKey"])
    types = {f.name: f.dataType.simpleString() for f in alerts.schema.fields}
    assert types == {"body": "string", "partitionKey": "string"}, (
        f"Both columns should be strings (the eventhubs sink sends `body`); they are {types}."
    )
    return alerts


def decoded(alerts: DataFrame) -> list[tuple]:
    out = []
    for row in alerts.collect():
        try:
            fields = json.loads(row.body)
        except (TypeError, ValueError):
            raise AssertionError(f"An alert's body should be JSON; got {row.body!r}.") from None
        assert isinstance(fields, dict) and set(fields) == {
            "device_id",
            "sensor_freq",
            "event_time",
        }, (
            f"An alert's body should be a JSON object with exactly device_id, sensor_freq and "
            f"event_time; got {row.body!r}."
        )
        when = datetime.fromisoformat(fields["event_time"].replace("Z", "+00:00"))
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        out.append(
            (
                fields["device_id"],
                fields["sensor_freq"],
                (when - START).total_seconds(),
                row.partitionKey,
            )
        )
    return sorted(out)


@exercise("7.5")
def test_alerts_are_the_anomalies_as_json(nb, spark):
    readings = spark.createDataFrame(
        [
            ("sensor-1", 50.0, at(1), 1),
            ("sensor-1", -1.5, at(2.5), 2),
            ("sensor-2", 0.0, at(3), 1),
            ("sensor-2", -0.0, at(4), 2),
            ("sensor-3", -0.001, at(5), 1),
        ],
        READING_DDL,
    )
    got = decoded(alerts_of(nb, readings))
    expected = [("sensor-1", -1.5, 2.5, "sensor-1"), ("sensor-3", -0.001, 5.0, "sensor-3")]
    assert got == expected, (
        f"Alerts should be the readings with sensor_freq < 0 (not 0.0, not -0.0), as "
        f"(device_id, sensor_freq, seconds after 10:00:00, partitionKey) {expected}; got {got}."
    )


@exercise("7.5", timeout=90)
def test_alerts_come_at_once_without_state(nb, spark, tmp_path, checkpoint_dir):
    folder = tmp_path / "readings"
    deliver(
        folder,
        "a",
        [
            reading_line("d1", 20, -1.0, 1),
            reading_line("d1", 40, 50.0, 2),
            reading_line("d2", 45, 50.0, 1),
        ],
        order=0,
    )
    deliver(folder, "b", [reading_line("d2", -3600, -2.0, 2)], order=1)  # an hour late
    alerts = alerts_of(nb, spark.readStream.schema(READING_DDL).json(str(folder)))
    (
        alerts.writeStream.format("memory")
        .queryName("check_7_5")
        .outputMode("append")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
        .awaitTermination()
    )
    got = decoded(spark.table("check_7_5"))
    expected = [("d1", -1.0, 20.0, "d1"), ("d2", -2.0, -3600.0, "d2")]
    assert got == expected, (
        f"One run over readings where no window could close yet should already give every "
        f"anomaly, even one an hour late: expected {expected}, got {got}. Alerts wait for nothing: "
        "no watermark, no window."
    )
    assert not (Path(checkpoint_dir) / "state").exists(), (
        "The alerts query keeps state (its checkpoint has a state/ folder): it should only "
        "filter and select, with no aggregation, de-duplication or join."
    )


# --- 7.6 · a query in its pool -------------------------------------------------------------------


def pool_recording_writer(spark, folder: Path, checkpoint: str, seen: list):
    """A writer whose batches record the scheduler pool they run in."""
    deliver(folder, "a", [reading_line("d1", 1, 50.0, 1)])

    def record(batch, batch_id):
        seen.append(batch.sparkSession.sparkContext.getLocalProperty(POOL_PROPERTY))

    return (
        spark.readStream.schema(READING_DDL)
        .json(str(folder))
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
    )


def started(nb, spark, writer, pool: str) -> StreamingQuery:
    query = nb.start_in_pool(spark, writer, pool)
    assert isinstance(query, StreamingQuery), (
        f"start_in_pool() should return the StreamingQuery that writer.start() returns; it "
        f"returned {type(query).__name__}."
    )
    query.awaitTermination()
    return query


@exercise("7.6", timeout=90)
def test_each_query_runs_in_its_pool(nb, spark, tmp_path, checkpoint_dir):
    context = spark.sparkContext
    alerts_seen, windows_seen = [], []
    try:
        context.setLocalProperty(POOL_PROPERTY, None)
        started(
            nb,
            spark,
            pool_recording_writer(spark, tmp_path / "a", checkpoint_dir + "-a", alerts_seen),
            "alerts",
        )
        after = context.getLocalProperty(POOL_PROPERTY)
        assert after is None, (
            f"Before start_in_pool() this thread had no pool; afterwards it has {after!r}. Put the "
            "property back as it was (setLocalProperty(..., None) removes it), or every job the "
            "notebook runs next lands in that pool."
        )
        started(
            nb,
            spark,
            pool_recording_writer(spark, tmp_path / "w", checkpoint_dir + "-w", windows_seen),
            "windows",
        )
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    assert (alerts_seen, windows_seen) == (["alerts"], ["windows"]), (
        f"The micro-batches of a query started in pool 'alerts' and of one started in pool "
        f"'windows' ran in the pools {alerts_seen} and {windows_seen}. Set the local property "
        "spark.scheduler.pool before calling start(): the query's thread copies it then."
    )


@exercise("7.6", timeout=90)
def test_the_callers_pool_is_restored(nb, spark, tmp_path, checkpoint_dir):
    context = spark.sparkContext
    seen = []
    try:
        context.setLocalProperty(POOL_PROPERTY, "notebook")
        started(
            nb, spark, pool_recording_writer(spark, tmp_path / "a", checkpoint_dir, seen), "alerts"
        )
        after = context.getLocalProperty(POOL_PROPERTY)
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    assert seen == ["alerts"], f"The query should run in pool 'alerts'; it ran in {seen}."
    assert after == "notebook", (
        f"The calling thread was in pool 'notebook' before start_in_pool(); afterwards it is in "
        f"{after!r}. Remember the value before setting yours, and put it back."
    )


@exercise("7.6", timeout=60)
def test_a_failed_start_restores_the_pool_and_raises(nb, spark, tmp_path):
    context = spark.sparkContext
    # No path and no checkpoint location: start() raises.
    writer = spark.readStream.schema(READING_DDL).json(str(tmp_path)).writeStream.format("parquet")
    try:
        context.setLocalProperty(POOL_PROPERTY, "notebook")
        try:
            result = nb.start_in_pool(spark, writer, "alerts")
        except Exception:
            result = None
        else:
            if isinstance(result, StreamingQuery):
                result.stop()
            raise AssertionError(
                f"writer.start() raises for this writer, and start_in_pool() should let the error "
                f"reach its caller; it returned {result!r} instead."
            )
        after = context.getLocalProperty(POOL_PROPERTY)
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    assert after == "notebook", (
        f"When start() raises, the calling thread's pool should still be put back ('notebook'); "
        f"it is {after!r}. Restore it in a finally: block."
    )


# --- 7.7 · each batch once ----------------------------------------------------------------------


def batch_writer(nb, table: Path, app_id: str):
    write = nb.once_per_batch(str(table), app_id)
    assert callable(write), (
        f"once_per_batch(path, app_id) should return the function write(batch, batch_id) for "
        f"foreachBatch; it returned {type(write).__name__}."
    )
    return write


def readings_batch(spark, first: int, count: int) -> DataFrame:
    return spark.createDataFrame(
        [("d1", 50.0, at(n), n) for n in range(first, first + count)], READING_DDL
    )


def table_readings(table: Path) -> list[int]:
    from deltalake import DeltaTable

    assert DeltaTable.is_deltatable(str(table)), (
        f"After write(batch, batch_id) there should be a Delta table at {table}; there is none. "
        "Append the batch with write_deltalake(path, batch.toArrow(), mode='append', ...)."
    )
    return sorted(DeltaTable(str(table)).to_pyarrow_table()["sequence_number"].to_pylist())


def recorded(table: Path, app_id: str):
    from deltalake import DeltaTable

    return DeltaTable(str(table)).transaction_version(app_id)


@exercise("7.7", timeout=60)
def test_a_batch_is_appended_with_its_transaction_id(nb, spark, tmp_path):
    table = tmp_path / "samples"
    write = batch_writer(nb, table, "sampler")
    write(readings_batch(spark, 0, 3), 0)
    assert table_readings(table) == [0, 1, 2], (
        f"The first batch held the readings [0, 1, 2]; the table holds {table_readings(table)}."
    )
    write(readings_batch(spark, 3, 2), 1)
    assert table_readings(table) == [0, 1, 2, 3, 4], (
        f"Batches 0 and 1 held the readings 0 to 4; the table holds {table_readings(table)}. "
        "Append each new batch to the table."
    )
    assert recorded(table, "sampler") == 1, (
        f"After batch 1, the table's transaction version for the app id 'sampler' should be 1; "
        f"it is {recorded(table, 'sampler')}. Commit each batch with "
        "CommitProperties(app_transactions=[Transaction(app_id=..., version=batch_id)])."
    )


@exercise("7.7", timeout=60)
def test_a_replayed_batch_is_not_written_again(nb, spark, tmp_path):
    table = tmp_path / "samples"
    write = batch_writer(nb, table, "sampler")
    first, second = readings_batch(spark, 0, 3), readings_batch(spark, 3, 2)
    write(first, 0)
    write(first, 0)
    got = table_readings(table)
    assert got == [0, 1, 2], (
        f"Batch 0 was handed to write() twice, as Spark does after a crash; the table should hold "
        f"its readings once, [0, 1, 2], and holds {got}. Skip a batch whose id the table has "
        "already recorded for the app id (DeltaTable(path).transaction_version(app_id))."
    )
    write(second, 1)
    write(second, 1)
    write(first, 0)
    got = table_readings(table)
    assert got == [0, 1, 2, 3, 4], (
        f"After batches 0, 1, 1 again and 0 again, the table should hold the readings 0 to 4 "
        f"once each; it holds {got}. Skip every batch at or below the recorded version."
    )


@exercise("7.7", timeout=60)
def test_each_app_id_counts_its_own_batches(nb, spark, tmp_path):
    table = tmp_path / "samples"
    batch_writer(nb, table, "sampler")(readings_batch(spark, 0, 2), 0)
    batch_writer(nb, table, "backfill")(readings_batch(spark, 10, 1), 0)
    got = table_readings(table)
    assert got == [0, 1, 10], (
        f"Two writers with different app ids each wrote their batch 0; the table should hold "
        f"both, [0, 1, 10], and holds {got}. Compare the batch id with the version recorded for "
        "this writer's app id only."
    )


@exercise("7.7", timeout=120)
def test_a_restarted_query_writes_its_replayed_batch_once(nb, spark, tmp_path, checkpoint_dir):
    folder, table = tmp_path / "readings", tmp_path / "samples"
    write = batch_writer(nb, table, "file-query")

    def run() -> None:
        (
            spark.readStream.schema(READING_DDL)
            .option("maxFilesPerTrigger", 1)
            .json(str(folder))
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )

    deliver(folder, "a", [reading_line("d1", n, 50.0, n) for n in range(3)], order=0)
    deliver(folder, "b", [reading_line("d1", n, 50.0, n) for n in range(3, 5)], order=1)
    run()
    # A driver that died after write() returned and before Spark recorded batch 1 as done.
    commits = Path(checkpoint_dir, "commits")
    for name in ("1", ".1.crc"):
        (commits / name).unlink(missing_ok=True)
    run()
    got = table_readings(table)
    assert got == [0, 1, 2, 3, 4], (
        f"A query wrote batches 0 and 1, crashed before Spark recorded batch 1 as done, and "
        f"restarted: Spark ran batch 1 again. The table should hold the readings 0 to 4 once "
        f"each; it holds {got}."
    )
