"""streamlab.deadlines: a stalled query is stopped in time and reported in sentences."""

from __future__ import annotations

import threading
import time

import pytest
from pyspark.sql import functions as F

from streamlab.deadlines import QueryStalled, drain, finish, stop, wait_for


def _stalling_query(spark, checkpoint: str, folder, *, available_now: bool):
    """A query over text files whose batches wait in a Python worker, as a stuck task does.

    The wait is in a task, not in the driver's ``foreachBatch`` function: Spark can cancel a
    task (it kills the Python worker), but not a Python function the driver is running.
    """
    started = threading.Event()
    held = F.udf(lambda value: time.sleep(600) or value, "string")
    folder.mkdir()
    (folder / "line.txt").write_text("one line\n")

    def hold(df, batch_id):
        started.set()
        df.select(held("value")).collect()

    writer = (
        spark.readStream.text(str(folder))
        .writeStream.queryName("held")
        .foreachBatch(hold)
        .option("checkpointLocation", checkpoint)
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    return query, started


def test_finish_stops_a_stalled_query_and_says_what_it_waited_for(spark, checkpoint_dir, tmp_path):
    query, started = _stalling_query(spark, checkpoint_dir, tmp_path / "in", available_now=True)
    assert started.wait(120), "the query never ran its first batch"
    with pytest.raises(QueryStalled) as stalled:
        finish(query, within=2, what="the held query to read its input")
    message = str(stalled.value)
    assert "Waited 2 s for the held query to read its input" in message
    assert "'held'" in message
    assert "It has been stopped." in message
    assert "spark.log" in message
    assert not query.isActive


def test_finish_returns_when_the_query_ends_in_time(spark, checkpoint_dir, tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.txt").write_text("one\ntwo\n")
    query = (
        spark.readStream.text(str(tmp_path / "in"))
        .writeStream.format("memory")
        .queryName("short_run")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=120, what="the text files")
    assert spark.table("short_run").count() == 2


def test_finish_raises_the_query_s_own_error(spark, checkpoint_dir):
    def fail(df, batch_id):
        raise ValueError("the sink refused the batch")

    query = (
        spark.readStream.format("rate")
        .load()
        .writeStream.foreachBatch(fail)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception, match="the sink refused the batch"):
        finish(query, within=120, what="the failing query")


def test_drain_gives_up_on_a_query_that_does_not_catch_up(spark, checkpoint_dir, tmp_path):
    query, started = _stalling_query(spark, checkpoint_dir, tmp_path / "in", available_now=False)
    assert started.wait(120), "the query never ran its first batch"
    with pytest.raises(QueryStalled, match="Waited 2 s for the line to be processed"):
        drain(query, within=2, what="the line to be processed")
    assert not query.isActive


def test_stop_says_so_when_a_stop_does_not_return():
    class Stuck:
        name = "stuck"

        def stop(self):
            threading.Event().wait(5)

    with pytest.raises(QueryStalled, match="has not stopped yet"):
        stop(Stuck(), within=0.2, what="the stuck query to stop")


def test_wait_for_names_what_never_came_and_the_query_s_last_batch():
    class Quiet:
        name = "quiet"
        isActive = True
        lastProgress = {"batchId": 7, "timestamp": "2026-11-27T08:00:00.000Z", "numInputRows": 3}

        def exception(self):
            return None

    ticks = iter(range(100))
    with pytest.raises(QueryStalled) as stalled:
        wait_for(
            lambda: False,
            within=5,
            what="machine m1 to turn Unhealthy",
            query=Quiet(),
            sleep=lambda s: None,
            clock=lambda: next(ticks),
        )
    assert "Waited 5 s for machine m1 to turn Unhealthy" in str(stalled.value)
    assert "batch 7" in str(stalled.value)


def test_wait_for_ends_at_once_when_the_query_died():
    class Dead:
        name = "dead"
        isActive = False

        def exception(self):
            return RuntimeError("the source failed")

    with pytest.raises(RuntimeError, match="the source failed"):
        wait_for(lambda: False, within=60, what="anything", query=Dead(), sleep=lambda s: None)
