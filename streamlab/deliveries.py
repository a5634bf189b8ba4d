"""Play a stream's input as deliveries, one micro-batch each, and record what each batch did.

A *delivery* is a list of JSON rows that arrives together: one file in a folder that Spark
reads as a stream. Lab 09's cells and checks tell a story this way, on two kinds of run:

- :func:`run_deliveries`: every delivery is written before the query starts, the source reads
  them one file per micro-batch (``maxFilesPerTrigger`` 1, :func:`read_deliveries`) and an
  ``availableNow`` trigger runs the query to the end. Delivery N is batch N, whatever the
  machine's speed, and Spark adds one batch without data at the end when the watermark moved.
- :func:`feed`: one more delivery to a query that is already running, waited for until the
  query has read it, for stories that change something between two micro-batches.

Each batch's output is recorded with its progress: the watermark in force, the rows in each
stateful operator's state, the rows dropped as late. Timestamps in recorded rows are the
text Spark writes in the session's time zone (``2026-11-22 10:00:12``), so a run prints the
same on every machine.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from streamlab.deadlines import drain, finish

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.streaming import StreamingQuery

#: Modification time of the first delivery: the file source takes new files in this order.
_FIRST_MTIME = 1_700_000_000
NO_DATA_BATCHES = "spark.sql.streaming.noDataMicroBatches.enabled"


def write_deliveries(folder: str | Path, deliveries: Sequence[Sequence[dict]]) -> None:
    """Write each delivery as one JSON-lines file in ``folder``, after any already there."""
    for rows in deliveries:
        deliver(folder, rows)


def deliver(folder: str | Path, rows: Sequence[dict]) -> Path:
    """One more delivery: a JSON-lines file, complete when Spark can first see it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    number = sum(1 for p in folder.iterdir() if p.suffix == ".json")
    return deliver_file(folder, f"delivery-{number:04d}", rows, order=number)


def deliver_file(
    folder: str | Path, name: str, rows: Iterable[dict], order: int | None = 0
) -> Path:
    """``rows`` as ``folder/name.json``, one JSON object a line, written under a hidden name and
    renamed, so that Spark never reads it half written. ``order`` (0, 1, ...) sets the file's
    modification time, which is the order the file source takes new files in; ``None`` leaves
    the time of writing."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    hidden = folder / f".{name}.tmp"  # Spark ignores names starting with a dot
    hidden.write_text("".join(json.dumps(row) + "\n" for row in rows))
    if order is not None:
        stamp = _FIRST_MTIME + order
        os.utime(hidden, (stamp, stamp))
    path = folder / f"{name}.json"
    os.replace(hidden, path)
    return path


def read_deliveries(spark, folder: str | Path, schema) -> DataFrame:
    """The deliveries in ``folder`` as a stream that reads one of them per micro-batch."""
    return spark.readStream.schema(schema).option("maxFilesPerTrigger", 1).json(str(folder))


@dataclass
class Batch:
    """One micro-batch: its progress, and the rows it emitted."""

    batch_id: int
    input_rows: int
    watermark: str  # the watermark in force during the batch, as the progress report says it
    operators: list[str]  # the stateful operators, in the progress report's order
    state_rows: list[int]  # rows in each one's state after the batch
    dropped_as_late: int
    rows: list[dict] = field(default_factory=list)
    #: The batch's progress report as Spark gave it (``TimeView`` draws from it).
    progress: dict = field(default_factory=dict, repr=False)


def _plain(df: DataFrame) -> list[dict]:
    """Rows as dicts, timestamps (nested ones too) as the text Spark writes in the session's
    time zone."""
    from pyspark.sql import functions as F

    columns = []
    for f in df.schema.fields:
        text = _timestamps_as_text(f.dataType)
        columns.append(
            F.col(f.name).cast(text).alias(f.name) if text != f.dataType else F.col(f.name)
        )
    return [row.asDict(recursive=True) for row in df.select(*columns).collect()]


def _timestamps_as_text(data_type):
    """``data_type`` with every timestamp in it, at any depth, a string."""
    from pyspark.sql.types import ArrayType, StringType, StructField, StructType, TimestampType

    if isinstance(data_type, TimestampType):
        return StringType()
    if isinstance(data_type, StructType):
        return StructType(
            [
                StructField(f.name, _timestamps_as_text(f.dataType), f.nullable)
                for f in data_type.fields
            ]
        )
    if isinstance(data_type, ArrayType):
        return ArrayType(_timestamps_as_text(data_type.elementType), data_type.containsNull)
    return data_type


def batches_of(query: StreamingQuery, emitted: dict[int, list[dict]]) -> list[Batch]:
    """The query's recent progress reports, each with what ``emitted`` says its batch wrote."""
    batches = []
    for progress in query.recentProgress:
        operators = progress.get("stateOperators") or []
        batches.append(
            Batch(
                batch_id=progress["batchId"],
                input_rows=progress["numInputRows"],
                watermark=progress.get("eventTime", {}).get("watermark", "-"),
                operators=[op.get("operatorName", "") for op in operators],
                state_rows=[op.get("numRowsTotal", 0) for op in operators],
                dropped_as_late=sum(op.get("numRowsDroppedByWatermark", 0) for op in operators),
                rows=emitted.get(progress["batchId"], []),
                progress=json.loads(progress.json),
            )
        )
    return batches


class Recorded(dict):
    """Batch id -> the rows it emitted, as a ``foreachBatch`` function of :func:`recorder` saw them.

    On a classic session the function runs in this process and fills the dict. Over Spark
    Connect it runs in the server's Python process, which cannot reach this dict: it leaves
    each batch's rows in ``folder`` instead (the course's server shares this machine's disk),
    and every read of the dict takes in what is there first.
    """

    def __init__(self, folder: Path) -> None:
        super().__init__()
        self.folder = folder

    def _take_in(self) -> None:
        import pickle

        for path in sorted(self.folder.glob("*.pickle")):
            super().__setitem__(int(path.stem), pickle.loads(path.read_bytes()))

    def __getitem__(self, batch_id: int) -> list[dict]:
        self._take_in()
        return super().__getitem__(batch_id)

    def __iter__(self):
        self._take_in()
        return super().__iter__()

    def __contains__(self, batch_id: object) -> bool:
        self._take_in()
        return super().__contains__(batch_id)

    def __len__(self) -> int:
        self._take_in()
        return super().__len__()

    def get(self, batch_id: int, default: Any = None) -> Any:
        self._take_in()
        return super().get(batch_id, default)

    def keys(self):
        self._take_in()
        return super().keys()

    def items(self):
        self._take_in()
        return super().items()

    def values(self):
        self._take_in()
        return super().values()


def recorder() -> tuple[dict[int, list[dict]], Callable[[Any, int], None]]:
    """A ``foreachBatch`` function and the dict it fills: batch id -> the rows it emitted.

    A batch that Spark runs again after a failure replaces its first attempt's rows. Over
    Spark Connect the dict is filled through a folder under ``build/`` (see :class:`Recorded`).
    """
    import tempfile

    from streamlab.paths import BUILD_DIR

    (BUILD_DIR / "recorded").mkdir(parents=True, exist_ok=True)
    emitted = Recorded(Path(tempfile.mkdtemp(dir=BUILD_DIR / "recorded")))
    folder = emitted.folder

    def record(df, batch_id: int) -> None:
        rows = _plain(df)
        if type(df).__module__.startswith("pyspark.sql.connect."):
            import pickle

            written = folder / f"{batch_id}.pickle.part"
            written.write_bytes(pickle.dumps(rows))
            written.replace(folder / f"{batch_id}.pickle")
        else:
            dict.__setitem__(emitted, batch_id, rows)

    return emitted, record


def run_deliveries(
    df: DataFrame,
    checkpoint: str | Path,
    *,
    output_mode: str = "append",
    no_data_batches: bool = True,
    timeout: float = 300,
) -> list[Batch]:
    """Run ``df`` over every delivery with ``availableNow``; return its batches in order.

    ``no_data_batches=False`` turns off Spark's batches without data while the query starts
    (a processing-time ``transformWithState`` would otherwise never let ``availableNow`` end).
    """
    spark = df.sparkSession
    emitted, record = recorder()
    writer = (
        df.writeStream.outputMode(output_mode)
        .foreachBatch(record)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
    )
    if no_data_batches:
        query = writer.start()
    else:
        spark.conf.set(NO_DATA_BATCHES, "false")
        try:
            query = writer.start()
        finally:
            spark.conf.unset(NO_DATA_BATCHES)
    finish(query, within=timeout, what="the query to read every delivery")
    return batches_of(query, emitted)


def feed(
    query: StreamingQuery, folder: str | Path, rows: Sequence[dict], *, timeout: float = 300
) -> None:
    """Deliver ``rows`` to a running query and wait until it has read them.

    Waits until the query's progress counts ``rows`` more input rows than before the delivery
    (its source must count each row it reads: no filter pushed into the file scan; and the
    progress kept is the last 100 batches), then until it has run whatever batch without data
    follows.
    """
    read_before = _rows_read(query)
    deliver(folder, rows)
    deadline = time.monotonic() + timeout
    what = f"the query to read the {len(rows)} row(s) delivered to {folder}"

    def catch_up() -> None:
        drain(query, within=max(1.0, deadline - time.monotonic()), what=what)

    catch_up()
    # processAllAvailable can return before the query has seen a file written just before
    # it was called; it returns only once the query is idle, so ask again until it has.
    while _rows_read(query) < read_before + len(rows):
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"the query had not read the {len(rows)} row(s) delivered to {folder} after "
                f"{timeout:.0f} s"
            )
        catch_up()
    catch_up()


def _rows_read(query: StreamingQuery) -> int:
    return sum(p["numInputRows"] for p in query.recentProgress)
