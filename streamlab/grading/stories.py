"""What the labs' checks build their stories from, written once.

- :data:`START`: the moment every check's story starts (event times are seconds after it).
- :func:`deliver_file` (from :mod:`streamlab.deliveries`): one named JSON-lines file for a
  file-source story, complete when Spark can first see it, in an order the file source keeps.
- :data:`HUB_ARROW_SCHEMA`, :data:`HUB_SYSTEM_ARROW_SCHEMA`: the ``eventhubs`` source's row
  schema (:data:`streamlab.eventhubs.SCHEMA`) as Arrow, for parquet files that stand in for an
  event hub, without and with ``systemProperties``.
- :func:`is_not_done`: an error that is an earlier exercise's stub ("exercise 4.2 is not done
  yet"), possibly wrapped by Spark, which a check lets through instead of blaming the cell.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa

from streamlab.course.notebooks import NOT_DONE
from streamlab.deliveries import deliver_file

__all__ = [
    "HUB_ARROW_SCHEMA",
    "HUB_SYSTEM_ARROW_SCHEMA",
    "START",
    "deliver_file",
    "is_not_done",
]

#: When every check's story starts.
START = datetime(2026, 11, 22, 10, 0, tzinfo=UTC)

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
