"""What lab 02's checks share: heartbeats as JSON files the check writes and as batch
DataFrames, the check's own final_counts (2.3's answer, so the checks of later exercises do not
depend on the learner's), and rows read back the way a person reads them.

Timestamps are compared as the strings Spark prints in UTC, never as Python datetimes (which
``collect()`` turns into the machine's local time).
"""

from datetime import datetime, timedelta
from pathlib import Path

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from streamlab.kit import (
    START,
    is_str,
    list_of,
    window_bounds,
)

SCHEMA = "machine_name STRING, machine_time TIMESTAMP, event_time TIMESTAMP"
COLUMNS = ["window_start", "window_end", "machine_name", "heartbeats"]


def beat(machine, second, enqueued=None, skew=0):
    """A heartbeat enqueued at START + enqueued (default: second); the machine's clock is
    ``skew`` seconds off."""
    stored = START + timedelta(seconds=second if enqueued is None else enqueued)
    sent = START + timedelta(seconds=second + skew)
    return {
        "machine_name": machine,
        "machine_time": sent.isoformat(),
        "event_time": stored.isoformat(),
    }


def stream(spark, folder: Path, **options) -> DataFrame:
    return spark.readStream.schema(SCHEMA).options(**options).json(str(folder))


def batch(spark, beats) -> DataFrame:
    return spark.createDataFrame(
        [
            (
                b["machine_name"],
                datetime.fromisoformat(b["machine_time"]),
                datetime.fromisoformat(b["event_time"]),
            )
            for b in beats
        ],
        SCHEMA,
    )


def hhmmss(second: int) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def table_rows(df: DataFrame, columns=COLUMNS) -> list[tuple]:
    """Rows as tuples, timestamps as UTC strings, sorted."""
    cast = [
        F.col(c).cast("string").alias(c) if c.startswith("window") else F.col(c) for c in columns
    ]
    return sorted(tuple(r) for r in df.select(*cast).collect())


def clock_rows(df: DataFrame) -> list[tuple]:
    """Rows as sorted tuples, timestamps as "HH:MM:SS" (the notebook's clock_rows)."""
    shown = [
        F.date_format(c, "HH:mm:ss").alias(c) if t == "timestamp" else F.col(c)
        for c, t in df.dtypes
    ]
    return sorted(tuple(row) for row in df.select(*shown).collect())


def show(rows) -> str:
    """Window rows the way a person reads them: `m1 [10:00:00, 10:00:10) 3`."""

    def clock(text):
        return text[11:] if isinstance(text, str) and len(text) > 11 else text

    return "\n".join(f"{m} [{clock(a)}, {clock(b)}) {n}" for a, b, m, n in rows) or "nothing"


def reference_final_counts(heartbeats, size="10 seconds", delay="5 seconds"):
    """What 2.3 asks for: the check's own, so 2.4 and 2.8 do not depend on the learner's."""
    return (
        heartbeats.withWatermark("event_time", delay)
        .groupBy(F.window("event_time", size), "machine_name")
        .agg(F.count("*").alias("heartbeats"))
        .select(*window_bounds(), "machine_name", "heartbeats")
    )


def ran(query: StreamingQuery) -> list[dict]:
    """The progress reports of micro-batches that ran (not of triggers that found nothing)."""
    return [p for p in query.recentProgress if "addBatch" in p.get("durationMs", {})]


def string_tuples(width: int):
    """Accepts a list (or tuple) of tuples of ``width`` strings."""
    return list_of(
        lambda r: isinstance(r, list | tuple) and len(r) == width and all(map(is_str, r))
    )
