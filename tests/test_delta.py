"""The Delta sink: each micro-batch once, across replays, restarts and a kill -9.

Real parts throughout: Spark queries on a checkpoint, delta-rs tables on disk, and a child
process killed with SIGKILL after it wrote a batch's data files and before it committed them.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from streamlab.deadlines import finish
from streamlab.deliveries import deliver_file
from streamlab.delta import DeltaSchemaMismatch, delta_writer, fan_out, read_table

DDL = "reading LONG, device STRING"


def deliver(folder: Path, name: str, first: int, count: int, order: int) -> None:
    """A JSON file of readings ``first .. first+count-1``; ``order`` fixes when the source sees it."""
    rows = [{"reading": n, "device": f"d{n % 3}"} for n in range(first, first + count)]
    deliver_file(folder, name, rows, order=order)


def readings(table: Path, version: int | None = None) -> list[int]:
    return sorted(read_table(table, version)["reading"].to_pylist())


def data_files(table: Path) -> list[Path]:
    return sorted(table.glob("*.parquet"))


def start(spark, source: Path, table: Path, checkpoint: Path):
    return (
        spark.readStream.schema(DDL)
        .option("maxFilesPerTrigger", 1)
        .json(str(source))
        .writeStream.foreachBatch(delta_writer(table))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )


def test_a_batch_written_twice_is_in_the_table_once(spark, tmp_path):
    table = tmp_path / "lake" / "readings"
    write = delta_writer(table, app_id="sensors")
    first = spark.createDataFrame([(1, "d1"), (2, "d2")], DDL)
    second = spark.createDataFrame([(3, "d0")], DDL)

    write(first, 0)
    write(first, 0)  # a retried batch
    write(second, 1)
    write(first, 0)  # an older batch, replayed late
    write(second, 1)

    assert readings(table) == [1, 2, 3]
    assert DeltaTable(str(table)).transaction_version("sensors") == 1
    assert DeltaTable(str(table)).version() == 1  # one commit per batch, none for the replays
    assert len(data_files(table)) == 2

    delta_writer(table, app_id="another query")(second, 0)  # its own batch 0
    assert readings(table) == [1, 2, 3, 3]


def test_a_replayed_batch_is_not_even_computed(spark, tmp_path):
    table = tmp_path / "readings"
    write = delta_writer(table, app_id="sensors")
    write(spark.createDataFrame([(1, "d1")], DDL), 0)
    failing = spark.createDataFrame([(2, "d2")], DDL).selectExpr(
        "reading", "raise_error('computed') AS device"
    )
    write(failing, 0)  # skipped before Spark runs it
    with pytest.raises(Exception, match="computed"):
        write(failing, 1)
    assert readings(table) == [1]


def test_time_travel_reads_what_a_version_held(spark, tmp_path):
    table = tmp_path / "readings"
    write = delta_writer(table, app_id="sensors")
    for batch_id in range(3):
        write(spark.createDataFrame([(batch_id, "d0")], DDL), batch_id)
    assert readings(table, version=0) == [0]
    assert readings(table, version=1) == [0, 1]
    assert readings(table) == [0, 1, 2]


def test_the_schema_comes_from_the_dataframe_nested_types_included(spark, tmp_path):
    table = tmp_path / "samples"
    batch = spark.sql(
        "SELECT 'd1' AS device, named_struct('t', TIMESTAMP'2026-11-22 10:00:00', "
        "'f', 49.9D) AS first, array(named_struct('t', TIMESTAMP'2026-11-22 "
        "10:00:05', 'f', -1.0D)) AS anomalies, 3 AS events"
    )
    delta_writer(table, app_id="q")(batch, 0)
    schema = json.loads(DeltaTable(str(table)).schema().to_json())
    assert [(f["name"], f["nullable"]) for f in schema["fields"]] == [
        ("device", True),
        ("first", True),
        ("anomalies", True),
        ("events", True),
    ]
    [row] = read_table(table).to_pylist()
    assert row["first"]["f"] == 49.9 and row["anomalies"][0]["f"] == -1.0 and row["events"] == 3


def test_a_batch_that_does_not_match_the_table_gets_a_sentence(spark, tmp_path):
    table = tmp_path / "lake" / "samples"
    write = delta_writer(table, app_id="q")
    write(spark.createDataFrame([(1, "d1")], DDL), 0)

    with pytest.raises(DeltaSchemaMismatch) as wrong_type:
        write(spark.createDataFrame([(2, 5)], "reading LONG, device INT"), 1)
    sentence = str(wrong_type.value)
    for words in ("'samples'", str(table), "'device'", "as string", "as integer"):
        assert words in sentence, sentence
    assert "\n" not in sentence

    with pytest.raises(DeltaSchemaMismatch, match="has no column 'extra'"):
        write(spark.createDataFrame([(2, "d2", 1.0)], DDL + ", extra DOUBLE"), 1)
    with pytest.raises(DeltaSchemaMismatch, match="the batch has no such column"):
        write(spark.createDataFrame([(2,)], "reading LONG"), 1)
    assert readings(table) == [1]


def test_outside_a_query_the_writer_needs_a_name(spark, tmp_path):
    with pytest.raises(ValueError, match="pass app_id="):
        delta_writer(tmp_path / "t")(spark.createDataFrame([(1, "d1")], DDL), 0)
    with pytest.raises(FileNotFoundError, match="no Delta table at"):
        read_table(tmp_path / "t")


def test_a_restarted_query_writes_the_replayed_batch_once(spark, tmp_path):
    source, table, checkpoint = tmp_path / "in", tmp_path / "readings", tmp_path / "checkpoint"
    deliver(source, "a", 0, 3, order=0)
    deliver(source, "b", 3, 3, order=1)
    finish(
        start(spark, source, table, checkpoint),
        within=300,
        what="the query to write the first two files",
    )
    assert readings(table) == list(range(6))
    versions = DeltaTable(str(table)).version()

    # Spark had not recorded batch 1 as done when the driver died: it runs it again.
    for done in ("1", ".1.crc"):
        (checkpoint / "commits" / done).unlink()
    deliver(source, "c", 6, 3, order=2)
    finish(
        start(spark, source, table, checkpoint),
        within=300,
        what="the restarted query to replay batch 1 and write batch 2",
    )

    assert readings(table) == list(range(9))
    assert DeltaTable(str(table)).version() == versions + 1  # batch 2 only
    assert (checkpoint / "commits" / "2").exists()

    # A new checkpoint is a new query: its batch 0 is not mistaken for the old query's.
    finish(
        start(spark, source, table, tmp_path / "new-checkpoint"),
        within=300,
        what="the query on a new checkpoint to read every file",
    )
    assert readings(table) == sorted(list(range(9)) * 2)


CHILD = """
import sys, time
import streamlab.delta as delta
from streamlab.deadlines import finish
from streamlab.session import spark_session

source, table, checkpoint = sys.argv[1:4]
commit = delta._commit


def commit_unless_batch_1(current, files, app_id, batch_id):
    if batch_id == 1:
        print("DATA FILES WRITTEN", flush=True)
        time.sleep(600)
    commit(current, files, app_id, batch_id)


delta._commit = commit_unless_batch_1
spark = spark_session("local[1]")
query = (spark.readStream.schema("reading LONG, device STRING").option("maxFilesPerTrigger", 1)
         .json(source).writeStream.foreachBatch(delta.delta_writer(table))
         .option("checkpointLocation", checkpoint).trigger(availableNow=True).start())
finish(query, within=900, what="the child's query (the test kills it in batch 1)")
"""


def _wait_for_line(process: subprocess.Popen, text: str, timeout: float) -> bool:
    lines: queue.Queue = queue.Queue()
    threading.Thread(
        target=lambda: [lines.put(line) for line in process.stdout], daemon=True
    ).start()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if text in lines.get(timeout=deadline - time.monotonic()):
                return True
        except queue.Empty:
            break
    return False


def test_kill_9_between_the_data_files_and_the_commit(spark, tmp_path):
    source, table, checkpoint = tmp_path / "in", tmp_path / "readings", tmp_path / "checkpoint"
    deliver(source, "a", 0, 3, order=0)
    deliver(source, "b", 3, 3, order=1)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.Popen(
        [sys.executable, str(script), str(source), str(table), str(checkpoint)],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        reached = _wait_for_line(child, "DATA FILES WRITTEN", timeout=180)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver and its JVM, at once
        child.wait()
    assert reached, "the child never reached the commit of batch 1"

    # Batch 1's data file is on disk, the table does not know it, Spark has not finished it.
    assert len(data_files(table)) == 2
    assert readings(table) == [0, 1, 2]
    assert not (checkpoint / "commits" / "1").exists()

    finish(
        start(spark, source, table, checkpoint),
        within=300,
        what="the restarted query to write its batches",
    )

    assert readings(table) == list(range(6))
    assert len(data_files(table)) == 3  # the orphan stays on disk, unread
    committed = {Path(uri).name for uri in DeltaTable(str(table)).file_uris()}
    assert len({p.name for p in data_files(table)} - committed) == 1


def test_fan_out_hands_each_batch_to_every_writer(spark, tmp_path):
    write = fan_out(
        delta_writer(tmp_path / "a", app_id="q"), delta_writer(tmp_path / "b", app_id="q")
    )
    write(spark.createDataFrame([(1, "d1")], DDL), 0)
    write(spark.createDataFrame([(1, "d1")], DDL), 0)
    assert readings(tmp_path / "a") == readings(tmp_path / "b") == [1]


def test_over_spark_connect_a_writer_without_a_name_says_why_it_needs_one(tmp_path):
    # A Connect client's batch: its foreachBatch runs in the server's Python, no query id there.
    from pyspark.sql.connect.dataframe import DataFrame as ConnectDataFrame

    from streamlab.delta import delta_writer

    with pytest.raises(ValueError, match=r"over Spark Connect .* pass app_id="):
        delta_writer(tmp_path / "table")(object.__new__(ConnectDataFrame), 0)
