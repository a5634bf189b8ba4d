"""Delta Lake tables from ``foreachBatch``, exactly once, without JARs.

Spark's own Delta writer needs JARs that an offline laptop cannot fetch; ``deltalake``
(delta-rs, Arrow-native, no JVM) writes and reads the same tables. :func:`delta_writer`
returns a ``foreachBatch`` function that appends each micro-batch through Arrow
(``DataFrame.toArrow()``) and is idempotent per (query, batch id), the way Spark's Delta
writer is with the options ``txnAppId`` / ``txnVersion``:

1. the batch's rows are written as new parquet files in the table's folder;
2. one commit adds those files to the table's log **together with** a transaction
   identifier ``(app id, batch id)``: the app id names the query, the version is the batch.

A commit is atomic: until it lands, the new files belong to no version of the table and no
reader sees them. Before writing, the function asks the table for the last batch committed
for its app id (``DeltaTable.transaction_version``) and skips a batch at or below it. So a
batch that Spark replays after a crash, a kill -9 or a failed attempt is written once:

- killed before the commit: the files of the lost attempt stay on disk, unread (``VACUUM``
  removes such files later); the replay writes the batch again and commits it;
- killed after the commit but before Spark recorded the batch as done: the replay finds
  the batch in the table and writes nothing, without computing the batch again.

Example::

    from streamlab.delta import delta_writer, read_table

    query = (samples.writeStream.foreachBatch(delta_writer("build/lake/samples"))
             .option("checkpointLocation", "build/checkpoints/samples").start())
    ...
    read_table("build/lake/samples")              # pyarrow.Table, the latest version
    read_table("build/lake/samples", version=3)   # what the table held at version 3

A table's schema comes from the first batch's DataFrame (every column nullable, as Spark's
Delta writer makes them); a later batch whose columns differ raises
:class:`DeltaSchemaMismatch` with a sentence naming the table, the column and both types.
Each batch is collected to the driver as Arrow: right for the course's micro-batches, not
for batches of many gigabytes.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq
from deltalake import CommitProperties, DeltaTable, Schema, Transaction
from deltalake.transaction import AddAction, create_table_with_add_actions

if TYPE_CHECKING:
    from deltalake.transaction import RemoveAction
    from pyspark.sql import DataFrame

__all__ = ["DeltaSchemaMismatch", "delta_writer", "fan_out", "read_table"]

BatchFunction = Callable[["DataFrame", int], None]

#: The local property Spark sets on the thread that runs a query's micro-batches.
_QUERY_ID_PROPERTY = "sql.streaming.queryId"


class DeltaSchemaMismatch(ValueError):
    """A batch's columns do not match those of the Delta table it is written to."""


def delta_writer(path: str | os.PathLike[str], app_id: str | None = None) -> BatchFunction:
    """A ``foreachBatch`` function appending each micro-batch to the Delta table at ``path``.

    ``app_id`` names the writer in the table's transaction identifiers. Left out, it is the
    streaming query's id, which Spark keeps in the checkpoint: a restarted query keeps its
    app id, and a query started on a new checkpoint gets a new one, so its batch ids, which
    start again at 0, are not mistaken for batches already written. Give a fixed name only
    to a writer whose checkpoint is never replaced (or change the name when it is), and
    always when calling the function outside a streaming query.
    """
    table = Path(path)

    def write(batch: DataFrame, batch_id: int) -> None:
        writer = app_id if app_id is not None else _query_id(batch)
        _append(table, batch.toArrow, writer, int(batch_id))

    return write


def fan_out(*writers: BatchFunction) -> BatchFunction:
    """One ``foreachBatch`` function that hands each batch to every writer, in order.

    The batch is cached while they run, so the micro-batch is computed once, not once per
    writer. Each writer must be idempotent on its own (a retried batch runs all of them
    again): :func:`delta_writer` and ``streamlab.monitor.batch_writer`` both are.
    """

    def write(batch: DataFrame, batch_id: int) -> None:
        batch.persist()
        try:
            for writer in writers:
                writer(batch, batch_id)
        finally:
            batch.unpersist()

    return write


def read_table(path: str | os.PathLike[str], version: int | None = None) -> pa.Table:
    """The Delta table at ``path`` as Arrow: its latest version, or ``version`` (time travel).

    Only files the table's log names are read, never files of an attempt that was not
    committed.
    """
    location = Path(path)
    if not DeltaTable.is_deltatable(str(location)):
        raise FileNotFoundError(
            f"There is no Delta table at {location} yet: a table exists "
            "once the first batch has been written to it."
        )
    return DeltaTable(str(location), version=version).to_pyarrow_table()


def _query_id(batch: DataFrame) -> str:
    # foreachBatch runs on the query's own thread, which carries the query's id.
    try:
        query_id = batch.sparkSession.sparkContext.getLocalProperty(_QUERY_ID_PROPERTY)
    except Exception:  # Spark Connect has no SparkContext on the client
        query_id = None
    if not query_id and type(batch).__module__.startswith("pyspark.sql.connect."):
        raise ValueError(
            "delta_writer(path) names its writes after the streaming query that calls it, "
            "and over Spark Connect a foreachBatch function runs in the server's Python "
            "process, which cannot read its query's id: pass app_id='a name for the writer' "
            "(a new name whenever the query's checkpoint is replaced), or use a classic session."
        )
    if not query_id:
        raise ValueError(
            "delta_writer(path) names its writes after the streaming query that "
            "calls it, and this call is not inside a query's foreachBatch: pass "
            "app_id='a name for the writer'."
        )
    return query_id


def _append(table: Path, rows: Callable[[], pa.Table], app_id: str, batch_id: int) -> bool:
    """Write ``rows()`` as batch ``batch_id`` of ``app_id`` unless the table holds it already.

    ``rows`` is called only for a batch to write: a replayed batch is not even computed.
    """
    if not DeltaTable.is_deltatable(str(table)):
        data = rows()
        schema = _table_schema(data.schema, table)
        table.mkdir(parents=True, exist_ok=True)
        files = _write_files(table, data, schema, batch_id)
        _create(table, schema, files, app_id, batch_id)
        return True
    current = DeltaTable(str(table))
    done = current.transaction_version(app_id)
    if done is not None and done >= batch_id:
        return False
    data = rows()
    existing = _nullable(Schema.from_json(current.schema().to_json()))
    _check_schema(table, existing, _table_schema(data.schema, table))
    if data.num_rows == 0:
        return False
    files = _write_files(table, data, existing, batch_id)
    _commit(current, files, app_id, batch_id)
    return True


def _write_files(table: Path, data: pa.Table, schema: Schema, batch_id: int) -> list[AddAction]:
    """Step 1: the batch as a new parquet file in the table's folder, in no version yet."""
    if data.num_rows == 0:
        return []
    target = pa.schema(schema.to_arrow())
    rows = data.select(target.names).cast(target)
    name = f"part-{batch_id:05d}-{uuid.uuid4()}.snappy.parquet"
    pq.write_table(rows, table / name, compression="snappy")
    status = (table / name).stat()
    return [
        AddAction(
            path=name,
            size=status.st_size,
            partition_values={},
            modification_time=int(status.st_mtime * 1000),
            data_change=True,
            stats=json.dumps({"numRecords": rows.num_rows}),
        )
    ]


def _transaction(app_id: str, batch_id: int) -> CommitProperties:
    return CommitProperties(app_transactions=[Transaction(app_id=app_id, version=batch_id)])


def _create(
    table: Path, schema: Schema, files: list[AddAction], app_id: str, batch_id: int
) -> None:
    """Step 2 for a new table: version 0 holds the schema, the files and the transaction."""
    create_table_with_add_actions(
        str(table), schema, files, mode="append", commit_properties=_transaction(app_id, batch_id)
    )


def _commit(current: DeltaTable, files: list[AddAction], app_id: str, batch_id: int) -> None:
    """Step 2: one atomic commit adds the files and records (app id, batch id)."""
    actions: list[AddAction | RemoveAction] = list(files)  # adds only: nothing is removed
    current.create_write_transaction(
        actions,
        mode="append",
        schema=current.schema(),
        commit_properties=_transaction(app_id, batch_id),
    )


def _table_schema(arrow: pa.Schema, table: Path) -> Schema:
    """The Delta schema of a batch, every column nullable; a sentence for a column Delta cannot hold."""
    for field in arrow:
        try:
            Schema.from_arrow(pa.schema([field]))
        except Exception:
            raise DeltaSchemaMismatch(
                f"The column {field.name!r} has the Arrow type {field.type}, which a Delta "
                f"table cannot hold, so the batch cannot be written to {_name(table)}: cast "
                "it to a type Delta has (a string, a number, a timestamp, ...)."
            ) from None
    return _nullable(Schema.from_arrow(arrow))


def _nullable(schema: Schema) -> Schema:
    def loosen(node):
        if isinstance(node, dict):
            node = {key: loosen(value) for key, value in node.items()}
            for flag in ("nullable", "containsNull", "valueContainsNull"):
                if flag in node:
                    node[flag] = True
        elif isinstance(node, list):
            node = [loosen(item) for item in node]
        return node

    return Schema.from_json(json.dumps(loosen(json.loads(schema.to_json()))))


def _check_schema(table: Path, existing: Schema, batch: Schema) -> None:
    has = {field["name"]: field["type"] for field in json.loads(existing.to_json())["fields"]}
    got = {field["name"]: field["type"] for field in json.loads(batch.to_json())["fields"]}
    for name, kind in got.items():
        if name not in has:
            raise DeltaSchemaMismatch(
                f"The Delta table {_name(table)} has no column {name!r} (its columns are "
                f"{', '.join(has)}), but the batch has it as {_type(kind)}: write this query to "
                "a new table, or select only the table's columns."
            )
        if has[name] != kind:
            raise DeltaSchemaMismatch(
                f"The Delta table {_name(table)} has the column {name!r} as {_type(has[name])}, "
                f"but the batch has it as {_type(kind)}: write this query to a new table, or "
                "cast the column to the table's type."
            )
    for name, kind in has.items():
        if name not in got:
            raise DeltaSchemaMismatch(
                f"The Delta table {_name(table)} has the column {name!r} ({_type(kind)}), but "
                f"the batch has no such column (its columns are {', '.join(got)}): write this "
                "query to a new table, or add the column to the batch."
            )


def _name(table: Path) -> str:
    return f"{table.name!r} (at {table})"


def _type(kind) -> str:
    """A Delta type as Spark's DDL spells it: ``struct<t: timestamp, f: double>``."""
    if isinstance(kind, str):
        return kind
    if kind["type"] == "struct":
        return (
            "struct<" + ", ".join(f"{f['name']}: {_type(f['type'])}" for f in kind["fields"]) + ">"
        )
    if kind["type"] == "array":
        return f"array<{_type(kind['elementType'])}>"
    if kind["type"] == "map":
        return f"map<{_type(kind['keyType'])}, {_type(kind['valueType'])}>"
    return json.dumps(kind)
