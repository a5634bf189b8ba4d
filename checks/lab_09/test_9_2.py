"""Checks of exercise 9.2 · The registry as it is now, at every micro-batch.

A registry changed four ways under a running query, each change seen by the next batch.
"""

import uuid
from pathlib import Path

from story_09 import (
    REGISTRY_DDL,
    REGISTRY_ROWS,
    at,
)

from streamlab.deliveries import feed
from streamlab.kit import (
    TRANSITION_DDL,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_equal,
    is_not_done,
    query_cause,
)


def registry_table(spark, tmp_path, rows) -> str:
    """A parquet table in the session's catalog holding ``rows``; returns its name."""
    name = f"registry_{uuid.uuid4().hex[:12]}"
    spark.sql(
        f"CREATE TABLE {name} ({REGISTRY_DDL}) USING parquet LOCATION '{tmp_path / 'registry'}'"
    )
    spark.createDataFrame(rows, REGISTRY_DDL).write.insertInto(name)
    return name


def _written_by_another_program(folder: Path, machine: str, site: str) -> None:
    """A registry row as another program writes it: a parquet file of its own in the table."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    row = {"machine_name": machine, "site": site, "owner": None, "session_gap_seconds": 10}
    schema = pa.schema(
        [
            ("machine_name", pa.string()),
            ("site", pa.string()),
            ("owner", pa.string()),
            ("session_gap_seconds", pa.int32()),
        ]
    )
    table = pa.Table.from_pylist([row], schema=schema)
    pq.write_table(table, folder / f"{machine}.parquet")


def _changes(spark, name: str, folder: Path) -> list[tuple]:
    """The registry's changes, one before each micro-batch: (make it, what it is)."""
    return [
        (lambda: None, "the registry as created"),
        (
            lambda: spark.sql(f"INSERT INTO {name} VALUES ('m4', 'Rome', 'ops-rome', 10)"),
            "an INSERT INTO registering m4 in Rome",
        ),
        (
            lambda: _written_by_another_program(folder, "m5", "Bergen"),
            "a file from another program: m5 in Bergen",
        ),
        (
            lambda: spark.sql(f"INSERT INTO {name} VALUES ('m6', 'Kyiv', 'ops-kyiv', 10)"),
            "a second INSERT INTO: m6 in Kyiv",
        ),
        (
            lambda: spark.sql(f"INSERT OVERWRITE {name} VALUES ('m1', 'Paris', 'ops-paris', 10)"),
            "an INSERT OVERWRITE: only m1, now in Paris",
        ),
    ]


def _run_with_changes(nb, spark, tmp_path: Path, changes, write) -> None:
    """The learner's foreachBatch function on a stream of four machines' transitions, the
    registry changed before each micro-batch."""
    incoming = tmp_path / "transitions"
    incoming.mkdir()
    each_batch = nb.with_registry_each_batch(str(tmp_path / "registry"), write)
    if not callable(each_batch):
        raise CheckFailed(
            f"with_registry_each_batch() should return a function for foreachBatch; it "
            f"returned {type(each_batch).__name__}."
        )
    query = (
        spark.readStream.schema(TRANSITION_DDL)
        .json(str(incoming))
        .writeStream.foreachBatch(each_batch)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .start()
    )
    try:
        for second, (change_registry, _) in enumerate(changes):
            change_registry()
            feed(
                query,
                incoming,
                [
                    {
                        "machine_name": m,
                        "status": UNHEALTHY,
                        "last_status_change_time": at(second),
                    }
                    for m in ("m1", "m4", "m5", "m6")
                ],
            )
    finally:
        query.stop()


@exercise("9.2", timeout=240)
def test_every_registry_change_shows_in_the_next_micro_batch(nb, spark, tmp_path):
    name = registry_table(spark, tmp_path, REGISTRY_ROWS)
    calls: list[tuple] = []

    def write(df, batch_id):
        calls.append((batch_id, sorted((r.machine_name, r.site) for r in df.collect())))

    changes = _changes(spark, name, tmp_path / "registry")
    try:
        _run_with_changes(nb, spark, tmp_path, changes, write)
    except CheckFailed:
        raise
    except Exception as error:
        if is_not_done(error):
            raise
        raise CheckFailed(f"The query failed: {query_cause(error)}") from None
    finally:
        spark.sql(f"DROP TABLE IF EXISTS {name}")
    unregistered = nb.UNREGISTERED
    expect_equal(
        calls,
        [
            (0, [("m1", "Lyon"), ("m4", unregistered), ("m5", unregistered), ("m6", unregistered)]),
            (1, [("m1", "Lyon"), ("m4", "Rome"), ("m5", unregistered), ("m6", unregistered)]),
            (2, [("m1", "Lyon"), ("m4", "Rome"), ("m5", "Bergen"), ("m6", unregistered)]),
            (3, [("m1", "Lyon"), ("m4", "Rome"), ("m5", "Bergen"), ("m6", "Kyiv")]),
            (
                4,
                [("m1", "Paris"), ("m4", unregistered), ("m5", unregistered), ("m6", unregistered)],
            ),
        ],
        "Five micro-batches of the same four machines, the registry changed before each: "
        + "; ".join(f"batch {n}, {what}" for n, (_, what) in enumerate(changes))
        + ". The calls to write, as (batch id, [(machine, site)]): one per micro-batch, in order.",
        hint="A registry read once, outside the function foreachBatch calls, never changes: read "
        "it inside, for every batch.",
    )
