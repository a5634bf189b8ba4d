"""What lab 09's checks share: the registry, the stories, and runs of a query over
deliveries.

Every check runs Spark on deliveries it writes itself (``streamlab.deliveries``): one file per
micro-batch, run to the end with ``availableNow``, so batch N is delivery N and every verdict
depends on the data only. A check that needs a change between two micro-batches of a running
query (9.2) feeds it one delivery at a time. The registry is a parquet table in the session's
catalog, as in the notebook. Times are compared as the text Spark writes in UTC.
"""

from datetime import timedelta

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlab.deliveries import read_deliveries, run_deliveries
from streamlab.kit import (
    HEALTHY,
    START,
    UNHEALTHY,
    CheckFailed,
    is_not_done,
    query_cause,
)

REGISTRY_DDL = "machine_name STRING, site STRING, owner STRING, session_gap_seconds INT"


STORY_DDL = (
    "kind STRING, machine_name STRING, status STRING, previous_status STRING, "
    "last_status_change_time TIMESTAMP, maintenance_start TIMESTAMP, maintenance_end TIMESTAMP"
)


def at(second: int) -> str:
    return (START + timedelta(seconds=second)).isoformat()


def shown(second: int) -> str:
    """How Spark writes START + ``second`` as text in a UTC session."""
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def change(machine: str, second: int, status: str = UNHEALTHY) -> dict:
    return {
        "kind": "change",
        "machine_name": machine,
        "status": status,
        "previous_status": HEALTHY if status == UNHEALTHY else UNHEALTHY,
        "last_status_change_time": at(second),
    }


def window(machine: str, start: int, end: int) -> dict:
    return {
        "kind": "window",
        "machine_name": machine,
        "maintenance_start": at(start),
        "maintenance_end": at(end),
    }


def streams(spark, folder) -> tuple[DataFrame, DataFrame]:
    """(changes, windows) from one folder of deliveries, as the notebook splits them."""
    rows = read_deliveries(spark, folder, STORY_DDL)
    changes = rows.where(F.col("kind") == "change").select(
        "machine_name", "status", "previous_status", "last_status_change_time"
    )
    windows = rows.where(F.col("kind") == "window").select(
        "machine_name", "maintenance_start", "maintenance_end"
    )
    return changes, windows


def run(df: DataFrame, checkpoint, **options):
    """The batches of ``df`` over its deliveries; a failed query becomes a sentence."""
    try:
        return run_deliveries(df, checkpoint, **options)
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(f"The query failed: {query_cause(error)}") from None


def per_batch(batches, describe) -> dict[int, list]:
    """Batch id -> the sorted descriptions of the rows it emitted, for batches that did."""
    return {b.batch_id: sorted(describe(r) for r in b.rows) for b in batches if b.rows}


def join_state(spark, checkpoint, side: str, batch_id: int | None = None) -> list[tuple]:
    """(machine, time as UTC text) of every row of one side of a join's state, sorted: after
    the last batch, or after ``batch_id``.

    The machine is the value's first string field; the time its first timestamp field, or for
    the windows the one named like a start, whatever the learner renamed on the way.
    """
    from pyspark.sql.types import StringType, TimestampType

    reader = spark.read.format("statestore").option("joinSide", side)
    if batch_id is not None:
        reader = reader.option("batchId", batch_id)
    rows = reader.load(str(checkpoint))
    fields = rows.schema["value"].dataType.fields
    machine = next(f.name for f in fields if isinstance(f.dataType, StringType))
    times = [f.name for f in fields if isinstance(f.dataType, TimestampType)]
    time = next((n for n in times if n.endswith("start")), times[0])
    values = rows.select(
        F.col("value").getField(machine), F.col("value").getField(time).cast("string")
    ).collect()
    return sorted((name, at) for name, at in values)


REGISTRY_ROWS = [
    ("m1", "Lyon", "ops-lyon", 10),
    ("m2", "Oslo", None, 30),
    ("m9", "Bergen", "ops-bergen", 10),  # a machine with no transitions
]


def _maintenance_join(nb, changes: DataFrame, windows: DataFrame):
    """The Unhealthy changes (watermarked, as ``c``), the windows as given (``w``), and the
    condition that pairs a change with a window of its machine that it falls in."""
    left = (
        changes.where(F.col("status") == UNHEALTHY)
        .withWatermark("last_status_change_time", nb.CHANGES_DELAY)
        .alias("c")
    )
    t = F.col("c.last_status_change_time")
    condition = (
        (F.col("c.machine_name") == F.col("w.machine_name"))
        & (t >= F.col("w.maintenance_start"))
        & (t <= F.col("w.maintenance_end"))
        & (t <= F.col("w.maintenance_start") + F.expr(f"INTERVAL {nb.LONGEST_MAINTENANCE}"))
    )
    return left, windows.alias("w"), condition


def _join_settings(nb, story) -> list:
    """What a run of the course's join takes from the notebook: the story and the delays."""
    return [story, nb.CHANGES_DELAY, nb.WINDOWS_DELAY, nb.LONGEST_MAINTENANCE]
