"""Checks for lab 09 · The monitor in context.

Every check runs Spark on deliveries it writes itself (``streamlab.deliveries``): one file per
micro-batch, run to the end with ``availableNow``, so batch N is delivery N and every verdict
depends on the data only. A check that needs a change between two micro-batches of a running
query (9.2) feeds it one delivery at a time. The registry is a parquet table in the session's
catalog, as in the notebook. Times are compared as the text Spark writes in UTC.

- 9.1: the registry join on fixed rows and on a stream;
- 9.2: a registry changed four ways under a running query, each change seen by the next batch;
- 9.3: a story of status changes and maintenance windows with an alert per batch expected
  (edges of a window, another machine's window, a late window, a long one), then the join's
  state read back with the state reader;
- 9.4: the learner's prediction against what this file's own join emits for the notebook's story;
- 9.5: the learner's diagnosis against this file's own run of the notebook's found report on
  the notebook's story: each side of the join's state read after every batch, and the inputs
  that carry a watermark in the query's schema;
- 9.6: the in-maintenance report's rows, and its state after the watermark has moved on;
- 9.7: sessions per machine with gaps from the registry, batch by batch;
- 9.8: lab 05's processor and the learner's count in one query, batch by batch.
"""

import functools
import sys
import uuid
from datetime import timedelta
from pathlib import Path

from pyspark import cloudpickle
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlab.deliveries import feed, read_deliveries, run_deliveries, write_deliveries
from streamlab.kit import (
    HEALTHY,
    INITIALIZING,
    START,
    TRANSITION_DDL,
    UNHEALTHY,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
    is_not_done,
    query_cause,
    spark_facts,
)

# Spark's Python workers cannot import this file: send what it defines by value.
cloudpickle.register_pickle_by_value(sys.modules[__name__])

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


def registry_table(spark, tmp_path, rows) -> str:
    """A parquet table in the session's catalog holding ``rows``; returns its name."""
    name = f"registry_{uuid.uuid4().hex[:12]}"
    spark.sql(
        f"CREATE TABLE {name} ({REGISTRY_DDL}) USING parquet LOCATION '{tmp_path / 'registry'}'"
    )
    spark.createDataFrame(rows, REGISTRY_DDL).write.insertInto(name)
    return name


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


# --- 9.1 · the registry join ---------------------------------------------------------------

REGISTRY_ROWS = [
    ("m1", "Lyon", "ops-lyon", 10),
    ("m2", "Oslo", None, 30),
    ("m9", "Bergen", "ops-bergen", 10),  # a machine with no transitions
]
WITH_REGISTRY = TRANSITION_DDL.split(", ")


@exercise("9.1", timeout=120)
def test_every_transition_gets_its_site_and_owner(nb, spark):
    transitions = spark.createDataFrame(
        [
            ("m1", INITIALIZING, None, START, START),
            ("m1", HEALTHY, INITIALIZING, START + timedelta(seconds=1), START),
            ("m2", UNHEALTHY, HEALTHY, START + timedelta(seconds=2), START),
            ("m4", INITIALIZING, None, START + timedelta(seconds=3), START),
        ],
        TRANSITION_DDL + ", noticed_time TIMESTAMP",
    )
    registry = spark.createDataFrame(REGISTRY_ROWS, REGISTRY_DDL)
    columns = [c.split()[0] for c in WITH_REGISTRY] + ["noticed_time", "site", "owner"]
    df = expect_dataframe(nb.with_registry(transitions, registry), "with_registry", columns)
    got = sorted(
        (r.machine_name, r.status, r.site, r.owner)
        for r in df.select("machine_name", "status", "site", "owner").collect()
    )
    expect_equal(
        got,
        [
            ("m1", HEALTHY, "Lyon", "ops-lyon"),
            ("m1", INITIALIZING, "Lyon", "ops-lyon"),
            ("m2", UNHEALTHY, "Oslo", None),
            ("m4", INITIALIZING, nb.UNREGISTERED, None),
        ],
        "Four transitions (m1 twice, m2 with no owner in the registry, m4 not in it) should come "
        "out once each as (machine, status, site, owner); the registry's m9 has no transition.",
        hint="Every transition stays, matched or not; a machine the registry lacks gets the site "
        "UNREGISTERED and a null owner.",
    )


@exercise("9.1", timeout=180)
def test_with_registry_runs_on_a_stream(nb, spark, tmp_path):
    write_deliveries(
        tmp_path / "transitions",
        [
            [{"machine_name": "m2", "status": UNHEALTHY, "last_status_change_time": at(1)}],
            [{"machine_name": "m7", "status": INITIALIZING, "last_status_change_time": at(2)}],
        ],
    )
    stream = read_deliveries(spark, tmp_path / "transitions", TRANSITION_DDL)
    df = nb.with_registry(stream, spark.createDataFrame(REGISTRY_ROWS, REGISTRY_DDL))
    if not isinstance(df, DataFrame) or not df.isStreaming:
        raise CheckFailed(
            "with_registry() on a stream should return a streaming DataFrame: use only "
            "transformations (a join, a select), never collect()."
        )
    got = per_batch(run(df, tmp_path / "checkpoint"), lambda r: (r["machine_name"], r["site"]))
    expect_equal(
        got,
        {0: [("m2", "Oslo")], 1: [("m7", nb.UNREGISTERED)]},
        "Two micro-batches of transitions joined with a registry, as {batch: [(machine, site)]}.",
    )


# --- 9.2 · the registry at every micro-batch -----------------------------------------------


@exercise("9.2", timeout=240)
def test_every_registry_change_shows_in_the_next_micro_batch(nb, spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    name = registry_table(spark, tmp_path, REGISTRY_ROWS)
    incoming = tmp_path / "transitions"
    incoming.mkdir()
    calls: list[tuple] = []

    def write(df, batch_id):
        calls.append((batch_id, sorted((r.machine_name, r.site) for r in df.collect())))

    def another_program(machine: str, site: str) -> None:
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
        pq.write_table(table, tmp_path / "registry" / f"{machine}.parquet")

    changes = [
        (lambda: None, "the registry as created"),
        (
            lambda: spark.sql(f"INSERT INTO {name} VALUES ('m4', 'Rome', 'ops-rome', 10)"),
            "an INSERT INTO registering m4 in Rome",
        ),
        (lambda: another_program("m5", "Bergen"), "a file from another program: m5 in Bergen"),
        (
            lambda: spark.sql(f"INSERT INTO {name} VALUES ('m6', 'Kyiv', 'ops-kyiv', 10)"),
            "a second INSERT INTO: m6 in Kyiv",
        ),
        (
            lambda: spark.sql(f"INSERT OVERWRITE {name} VALUES ('m1', 'Paris', 'ops-paris', 10)"),
            "an INSERT OVERWRITE: only m1, now in Paris",
        ),
    ]
    try:
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


# --- 9.3 · Unhealthy outside maintenance ---------------------------------------------------

# Delays: changes 10 s, windows 30 s; a window lasts 60 s at most.
MAINTENANCE_STORY = [
    [
        change("m1", 10),  # another machine's window covers it: an alert
        change("m2", 12),  # in its window
        change("m3", 11, HEALTHY),  # not Unhealthy: never an alert
        change("m5", 20),  # exactly at its window's start
        change("m6", 40),  # exactly at its window's end
        change("m12", 45),  # its window comes a batch later
        change("m4", 110),
    ],
    [
        window("m2", 5, 20),
        window("m9", 0, 30),
        window("m5", 20, 50),
        window("m6", 15, 40),
        window("m11", 35, 95),  # 60 s long
        window("m9", 60, 70),
    ],
    [window("m12", 40, 50), change("m10", 52)],
    [window("m9", 100, 101)],
    [change("m13", 75)],
    # m11 comes once the watermark has passed its window's start, still inside the window,
    # and again at the window's very end, 60 s after its start.
    [change("m11", 85), change("m11", 95), window("m9", 200, 201)],
]
EXPECTED_ALERTS = {
    2: [("m1", shown(10))],
    4: [("m10", shown(52))],
    6: [("m13", shown(75))],
}


@exercise("9.3", timeout=240)
def test_each_alert_comes_out_once_when_the_watermark_passes_it(nb, spark, tmp_path):
    write_deliveries(tmp_path / "story", MAINTENANCE_STORY)
    df = expect_dataframe(
        nb.outside_maintenance(*streams(spark, tmp_path / "story")),
        "outside_maintenance",
        ["machine_name", "last_status_change_time"],
    )
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: (r["machine_name"], r["last_status_change_time"]))
    expect_equal(
        got,
        EXPECTED_ALERTS,
        "Six deliveries, one micro-batch each, and the batch without data that ends the run: "
        "the alerts each batch emitted, as {batch: [(machine, time)]}. Each Unhealthy change "
        "that no window of its machine covers comes out once, in the first batch whose "
        "watermark has passed it; a change at a window's start or end is inside it.",
        hint="Compare batch by batch: an alert too early means a watermark missing or too short "
        "on one side; a missing or extra one, a condition on the window's ends or the machine; "
        "one for m11, a window forgotten too soon.",
    )
    changes = join_state(spark, tmp_path / "checkpoint", "left")
    windows = join_state(spark, tmp_path / "checkpoint", "right")
    expect_equal(
        {"changes": [m for m, _ in changes], "windows": windows},
        {
            "changes": ["m4"],
            "windows": [
                ("m12", shown(40)),
                ("m9", shown(60)),
                ("m9", shown(100)),
                ("m9", shown(200)),
            ],
        },
        "After the last batch (watermark 10:01:40), the join's state should hold only the change "
        "that can still be alerted (m4 at 10:01:50) and the windows that a change not yet late "
        "could still fall in (started within 60 s of the watermark). Read with the state reader.",
        hint="Spark forgets a window only through a bound on the windows' watermarked column in "
        "the join condition.",
    )


# --- 9.4 · predict -------------------------------------------------------------------------


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


def reference_outside_maintenance(nb, changes: DataFrame, windows: DataFrame) -> DataFrame:
    """The alerts as the exercise defines them, with the notebook's delays."""
    left, right, condition = _maintenance_join(
        nb, changes, windows.withWatermark("maintenance_start", nb.WINDOWS_DELAY)
    )
    return (
        left.join(right, condition, "leftOuter")
        .where(F.col("w.machine_name").isNull())
        .select("c.machine_name", "c.last_status_change_time")
    )


def _normalized(prediction) -> dict:
    if not isinstance(prediction, dict):
        raise CheckFailed(
            f"PREDICTED_ALERTS should be a dict from batch id to a list of machine names; it is "
            f"a {type(prediction).__name__}."
        )
    normalized = {}
    for batch, names in prediction.items():
        if not isinstance(batch, int) or isinstance(batch, bool):
            raise CheckFailed(
                f"The keys of PREDICTED_ALERTS are batch ids, ints; one is {batch!r}."
            )
        if not isinstance(names, list | tuple) or not all(isinstance(n, str) for n in names):
            raise CheckFailed(
                f"Each value of PREDICTED_ALERTS is a list of machine names; batch {batch} has "
                f"{names!r}."
            )
        if names:
            normalized[batch] = sorted(names)
    return normalized


@exercise("9.4", timeout=240)
def test_the_prediction_is_what_spark_emits(nb, spark, tmp_path):
    predicted = _normalized(nb.PREDICTED_ALERTS)

    def alerts() -> dict:
        write_deliveries(tmp_path / "story", nb.PREDICT_STORY)
        batches = run(
            reference_outside_maintenance(nb, *streams(spark, tmp_path / "story")),
            tmp_path / "checkpoint",
        )
        return {
            b: [m for (m,) in rows]
            for b, rows in per_batch(batches, lambda r: (r["machine_name"],)).items()
        }

    spark_says = spark_facts(
        "9.4 the alerts", alerts, check=__file__, given=_join_settings(nb, nb.PREDICT_STORY)
    )
    expect_equal(
        predicted,
        spark_says,
        "PREDICTED_ALERTS against what the left outer join emits for PREDICT_STORY, batch by "
        "batch (batches without alerts left out).",
        hint="Write down both streams' watermarks after every batch; the query's is the smaller, "
        "a batch runs with the one from the batch before, and an availableNow run ends with a "
        "batch without data when its last batch moved the watermark.",
    )


# --- 9.5 · the diagnosis -------------------------------------------------------------------

GROWS, BOUNDED = "grows", "bounded"
#: The join's inputs, the state reader's side of each, and the column of each that a watermark
#: would be on.
INPUTS = {"changes": ("left", "last_status_change_time"), "windows": ("right", "maintenance_start")}


def found_report(nb, changes: DataFrame, windows: DataFrame) -> DataFrame:
    """The in-maintenance report as the notebook's section 3 gives it, with the notebook's delays."""
    left, right, condition = _maintenance_join(nb, changes, windows)
    return left.join(right, condition).select(
        "c.machine_name", "c.last_status_change_time", "w.maintenance_start", "w.maintenance_end"
    )


def _diagnosis(answer) -> dict:
    expect_keys(answer, "DIAGNOSIS", sorted([*INPUTS, "watermarked"]))
    for name in INPUTS:
        expect_that(
            answer[name] in (GROWS, BOUNDED),
            f"DIAGNOSIS[{name!r}] should be GROWS or BOUNDED (the strings {GROWS!r} and "
            f"{BOUNDED!r}).",
            expected=f"{GROWS!r} or {BOUNDED!r}",
            actual=answer[name],
        )
    inputs = answer["watermarked"]
    if isinstance(inputs, str):
        inputs = [inputs]
    expect_that(
        isinstance(inputs, list | tuple | set) and set(inputs) <= set(INPUTS),
        "DIAGNOSIS['watermarked'] should be a list of the inputs that carry a watermark.",
        expected="a list of 'changes', 'windows', both or neither",
        actual=answer["watermarked"],
    )
    return {**{name: answer[name] for name in INPUTS}, "watermarked": sorted(set(inputs))}


def _found_report_shows(nb, spark, tmp_path: Path) -> dict:
    """The found report over DEBUG_STORY: whether each side of its state ever shrank, and the
    inputs whose column carries a watermark."""
    write_deliveries(tmp_path / "story", nb.DEBUG_STORY)
    report = found_report(nb, *streams(spark, tmp_path / "story"))
    batches = run(report, tmp_path / "checkpoint")
    spark_shows: dict[str, object] = {}
    for name, (side, _) in INPUTS.items():
        held = [set(join_state(spark, tmp_path / "checkpoint", side, b.batch_id)) for b in batches]
        removed = any(before - after for before, after in zip(held, held[1:]))
        spark_shows[name] = BOUNDED if removed else GROWS
    spark_shows["watermarked"] = sorted(
        name
        for name, (_, column) in INPUTS.items()
        if "spark.watermarkDelayMs" in report.schema[column].metadata
    )
    return spark_shows


@exercise("9.5", timeout=240)
def test_the_diagnosis_is_what_spark_shows_of_the_found_report(nb, spark, tmp_path):
    diagnosis = _diagnosis(nb.DIAGNOSIS)
    spark_shows = spark_facts(
        "9.5 the found report",
        lambda: _found_report_shows(nb, spark, tmp_path),
        check=__file__,
        given=_join_settings(nb, nb.DEBUG_STORY),
    )
    expect_equal(
        diagnosis,
        spark_shows,
        "DIAGNOSIS against a run of the found report over DEBUG_STORY: for each side of the "
        "join's state, GROWS if no row ever left it from one batch to a later one, BOUNDED if "
        "some did (the state reader, after every batch); and the inputs whose column in the "
        "query's schema carries a watermark.",
        hint="Read each side with the state reader after every batch of the found run "
        "(joinSide, batchId), rather than reasoning from the code alone.",
    )


# --- 9.6 · the report that forgets ---------------------------------------------------------

FIX_STORY = [
    [change("m1", 10), change("m2", 12), change("m3", 15, HEALTHY), change("m4", 50)],
    [window("m1", 5, 20), window("m2", 30, 40), window("m4", 45, 100)],
    [change("m5", 120), window("m5", 110, 130), window("m7", 150, 200)],
    [change("m8", 180), window("m9", 200, 210)],
    [change("m10", 185)],
    # m7 comes once the watermark has passed its window's start, still inside the window.
    [change("m7", 195)],
]


@exercise("9.6", timeout=240)
def test_the_report_finds_the_changes_inside_windows_and_forgets(nb, spark, tmp_path):
    write_deliveries(tmp_path / "story", FIX_STORY)
    columns = ["machine_name", "last_status_change_time", "maintenance_start", "maintenance_end"]
    df = expect_dataframe(
        nb.in_maintenance(*streams(spark, tmp_path / "story")), "in_maintenance", columns
    )
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    expect_equal(
        got,
        {
            1: [("m1", shown(10), shown(5), shown(20)), ("m4", shown(50), shown(45), shown(100))],
            2: [("m5", shown(120), shown(110), shown(130))],
            5: [("m7", shown(195), shown(150), shown(200))],
        },
        "The report's rows, as {batch: [(machine, change, window start, window end)]}: each "
        "Unhealthy change inside a window of its machine, in the batch where both are there.",
        hint="Keep the found query's output and join condition: only what Spark needs to clean up "
        "is missing.",
    )
    changes = join_state(spark, tmp_path / "checkpoint", "left")
    windows = join_state(spark, tmp_path / "checkpoint", "right")
    expect_equal(
        {"changes": [m for m, _ in changes], "windows": windows},
        {
            "changes": ["m10", "m7", "m8"],
            "windows": [("m5", shown(110)), ("m7", shown(150)), ("m9", shown(200))],
        },
        "After the last batch (watermark 10:02:50), the join's state should hold only the changes "
        "not yet past the watermark and the windows that a change could still fall in. Read with "
        "the state reader.",
        hint="Read each side's state after a run of the found query: Spark can clean a side only "
        "from a bound on a column that carries a watermark.",
    )


# --- 9.7 · uptime sessions -----------------------------------------------------------------

SESSION_REGISTRY = [
    ("m1", "Lyon", "ops-lyon", 10),
    ("m2", "Lyon", "ops-lyon", 30),
    ("m3", "Oslo", "ops-oslo", None),  # no gap: the default
    ("m5", "Oslo", "ops-oslo", 4),
]  # m4 is not registered: the default


def beat(machine: str, second: int) -> dict:
    return {"machine_name": machine, "event_time": at(second)}


SESSION_STORY = [
    [beat("m1", 0), beat("m1", 4), beat("m2", 0), beat("m3", 0), beat("m4", 2), beat("m5", 0)],
    # m1 and m5 exactly one gap after their last heartbeat; m4 one second more.
    [beat("m1", 14), beat("m2", 25), beat("m3", 7), beat("m4", 13), beat("m5", 4)],
    [beat("m1", 40), beat("m2", 50), beat("m5", 22)],
    [beat("m1", 100)],
]


@exercise("9.7", timeout=240)
def test_sessions_close_per_machine_gap(nb, spark, tmp_path):
    write_deliveries(tmp_path / "heartbeats", SESSION_STORY)
    heartbeats = read_deliveries(spark, tmp_path / "heartbeats", nb.HEARTBEAT_DDL)
    registry = spark.createDataFrame(SESSION_REGISTRY, REGISTRY_DDL)
    columns = ["machine_name", "session_start", "session_end", "heartbeats"]
    df = expect_dataframe(nb.uptime_sessions(heartbeats, registry), "uptime_sessions", columns)
    batches = run(df, tmp_path / "checkpoint")
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    expect_equal(
        got,
        {
            2: [
                ("m3", shown(0), shown(17), 2),
                ("m4", shown(2), shown(12), 1),
                ("m5", shown(0), shown(8), 2),
            ],
            3: [
                ("m1", shown(0), shown(24), 3),
                ("m4", shown(13), shown(23), 1),
                ("m5", shown(22), shown(26), 1),
            ],
            4: [("m1", shown(40), shown(50), 1), ("m2", shown(0), shown(80), 3)],
        },
        "Four deliveries and the batch without data that ends the run: the sessions each batch "
        "emitted, as {batch: [(machine, start, end, heartbeats)]}. Gaps: m1 10 s, m2 30 s, m5 4 s, "
        "m3 (none given) and m4 (not registered) DEFAULT_GAP_SECONDS; a heartbeat exactly one "
        "gap after the last stays in the session; the watermark is HEARTBEATS_DELAY behind.",
        hint="A session missing for m3 or m4 means their gap came out null (Spark drops such "
        "rows); a session a batch early or late, a watermark delay other than HEARTBEATS_DELAY.",
    )


# --- 9.8 · the chain -----------------------------------------------------------------------


@functools.cache
def _lab05():
    from streamlab.monitor import reference_solution

    return reference_solution()


_numbers = iter(range(10_000))


def heartbeat(machine: str, second: int) -> dict:
    """A heartbeat of the hub's partition 0, as lab 05's processor reads it."""
    return {
        "partition": "0",
        "machine_name": machine,
        "event_time": at(second),
        "sequence_number": next(_numbers),
        "last_enqueued_sequence_number": None,
    }


def hub_story() -> list[list[dict]]:
    return [
        [heartbeat(m, 0) for m in ("m1", "m2", "m3", "m4")],
        [heartbeat(m, 3) for m in ("m1", "m2", "m3")],
        [heartbeat("m1", 30), heartbeat("m3", 30)],
        [heartbeat(m, 60) for m in ("m1", "m2", "m3")],
        [heartbeat("m1", 130)],
        [heartbeat("m1", 200)],
        [heartbeat("m1", 260)],
    ]


@exercise("9.8", timeout=300)
def test_unhealthy_per_site_after_the_processor(nb, spark, tmp_path):
    lab05 = _lab05()
    write_deliveries(tmp_path / "hub", hub_story())
    transitions = lab05.catch_up_changes(
        read_deliveries(spark, tmp_path / "hub", lab05.HEARTBEAT_SCHEMA),
        lab05.CatchUpProcessor(timeout_ms=5_000),
    )
    registry = spark.createDataFrame(
        [("m1", "Lyon", "ops-lyon", 10), ("m2", "Lyon", "ops-lyon", 10), ("m3", "Oslo", None, 10)],
        REGISTRY_DDL,
    )
    columns = ["window_start", "window_end", "site", "unhealthy"]
    df = expect_dataframe(
        nb.unhealthy_per_site(transitions, registry), "unhealthy_per_site", columns
    )
    print("Running lab 05's processor and the count (the first batch starts Python workers) ...")
    batches = run(df, tmp_path / "checkpoint", no_data_batches=False)
    got = per_batch(batches, lambda r: tuple(r[c] for c in columns))
    minute = [shown(0), shown(60)]
    next_minute = [shown(60), shown(120)]
    expect_equal(
        got,
        {
            6: [
                (*minute, "Lyon", 3),
                (*minute, "Oslo", 2),
                (*minute, nb.UNREGISTERED, 1),
                (*next_minute, "Lyon", 2),
                (*next_minute, "Oslo", 1),
            ]
        },
        "Seven deliveries of heartbeats through lab 05's CatchUpProcessor (5 s timeout), then "
        "your count: the rows each batch emitted, as {batch: [(window start, end, site, "
        "Unhealthy transitions)]}. Unhealthy at 10:00:05 (m4), 10:00:08 (m1, m2, m3), "
        "10:00:35 (m1, m3), 10:01:05 (m1, m2, m3), 10:02:15 and 10:03:25 (m1); a window comes out "
        "once the watermark, TRANSITIONS_DELAY behind the newest Unhealthy, has reached its end.",
        hint="Nothing at all means the count has no watermark it can use: declare one on the "
        "processor's output. Counts too high: only transitions to Unhealthy count.",
    )
