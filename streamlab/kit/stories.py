"""What the labs' checks build their stories from, written once.

- :data:`START`: the moment every check's story starts (event times are seconds after it);
  :data:`START_MS` the same in epoch milliseconds.
- :data:`INITIALIZING`, :data:`HEALTHY`, :data:`UNHEALTHY`: the three states of a machine.
- :data:`TRANSITION_FIELDS`, :data:`TRANSITION_DDL`: a status transition's columns (the
  monitor's output); :data:`HEARTBEAT_DDL`: a parsed heartbeat's.
- :func:`heartbeat_line`: a heartbeat as a producer sends it (``streamlab.fleet``);
  :func:`write_heartbeats`: heartbeats as a JSON-lines file (:func:`deliver_file`).
- :func:`deliver_file` (from :mod:`streamlab.deliveries`): one named JSON-lines file for a
  file-source story, complete when Spark can first see it, in an order the file source keeps.
- :data:`HUB_ARROW_SCHEMA`, :data:`HUB_SYSTEM_ARROW_SCHEMA`: the ``eventhubs`` source's row
  schema (:data:`streamlab.eventhubs.SCHEMA`) as Arrow, for parquet files that stand in for an
  event hub, without and with ``systemProperties``.
- :func:`crash_before_commit`: what a driver killed between a batch's output and its commit
  leaves in a checkpoint.
- :func:`window_bounds`: a window's bounds as the columns ``window_start`` and ``window_end``.
- :func:`is_not_done`: an error that is an earlier exercise's stub ("exercise 4.2 is not done
  yet"), possibly wrapped by Spark, which a check lets through instead of blaming the cell.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from pyspark.sql import functions as F

from streamlab.course.notebooks import NOT_DONE
from streamlab.deliveries import deliver_file

__all__ = [
    "HEALTHY",
    "HEARTBEAT_DDL",
    "HUB_ARROW_SCHEMA",
    "HUB_SYSTEM_ARROW_SCHEMA",
    "INITIALIZING",
    "START",
    "START_MS",
    "TRANSITION_DDL",
    "TRANSITION_FIELDS",
    "UNHEALTHY",
    "crash_before_commit",
    "deliver_file",
    "heartbeat_line",
    "is_not_done",
    "window_bounds",
    "write_heartbeats",
]

#: When every check's story starts.
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)
#: :data:`START` in milliseconds since the epoch.
START_MS = round(START.timestamp() * 1000)

#: The three states of a machine.
INITIALIZING, HEALTHY, UNHEALTHY = "Initializing", "Healthy", "Unhealthy"

#: A status transition's columns, in order, and the same as a Spark DDL schema.
TRANSITION_FIELDS = ["machine_name", "status", "previous_status", "last_status_change_time"]
TRANSITION_DDL = (
    "machine_name STRING, status STRING, previous_status STRING, last_status_change_time TIMESTAMP"
)
#: A parsed heartbeat's columns.
HEARTBEAT_DDL = "machine_name STRING, machine_time TIMESTAMP"


def heartbeat_line(machine: str, machine_time: str) -> str:
    """One heartbeat as a producer's JSON: ``{"machine_name": ..., "machine_time": ...}``."""
    return json.dumps({"machine_name": machine, "machine_time": machine_time})


def crash_before_commit(checkpoint: str | Path) -> None:
    """What a driver killed after a batch's output and before Spark recorded the batch leaves:
    the checkpoint without its newest ``commits/N`` (and that file's checksum)."""
    commits = Path(checkpoint, "commits")
    last = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    for name in (str(last), f".{last}.crc"):
        (commits / name).unlink(missing_ok=True)


def window_bounds() -> list:
    """The ``window`` column of a windowed aggregation as ``window_start`` and ``window_end``,
    for a ``select`` to put before its key and counts."""
    return [
        F.col("window.start").alias("window_start"),
        F.col("window.end").alias("window_end"),
    ]


def write_heartbeats(
    folder: Path, name: str, rows: Iterable[tuple[str, str]], order: int | None = 0
) -> Path:
    """Heartbeats as ``folder/name.json``, one ``(machine, machine_time)`` a line, in the order
    the file source takes them (:func:`deliver_file`: ``order``, or ``None`` for now)."""
    beats = [{"machine_name": machine, "machine_time": at} for machine, at in rows]
    return deliver_file(folder, name, beats, order)


#: The eventhubs source's rows as Arrow (``streamlab.eventhubs.SCHEMA``).
HUB_ARROW_SCHEMA = pa.schema(
    [
        ("body", pa.binary()),
        ("partition", pa.string()),
        ("offset", pa.string()),
        ("sequenceNumber", pa.int64()),
        ("enqueuedTime", pa.timestamp("us", tz="UTC")),
        ("publisher", pa.string()),
        ("partitionKey", pa.string()),
        ("properties", pa.map_(pa.string(), pa.string())),
    ]
)
#: The same with the map the source adds when read with ``systemProperties``.
HUB_SYSTEM_ARROW_SCHEMA = HUB_ARROW_SCHEMA.append(
    pa.field("systemProperties", pa.map_(pa.string(), pa.string()))
)


_NOT_DONE_TAIL = NOT_DONE.split("{id}")[1].strip()  # "is not done yet"


def is_not_done(error: BaseException) -> bool:
    """True when ``error`` is an exercise's stub, raised as it is or inside Spark's error."""
    return _NOT_DONE_TAIL in str(error)
