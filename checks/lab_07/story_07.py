"""What lab 07's checks share: readings as JSON lines the check writes, samples as the
windows should hold them and the comparison that names what is wrong in a sample, the
notebook's two runs counted here, and the diagnosis keys' shape.

Times are compared as seconds after ``START`` computed by Spark, never as Python datetimes
(which ``collect()`` turns into the machine's local time).
"""

from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlab.kit import (
    START,
    CheckFailed,
    Field,
    window_bounds,
)

EPOCH = int(START.timestamp())
READING_DDL = "device_id STRING, sensor_freq DOUBLE, event_time TIMESTAMP, sequence_number BIGINT"
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


# The notebook's two runs: (device, second after 10:00:00, sensor_freq, sequence number).
NOTEBOOK_RUN_1 = [
    ("sensor-1", s, -1.0 if s == 20 else 50.0 + s / 100, s // 10) for s in range(0, 60, 10)
] + [
    ("sensor-2", 15, 49.9, 0),
    ("sensor-1", 95, 50.2, 6),
]


NOTEBOOK_RUN_2 = [("sensor-2", 45, 50.1, 1), ("sensor-1", 12, -3.0, 7), ("sensor-1", 185, 49.8, 8)]


def counted_windows(spark, folder: Path):
    """The course's sliding windows, counted: what exercise 7.3's query writes, in brief."""
    return (
        spark.readStream.schema(READING_DDL)
        .json(str(folder))
        .withWatermark("event_time", "30 seconds")
        .groupBy(F.window("event_time", "60 seconds", "30 seconds"), "device_id")
        .agg(F.count("*").alias("events"))
        .select(*window_bounds(), "device_id", "events")
    )


def diagnosis_field(what: str, accepts) -> Field:
    """A key of a diagnosis: ``what`` it should be, shown as expected against the value."""
    return Field(accepts, f"{what}.", expected=what, actual=lambda value: value)
