"""Checks for lab 07 · Complex event processing.

Pure-Python checks first (the scheduler's allocation file), then Spark: batch DataFrames for
the parsing and sampling rules, then streams over JSON files the check writes, run with
``trigger(availableNow=True)``, twice on one checkpoint where the watermark matters. Times
are compared as seconds after ``START`` computed by Spark, never as Python datetimes (which
``collect()`` turns into the machine's local time). The diagnoses of the debug exercises (7.5,
7.8) are compared with the code as found, run here on the notebook's story and read back from
its progress reports, its sink and, for 7.8, the Delta table's history.
"""

import json
import xml.etree.ElementTree as ET
from datetime import UTC, datetime, timedelta
from pathlib import Path

from pyspark.errors import AnalysisException
from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamlab.deadlines import finish
from streamlab.eventhubs import SCHEMA as EVENTHUBS_SCHEMA
from streamlab.grading import (
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
)
from streamlab.grading.facts import spark_facts
from streamlab.grading.verdict import query_cause
from streamlab.kit.stories import START, deliver_file

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
        raise CheckFailed(
            f"fair_scheduler_xml() returned text that is not XML ({error}).",
            expected="an <allocations> XML document",
            actual=text[:200],
        ) from None


@exercise("7.1")
def test_one_pool_element_per_pool(nb):
    root = _parse(
        nb.fair_scheduler_xml(
            {"alerts": nb.Pool(weight=2, min_share=1), "windows": nb.Pool(3, 0, "FAIR")}
        )
    )
    expect_equal(root.tag, "allocations", "The root element should be <allocations>.")
    pools = root.findall("pool")
    names = [p.get("name") for p in pools]
    expect_equal(
        names, ["alerts", "windows"], "Expected one <pool name=...> per pool, in the dict's order."
    )
    got = {p.get("name"): {child.tag: (child.text or "").strip() for child in p} for p in pools}
    expected = {
        "alerts": {"schedulingMode": "FIFO", "weight": "2", "minShare": "1"},
        "windows": {"schedulingMode": "FAIR", "weight": "3", "minShare": "0"},
    }
    expect_equal(
        got, expected, "Each pool holds exactly <schedulingMode>, <weight> and <minShare>."
    )


@exercise("7.1")
def test_pool_names_come_out_exactly(nb):
    name = 'R&D <"night"> shift'
    root = _parse(nb.fair_scheduler_xml({name: nb.Pool()}))
    got = [p.get("name") for p in root.findall("pool")]
    expect_equal(
        got,
        [name],
        f"A pool named {name!r} should come back with that exact name when the file is read. "
        "Let xml.etree.ElementTree write the attribute: it escapes &, < and quotes.",
    )


@exercise("7.1")
def test_no_pools_is_an_empty_file(nb):
    root = _parse(nb.fair_scheduler_xml({}))
    expect_that(
        root.tag == "allocations" and len(root) == 0,
        "With no pools, the file is an empty <allocations/> element.",
        expected="<allocations />",
        actual=ET.tostring(root, encoding="unicode")[:200],
    )


@exercise("7.1")
def test_the_mode_is_read_in_any_case_and_written_in_upper_case(nb):
    root = _parse(nb.fair_scheduler_xml({"alerts": nb.Pool(scheduling_mode="fair")}))
    modes = [(p.findtext("schedulingMode") or "").strip() for p in root.findall("pool")]
    expect_equal(
        modes,
        ["FAIR"],
        "Spark reads the scheduling mode in any letter case: a pool given 'fair' is a FAIR "
        "pool, written in upper case.",
    )


@exercise("7.1")
def test_bad_pools_raise_value_error(nb):
    cases = [
        ("an empty name", {"": nb.Pool()}),
        ("a blank name (only spaces)", {"  ": nb.Pool()}),
        ("weight 0", {"a": nb.Pool(weight=0)}),
        ("scheduling mode 'ROUND_ROBIN'", {"a": nb.Pool(scheduling_mode="ROUND_ROBIN")}),
        ("a good pool followed by weight 0", {"a": nb.Pool(), "b": nb.Pool(weight=0)}),
    ]
    for what, pools in cases:
        try:
            text = nb.fair_scheduler_xml(pools)
        except ValueError:
            continue
        raise CheckFailed(
            f"fair_scheduler_xml() should raise ValueError for a pool with {what}.",
            expected="ValueError raised",
            actual=f"returned {text[:120] if isinstance(text, str) else text!r}",
        )


# --- 7.2 · first, middle, last and anomalies -------------------------------------------------


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


def windows_shown(value) -> str:
    """Windows (sample tuples) one a line as :func:`describe` says them; text as it is."""
    if isinstance(value, str):
        return value
    try:
        return "\n".join(describe(sample) for sample in value) or "no window"
    except Exception:  # a row the check cannot read (a null start): as Python writes it
        return repr(value)


SAMPLE_PARTS = ("events", "first", "middle", "last", "anomalies")


#: The hint of a sample whose only wrong part is this one (see :func:`_hint_for`).
PART_HINTS = {
    "middle": "The middle is the lower middle position, (n - 1) // 2 counted from 0, for an odd "
    "count as for an even one: one function of pyspark.sql.functions counts positions from 1, "
    "another from 0.",
    "anomalies": "An anomaly is a reading whose sensor_freq is below zero, strictly; filter the "
    "sorted readings, so that the anomalies keep their order.",
    "events": "events is the number of readings in the window: the size of its array.",
}
#: The hint when first or last is wrong: they are wrong together when the order is.
ORDER_HINT = (
    "Sorting an array of structs orders them by their fields, first field first: look at the "
    "order of SAMPLE_FIELDS."
)


def _hint_for(wrong: list[str]) -> str:
    """The hint aimed at the parts of a sample that are wrong."""
    if "first" in wrong or "last" in wrong:
        return ORDER_HINT
    return PART_HINTS.get(wrong[0], "") if len(wrong) == 1 else ""


def compare(got: list[tuple], expected: list[tuple], rule: str, samples_from: str = "") -> None:
    """Fail with the first difference, said briefly: which window, which part, and ``rule``;
    the check kit shows the windows expected against those written."""
    if got == expected:
        return

    def fail(message: str, hint: str = "") -> CheckFailed:
        return CheckFailed(message, expected=expected, actual=got, show=windows_shown, hint=hint)

    by_key = {g[:3]: g for g in got}
    for want in expected:
        have = by_key.get(want[:3])
        if have is None:
            raise fail(f"{rule}. The window {label(want)} is missing.")
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
        raise fail(
            f"{rule}. In {label(want)}, " + "; ".join(wrong) + "." + sorting + samples_from,
            _hint_for([p for i, p in enumerate(SAMPLE_PARTS, start=3) if have[i] != want[i]]),
        )
    extra = [g for g in got if g[:3] not in {e[:3] for e in expected}]
    if extra:
        raise fail(
            f"{rule}. Unexpected window(s): " + "; ".join(describe(g) for g in extra[:2]) + "."
        )
    # Every window expected is there, once: one is written more than once, or out of order.
    repeated = sorted({label(g) for g in got if sum(h[:3] == g[:3] for h in got) > 1})
    if repeated:
        raise fail(f"{rule}. Written more than once: {'; '.join(repeated[:2])}.")
    raise fail(f"{rule}. The windows are right, in another order than expected.")


def picked(nb, spark, windows) -> list[tuple]:
    result = expect_dataframe(
        nb.pick_samples(spark.createDataFrame(window_rows(windows), WINDOWS_DDL)),
        "pick_samples",
        SAMPLE_COLUMNS,
    )
    return sample_tuples(result)


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
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
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
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
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
    compare(
        picked(nb, spark, windows),
        sorted(expected_sample(*w) for w in windows),
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


# --- 7.3 · the sliding-window query ------------------------------------------------------------


@exercise("7.3", timeout=60)
def test_sliding_windows_on_a_batch(nb, spark):
    readings = spark.createDataFrame(
        [("d1", 50.0, at(s), n) for n, s in enumerate((1, 12, 13, 25))] + [("d2", -1.0, at(9), 0)],
        READING_DDL,
    )
    result = expect_dataframe(
        nb.window_samples(readings, "20 seconds", "10 seconds", "5 seconds"),
        "window_samples",
        SAMPLE_COLUMNS,
    )
    got = [(g[0], g[2], g[3]) for g in sample_tuples(result)]
    expected = sorted(
        [(-10, "d1", 1), (0, "d1", 3), (10, "d1", 3), (20, "d1", 1), (-10, "d2", 1), (0, "d2", 1)]
    )
    expect_equal(
        got,
        expected,
        "Windows of 20 s sliding every 10 s over d1's readings at 1, 12, 13 and 25 s and d2's at "
        "9 s should give these (window start in seconds after 10:00:00, device, readings). Are "
        "size and slide both passed to F.window?",
    )


FROM_PICK_SAMPLES = (
    " (window_samples() collects structs with the fields SAMPLE_FIELDS, in that "
    "order, and ends with your pick_samples(): if exercise 7.2 fails, fix it "
    "first.)"
)


def run_windows(nb, spark, folder: Path, output: Path, checkpoint_dir: str) -> list[tuple]:
    stream = spark.readStream.schema(READING_DDL).json(str(folder))
    samples = expect_dataframe(nb.window_samples(stream), "window_samples", SAMPLE_COLUMNS)
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
        raise CheckFailed(
            "Spark refused to run window_samples() in append mode: set a watermark with "
            '.withWatermark("event_time", lateness) before grouping by a window on that same '
            "column.",
            expected="a query Spark runs in append mode",
            actual=f"Spark said: {str(error).splitlines()[0][:200]}",
        ) from None
    finish(
        query, within=240, what="the check's query over your window_samples() to read its events"
    )
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


@exercise("7.3", timeout=240)
def test_windows_are_written_once_when_the_watermark_closes_them(
    nb, spark, tmp_path, checkpoint_dir
):
    folder, output = tmp_path / "readings", tmp_path / "samples"
    deliver_file(folder, "run-1", [reading_line(d, s, f, n) for d, s, f, n in RUN_1], order=0)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    closed = expected_windows(RUN_1, [("d1", -30), ("d1", 0), ("d2", -30), ("d2", 0)])
    expect_that(
        got,
        "After readings up to 10:01:30 the watermark is 10:01:00 (30 s of lateness), which closes "
        "the windows ending at 10:00:30 and 10:01:00, but the query wrote no window. Is the "
        "watermark 30 seconds (the lateness argument) on event_time?",
        expected=closed,
        actual=got,
        show=windows_shown,
    )
    compare(
        got,
        closed,
        "After the first run (readings up to 10:01:30, watermark 10:01:00), only "
        "the closed windows are written",
        FROM_PICK_SAMPLES,
    )

    deliver_file(folder, "run-2", [reading_line(d, s, f, n) for d, s, f, n in RUN_2], order=1)
    got = run_windows(nb, spark, folder, output, checkpoint_dir)
    if any(r[0] == 25 for g in got for r in (g[4], g[5], g[6])):
        raise CheckFailed(
            "The reading from 10:00:25 arrived when the watermark was 10:01:00: both its windows "
            "were closed, so it must be in none. Append mode and a watermark drop it for you.",
            expected="no window holding the reading from 10:00:25",
            actual=[g for g in got if any(r and r[0] == 25 for r in (g[4], g[5], g[6]))],
            show=windows_shown,
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


# --- 7.4 · predict the second run ------------------------------------------------------------

# The notebook's two runs: (device, second after 10:00:00, sensor_freq, sequence number).
NOTEBOOK_RUN_1 = [
    ("sensor-1", s, -1.0 if s == 20 else 50.0 + s / 100, s // 10) for s in range(0, 60, 10)
] + [
    ("sensor-2", 15, 49.9, 0),
    ("sensor-1", 95, 50.2, 6),
]
NOTEBOOK_RUN_2 = [("sensor-2", 45, 50.1, 1), ("sensor-1", 12, -3.0, 7), ("sensor-1", 185, 49.8, 8)]


def _counted_windows(spark, folder: Path):
    """The course's sliding windows, counted: what exercise 7.3's query writes, in brief."""
    return (
        spark.readStream.schema(READING_DDL)
        .json(str(folder))
        .withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "60 seconds", "30 seconds"), "device_id")
        .agg(F.count("*").alias("events"))
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "device_id",
            "events",
        )
    )


def _predicted_windows(value) -> list[tuple]:
    if not isinstance(value, (list, tuple)) or not all(
        isinstance(w, (list, tuple)) and len(w) == 3 for w in value
    ):
        raise CheckFailed(
            "PREDICTED_WINDOWS should be a list of (device_id, window start as 'HH:MM:SS', "
            "readings) tuples.",
            expected="a list of 3-tuples",
            actual=value,
        )
    return sorted(tuple(w) for w in value)


def _second_run(spark, tmp_path: Path, checkpoint_dir: str) -> tuple[list, int]:
    """The notebook's two runs on one checkpoint: the second's windows and late rows."""
    folder, output = tmp_path / "readings", tmp_path / "samples"

    def run(order: int, readings) -> tuple[list, int]:
        deliver_file(folder, f"run-{order}", [reading_line(*r) for r in readings], order=order)
        query = (
            _counted_windows(spark, folder)
            .withColumn("run", F.lit(order))
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", checkpoint_dir)
            .outputMode("append")
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's second run to read its events")
        dropped = sum(
            op["numRowsDroppedByWatermark"]
            for p in query.recentProgress
            for op in p["stateOperators"]
        )
        windows = (
            spark.read.parquet(str(output))
            .where(F.col("run") == order)
            .select("device_id", F.date_format("window_start", "HH:mm:ss").alias("start"), "events")
            .collect()
        )
        return sorted((w.device_id, w.start, w.events) for w in windows), dropped

    run(0, NOTEBOOK_RUN_1)
    return run(1, NOTEBOOK_RUN_2)


@exercise("7.4", timeout=180)
def test_the_second_run_is_as_predicted(nb, spark, tmp_path, checkpoint_dir):
    predicted = (_predicted_windows(nb.PREDICTED_WINDOWS), nb.PREDICTED_LATE_ROWS)
    actual = spark_facts(
        "7.4 the second run",
        lambda: _second_run(spark, tmp_path, checkpoint_dir),
        check=__file__,
    )
    expect_equal(
        predicted,
        actual,
        "(PREDICTED_WINDOWS, PREDICTED_LATE_ROWS) should be the windows the second run writes, "
        "sorted, and the late rows its batches drop (expected: what Spark does on the notebook's "
        "readings).",
        hint="Go batch by batch with two watermarks, the one a batch runs with and the one it "
        "leaves. For each new reading, ask of each of its windows on its own whether it was "
        "already closed, and ask what numRowsDroppedByWatermark counts: readings, or the rows "
        "Spark makes of them.",
    )


# --- 7.5 · the alerts ----------------------------------------------------------------------------


def alerts_of(nb, readings: DataFrame) -> DataFrame:
    alerts = expect_dataframe(nb.alert_events(readings), "alert_events", ["body", "partitionKey"])
    types = {f.name: f.dataType.simpleString() for f in alerts.schema.fields}
    expect_equal(
        types,
        {"body": "string", "partitionKey": "string"},
        "Both columns should be strings (the eventhubs sink sends `body`).",
    )
    return alerts


def decoded(alerts: DataFrame) -> list[tuple]:
    out = []
    for row in alerts.collect():
        try:
            fields = json.loads(row.body)
        except (TypeError, ValueError):
            raise CheckFailed(
                "An alert's body should be JSON.", expected="a JSON object", actual=repr(row.body)
            ) from None
        expect_that(
            isinstance(fields, dict) and set(fields) == {"device_id", "sensor_freq", "event_time"},
            "An alert's body should be a JSON object with exactly device_id, sensor_freq and "
            "event_time.",
            expected='{"device_id": ..., "sensor_freq": ..., "event_time": ...}',
            actual=repr(row.body),
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


#: What a failed fix of 7.5 is about, whatever the diagnosis said.
FIX_HINT_7_5 = (
    "Hold your query to its two promises one at a time: an alert for an anomaly however late, "
    "and a query that can run for ever. What does each part of your query keep between "
    "micro-batches, and what does it do to a late reading?"
)


@exercise("7.5", part="fix", hint=FIX_HINT_7_5)
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
    expect_equal(
        got,
        expected,
        "Alerts should be the readings with sensor_freq < 0 (not 0.0, not -0.0), as "
        "(device_id, sensor_freq, seconds after 10:00:00, partitionKey).",
    )


DIAGNOSIS_7_5_KEYS = {
    "alerts": "how many alerts the two runs wrote, an int",
    "dropped_in": "the id of the micro-batch that dropped rows as too late, an int",
    "watermark": "the watermark that micro-batch ran with, as 'HH:MM:SS'",
    "late_rows": "how many rows it dropped so, an int",
}
ALERTS_DIAGNOSIS_HINT = (
    "Read the found version's runs in the notebook: count the rows of its sink, then find, in "
    "the runs' recentProgress, the report whose state operator has numRowsDroppedByWatermark "
    "above 0, and read its batchId and eventTime's watermark."
)


def _diagnosis_shape(answer, name: str, keys: dict[str, str], checks: dict, hint: str) -> dict:
    """A diagnosis dict with exactly ``keys``, each value passing its check in ``checks``."""
    expect_keys(answer, name, list(keys), hint=hint)
    for key, what in keys.items():
        if not checks[key](answer[key]):
            raise CheckFailed(
                f"{name}[{key!r}] should be {what}.", expected=what, actual=answer[key], hint=hint
            )
    return dict(answer)


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_clock(value) -> bool:
    return isinstance(value, str) and len(value) == 8 and value[2] == value[5] == ":"


def _alert_events_as_found(readings: DataFrame) -> DataFrame:
    """The alerts query as the notebook gives it (alert_events_as_found)."""
    return (
        readings.withWatermark("event_time", "30 seconds")
        .dropDuplicates(["device_id", "event_time"])
        .where(F.col("sensor_freq") < 0)
        .select(
            F.to_json(F.struct("device_id", "sensor_freq", "event_time")).alias("body"),
            F.col("device_id").alias("partitionKey"),
        )
    )


def _what_the_found_alerts_do(spark, root: Path) -> dict:
    """The found alerts over the notebook's two files, one run each, as Spark reports them."""
    folder, output, checkpoint = root / "readings", root / "alerts", root / "checkpoint"
    folder.mkdir(parents=True)
    alerts = _alert_events_as_found(spark.readStream.schema(READING_DDL).json(str(folder)))
    progress = []
    for order, readings in enumerate((NOTEBOOK_RUN_1, NOTEBOOK_RUN_2)):
        deliver_file(folder, f"run-{order}", [reading_line(*r) for r in readings], order=order)
        query = (
            alerts.writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the found alerts to read the notebook's readings")
        progress += query.recentProgress
    dropping = [
        (p["batchId"], p["eventTime"]["watermark"][11:19], dropped)
        for p in progress
        if (dropped := sum(op["numRowsDroppedByWatermark"] for op in p["stateOperators"]))
    ]
    expect_equal(
        len(dropping), 1, "One batch of the found alerts should drop late rows (a course bug)."
    )
    ((batch, watermark, dropped),) = dropping
    return {
        "alerts": spark.read.parquet(str(output)).count(),
        "dropped_in": batch,
        "watermark": watermark,
        "late_rows": dropped,
    }


@exercise("7.5", timeout=180, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_alerts(nb, spark, tmp_path):
    diagnosis = _diagnosis_shape(
        nb.DIAGNOSIS_7_5,
        "DIAGNOSIS_7_5",
        DIAGNOSIS_7_5_KEYS,
        {"alerts": _is_int, "dropped_in": _is_int, "watermark": _is_clock, "late_rows": _is_int},
        ALERTS_DIAGNOSIS_HINT,
    )
    expect_equal(
        diagnosis,
        spark_facts(
            "7.5 the found alerts",
            lambda: _what_the_found_alerts_do(spark, tmp_path / "found"),
            check=__file__,
        ),
        "DIAGNOSIS_7_5 against the found alerts run on the notebook's two files, one run each: "
        "the alerts in its sink, and the one micro-batch whose state operator dropped rows as "
        "too late, with the watermark it ran with and numRowsDroppedByWatermark.",
        hint=ALERTS_DIAGNOSIS_HINT,
    )


@exercise(
    "7.5",
    timeout=180,
    part="fix",
    hint=FIX_HINT_7_5,
)
def test_every_anomaly_is_alerted_by_a_query_that_can_run_for_ever(
    nb, spark, tmp_path, checkpoint_dir
):
    folder, output = tmp_path / "readings", tmp_path / "alerts"
    folder.mkdir()
    alerts = alerts_of(nb, spark.readStream.schema(READING_DDL).json(str(folder)))

    def run() -> int:
        query = (
            alerts.writeStream.format("parquet")
            .option("path", str(output))
            .outputMode("append")
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's query over your alerts to read its input")
        last = query.recentProgress[-1] if query.recentProgress else {}
        return sum(op.get("numRowsTotal", 0) for op in last.get("stateOperators", []))

    # Two runs: the first moves any watermark, and its last batch puts it in force for the
    # second, which reads an anomaly from an hour before.
    deliver_file(
        folder,
        "a",
        [
            reading_line("d1", 20, -1.0, 1),
            reading_line("d1", 40, 50.0, 2),
            reading_line("d2", 45, 50.0, 1),
        ],
        order=0,
    )
    kept_first = run()
    deliver_file(folder, "b", [reading_line("d2", -3600, -2.0, 2)], order=1)
    kept_second = run()
    expect_equal(
        decoded(spark.read.parquet(str(output))),
        [("d1", -1.0, 20.0, "d1"), ("d2", -2.0, -3600.0, "d2")],
        "Two runs, the second reading an anomaly from an hour before the first run's: every "
        "anomaly should be alerted, as (device_id, sensor_freq, seconds after 10:00:00, "
        "partitionKey).",
        hint="An anomaly went without an alert: ask which part of your query judges a reading "
        "by its event time, and what it does to one that comes late.",
    )
    expect_that(
        kept_second <= kept_first,
        "What the alerts query keeps between micro-batches grew with the readings it read (the "
        "rows of its state operators, numRowsTotal, after each run): a query that runs for ever "
        "cannot keep more with every reading.",
        expected=f"no more rows after the second run than after the first ({kept_first})",
        actual=f"{kept_second} rows after the second run",
    )


# --- 7.6 · a query in its pool -------------------------------------------------------------------


def pool_recording_writer(spark, folder: Path, checkpoint: str, seen: list):
    """A writer whose batches record the scheduler pool they run in."""
    deliver_file(folder, "a", [reading_line("d1", 1, 50.0, 1)])

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
    expect_that(
        isinstance(query, StreamingQuery),
        "start_in_pool() should return the StreamingQuery that writer.start() returns.",
        expected="a StreamingQuery",
        actual=type(query).__name__,
    )
    finish(query, within=240, what="the query your start_in_pool() started to read its input")
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
        expect_that(
            after is None,
            "Before start_in_pool() this thread had no pool; afterwards it has one. Put the "
            "property back as it was (setLocalProperty(..., None) removes it), or every job the "
            "notebook runs next lands in that pool.",
            expected="no pool (None)",
            actual=repr(after),
        )
        started(
            nb,
            spark,
            pool_recording_writer(spark, tmp_path / "w", checkpoint_dir + "-w", windows_seen),
            "windows",
        )
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    expect_equal(
        (alerts_seen, windows_seen),
        (["alerts"], ["windows"]),
        "The micro-batches of a query started in pool 'alerts' and of one started in pool "
        "'windows' should run in those pools (shown: the pools the batches of each query ran "
        "in). Set the local property spark.scheduler.pool before calling start(): the query's "
        "thread copies it then.",
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
    expect_equal(seen, ["alerts"], "The query should run in pool 'alerts'.")
    expect_equal(
        after,
        "notebook",
        "The calling thread was in pool 'notebook' before start_in_pool(), and should be in it "
        "afterwards. Remember the value before setting yours, and put it back.",
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
            raise CheckFailed(
                "writer.start() raises for this writer, and start_in_pool() should let the error "
                "reach its caller.",
                expected="the error writer.start() raised",
                actual=f"returned {result!r}",
            )
        after = context.getLocalProperty(POOL_PROPERTY)
    finally:
        context.setLocalProperty(POOL_PROPERTY, None)
    expect_equal(
        after,
        "notebook",
        "When start() raises, the calling thread's pool should still be put back. Restore it in "
        "a finally: block.",
    )


# --- 7.7 · each batch once ----------------------------------------------------------------------


def _crash_before_commit(checkpoint) -> None:
    """What a driver killed after a batch's output and before Spark recorded the batch leaves."""
    commits = Path(checkpoint, "commits")
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)


def batch_writer(nb, table: Path, app_id: str):
    write = nb.once_per_batch(str(table), app_id)
    expect_that(
        callable(write),
        "once_per_batch(path, app_id) should return the function write(batch, batch_id) for "
        "foreachBatch.",
        expected="a function",
        actual=type(write).__name__,
    )
    return write


def readings_batch(spark, first: int, count: int) -> DataFrame:
    return spark.createDataFrame(
        [("d1", 50.0, at(n), n) for n in range(first, first + count)], READING_DDL
    )


def table_readings(table: Path) -> list[int]:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(table)):
        raise CheckFailed(
            f"After write(batch, batch_id) there should be a Delta table at {table}. Append the "
            "batch with write_deltalake(path, batch.toArrow(), mode='append', ...).",
            expected="a Delta table (a folder with a _delta_log)",
            actual=f"a folder holding {sorted(p.name for p in table.iterdir())}"
            if table.is_dir()
            else "no folder",
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
    expect_equal(
        table_readings(table),
        [0, 1, 2],
        "The first batch held the readings [0, 1, 2]: the table should hold them.",
    )
    write(readings_batch(spark, 3, 2), 1)
    expect_equal(
        table_readings(table),
        [0, 1, 2, 3, 4],
        "Batches 0 and 1 held the readings 0 to 4. Append each new batch to the table.",
    )
    expect_equal(
        recorded(table, "sampler"),
        1,
        "After batch 1, the table's transaction version for the app id 'sampler' should be 1. "
        "Commit each batch with "
        "CommitProperties(app_transactions=[Transaction(app_id=..., version=batch_id)]).",
    )


@exercise("7.7", timeout=60)
def test_a_replayed_batch_is_not_written_again(nb, spark, tmp_path):
    table = tmp_path / "samples"
    write = batch_writer(nb, table, "sampler")
    first, second = readings_batch(spark, 0, 3), readings_batch(spark, 3, 2)
    write(first, 0)
    write(first, 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2],
        "Batch 0 was handed to write() twice, as Spark does after a crash; the table should hold "
        "its readings once. Skip a batch whose id the table has already recorded for the app id "
        "(DeltaTable(path).transaction_version(app_id)).",
    )
    write(second, 1)
    write(second, 1)
    write(first, 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2, 3, 4],
        "After batches 0, 1, 1 again and 0 again, the table should hold the readings 0 to 4 "
        "once each. Skip every batch at or below the recorded version.",
    )


@exercise("7.7", timeout=60)
def test_each_app_id_counts_its_own_batches(nb, spark, tmp_path):
    table = tmp_path / "samples"
    batch_writer(nb, table, "sampler")(readings_batch(spark, 0, 2), 0)
    batch_writer(nb, table, "backfill")(readings_batch(spark, 10, 1), 0)
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 10],
        "Two writers with different app ids each wrote their batch 0; the table should hold "
        "both. Compare the batch id with the version recorded for this writer's app id only.",
    )


@exercise("7.7", timeout=120)
def test_a_restarted_query_writes_its_replayed_batch_once(nb, spark, tmp_path, checkpoint_dir):
    folder, table = tmp_path / "readings", tmp_path / "samples"
    write = batch_writer(nb, table, "file-query")

    def run() -> None:
        query = (
            spark.readStream.schema(READING_DDL)
            .option("maxFilesPerTrigger", 1)
            .json(str(folder))
            .writeStream.foreachBatch(write)
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the check's query over your batch writer to read its files")

    deliver_file(folder, "a", [reading_line("d1", n, 50.0, n) for n in range(3)], order=0)
    deliver_file(folder, "b", [reading_line("d1", n, 50.0, n) for n in range(3, 5)], order=1)
    run()
    _crash_before_commit(checkpoint_dir)  # after write() returned for batch 1
    run()
    got = table_readings(table)
    expect_equal(
        got,
        [0, 1, 2, 3, 4],
        "A query wrote batches 0 and 1, crashed before Spark recorded batch 1 as done, and "
        "restarted: Spark ran batch 1 again. The table should hold the readings 0 to 4 once "
        "each.",
    )


# --- 7.8 · the windows to a Delta table ---------------------------------------------------------


def _samples_table(table: Path) -> list[tuple]:
    """(device, window start in seconds after START, readings) per row of the Delta table."""
    import pyarrow as pa
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(str(table)):
        return []
    arrow = DeltaTable(str(table)).to_pyarrow_table()
    starts = arrow["window_start"].cast(pa.timestamp("s", tz="UTC")).cast(pa.int64()).to_pylist()
    return sorted(
        (device, start - EPOCH, events)
        for device, start, events in zip(
            arrow["device_id"].to_pylist(), starts, arrow["events"].to_pylist()
        )
    )


DIAGNOSIS_7_8_KEYS = {
    "appended": "a dict {batch id: rows it added}, ints, batches that added none left out",
    "replayed": "a sorted list of the batch ids Spark ran more than once",
    "closing_batch": "the id of the first batch whose watermark is at or past 10:01:00, an int",
}
SAMPLES_DIAGNOSIS_HINT = (
    "Read the found writer's runs in the notebook: found_progress holds one report per batch run, "
    "in order, and the table's history one commit per call of the writer, in the same order, "
    "each with num_added_rows in its operationMetrics."
)
#: The notebook's story for 7.8: (file, readings) delivered in order; a crash and a restart after
#: every file but the first.
SAMPLES_STORY = [
    ("a", [("d1", 5, 50.0, 1), ("d1", 25, 50.2, 3)]),
    ("b", [("d1", 15, 50.1, 2)]),
    ("c", [("d1", 125, 50.3, 4)]),
]


def _samples_writer_as_found(samples: DataFrame, table: str):
    """The writer as the notebook gives it (samples_writer_as_found)."""
    from deltalake import write_deltalake

    def append(batch: DataFrame, batch_id: int) -> None:
        write_deltalake(table, batch.toArrow(), mode="append")

    return samples.writeStream.outputMode("update").foreachBatch(append)


def _what_the_found_writer_does(spark, root: Path) -> dict:
    """The found writer on the notebook's story, as its progress reports and its table's
    history show it: each batch run's reports and commits, paired in order."""
    from deltalake import DeltaTable

    folder, table, checkpoint = root / "readings", root / "samples", root / "checkpoint"
    folder.mkdir(parents=True)
    samples = _counted_windows(spark, folder)
    progress = []

    def run() -> None:
        query = (
            _samples_writer_as_found(samples, str(table))
            .option("checkpointLocation", str(checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        finish(query, within=240, what="the found writer to read the notebook's readings")
        progress.extend(query.recentProgress)

    for order, (name, readings) in enumerate(SAMPLES_STORY):
        deliver_file(folder, name, [reading_line(*r) for r in readings], order)
        run()
        if order > 0:
            _crash_before_commit(checkpoint)
            run()
    history = sorted(DeltaTable(str(table)).history(), key=lambda entry: entry["version"])
    expect_equal(
        len(history),
        len(progress),
        "The found writer should commit once per batch run (a course bug if not).",
    )
    appended: dict[int, int] = {}
    for report, commit in zip(progress, history):
        added = int(commit.get("operationMetrics", {}).get("num_added_rows", 0))
        if added:
            appended[report["batchId"]] = appended.get(report["batchId"], 0) + added
    ids = [report["batchId"] for report in progress]
    closes = at(60).strftime("%Y-%m-%dT%H:%M:%S")
    return {
        "appended": appended,
        "replayed": sorted({batch for batch in ids if ids.count(batch) > 1}),
        "closing_batch": min(
            report["batchId"]
            for report in progress
            if report["eventTime"].get("watermark", "")[:19] >= closes
        ),
    }


@exercise("7.8", timeout=420, part="diagnosis")
def test_the_diagnosis_is_what_spark_shows_of_the_found_writer(nb, spark, tmp_path):
    diagnosis = _diagnosis_shape(
        nb.DIAGNOSIS_7_8,
        "DIAGNOSIS_7_8",
        DIAGNOSIS_7_8_KEYS,
        {
            "appended": lambda v: (
                isinstance(v, dict) and all(_is_int(k) and _is_int(n) for k, n in v.items())
            ),
            "replayed": lambda v: isinstance(v, list | tuple) and all(map(_is_int, v)),
            "closing_batch": _is_int,
        },
        SAMPLES_DIAGNOSIS_HINT,
    )
    expect_equal(
        {**diagnosis, "replayed": sorted(diagnosis["replayed"])},
        spark_facts(
            "7.8 the found writer",
            lambda: _what_the_found_writer_does(spark, tmp_path / "found"),
            check=__file__,
        ),
        "DIAGNOSIS_7_8 against the found writer played on the notebook's story (three files, a "
        "crash and a restart after the second and after the third): the rows each batch added "
        "to the table, all its runs together; the batches Spark ran more than once; and the "
        "first batch that ran with a watermark at or past 10:01:00.",
        hint=SAMPLES_DIAGNOSIS_HINT,
    )


@exercise(
    "7.8",
    timeout=420,
    part="fix",
    hint="Two things go wrong, and your diagnosis found both: for each, ask which line of the "
    "writer decides it, what a batch hands over and what a replayed batch writes.",
)
def test_each_closed_window_lands_once(nb, spark, tmp_path, checkpoint_dir):
    from pyspark.sql.streaming import DataStreamWriter

    folder, table = tmp_path / "readings", tmp_path / "samples"
    folder.mkdir()
    samples = _counted_windows(spark, folder)

    def run() -> None:
        writer = nb.samples_writer(samples, str(table))
        if not isinstance(writer, DataStreamWriter):
            raise CheckFailed(
                "samples_writer() should return the DataStreamWriter, not started.",
                expected="a DataStreamWriter",
                actual=type(writer).__name__,
            )
        query = (
            writer.option("checkpointLocation", checkpoint_dir).trigger(availableNow=True).start()
        )
        finish(query, within=240, what="the query your samples_writer() defines to read its input")

    deliver_file(folder, "a", [reading_line("d1", 5, 50.0, 1), reading_line("d1", 25, 50.2, 3)], 0)
    run()
    deliver_file(folder, "b", [reading_line("d1", 15, 50.1, 2)], 1)
    run()
    _crash_before_commit(checkpoint_dir)
    run()
    deliver_file(folder, "c", [reading_line("d1", 125, 50.3, 4)], 2)
    run()  # its last batch, run without new data, writes the windows 10:02:05 closes
    _crash_before_commit(checkpoint_dir)
    run()
    expect_equal(
        _samples_table(table),
        [("d1", -30, 3), ("d1", 0, 3)],
        "After readings at 10:00:05 and :25, then :15 (its batch run again after a crash), then "
        "10:02:05 (the batch that closes the windows run again after a crash), the table should "
        "hold each closed window once, with all its readings, as (device, window start in "
        "seconds after 10:00:00, readings), and no window that is still open.",
    )


def _deepest_cause(query, error: BaseException) -> str:
    """The first line of the JVM's innermost reason for a failed query, e.g. a state store's."""
    try:
        cause = query._jsq.exception().get()
        while cause.getCause() is not None:
            cause = cause.getCause()
        return str(cause.getMessage()).splitlines()[0]
    except Exception:  # an internal API: if it moves, Spark's own sentence will do
        return query_cause(error)


@exercise(
    "7.7",
    timeout=180,
    hint="In a query with state, the batch's state is committed as its DataFrame is computed: "
    "compute the batch (its Arrow table) before you decide to skip writing it.",
)
def test_a_stateful_query_replays_its_batch_once(nb, spark, tmp_path, checkpoint_dir):
    folder, table = tmp_path / "readings", tmp_path / "counts"
    folder.mkdir()
    write = batch_writer(nb, table, "counts")
    counts = spark.readStream.schema(READING_DDL).json(str(folder)).groupBy("device_id").count()

    def run() -> None:
        query = (
            counts.writeStream.outputMode("update")
            .foreachBatch(write)
            .option("checkpointLocation", checkpoint_dir)
            .trigger(availableNow=True)
            .start()
        )
        try:
            finish(query, within=240, what="the check's stateful query to read its input")
        except Exception as error:
            raise CheckFailed(
                "A query that counts readings per device (it keeps state) failed when Spark ran "
                "its last batch again after a crash.",
                expected="the replayed batch skipped, the query ending normally",
                actual=_deepest_cause(query, error),
            ) from None

    deliver_file(folder, "a", [reading_line("d1", 1, 50.0, 1), reading_line("d2", 2, 50.0, 1)], 0)
    run()
    _crash_before_commit(checkpoint_dir)
    run()
    from deltalake import DeltaTable

    rows = sorted(DeltaTable(str(table)).to_pyarrow_table()["device_id"].to_pylist())
    expect_equal(rows, ["d1", "d2"], "The table should hold the batch's counts once.")
