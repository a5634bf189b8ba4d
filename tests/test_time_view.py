"""TimeView: a windowed count's micro-batches as its progress reports and its state say them.

A count per 10-second window with a 5-second watermark reads four deliveries, one per
micro-batch; the last holds a row that is too late. The tests read Spark's own numbers
(``query.recentProgress``, the state reader) and hold the view's records, and the numbers a
browser reads back from the drawn view, to them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from streamlab.deadlines import finish, stop, wait_for
from streamlab.deliveries import feed, read_deliveries, write_deliveries
from streamlab.paths import BUILD_DIR
from streamlab.widgets import TimeView
from streamlab.widgets.time_view import StateWindow, time_batches, to_ms

ARTIFACTS = BUILD_DIR / "artifacts"
SCHEMA = "machine_name STRING, event_time TIMESTAMP"


def beat(machine: str, second: int) -> dict:
    return {"machine_name": machine, "event_time": f"2026-11-22T10:00:{second:02d}Z"}


DELIVERIES = [
    [beat("a", 1), beat("a", 2)],  # batch 0: no watermark yet
    [beat("a", 12), beat("b", 31)],  # batch 1: ends with the watermark at 10:00:26
    [beat("a", 45)],  # batch 2 closes 10:00:00-10:00:10 and 10:00:10-10:00:20
    [beat("a", 3)],  # batch 3: behind the watermark of batch 2, dropped
]
LATE_BATCH = 3


def window(start: int, end: int) -> StateWindow:
    return StateWindow(
        to_ms(f"2026-11-22T10:00:{start:02d}Z"), to_ms(f"2026-11-22T10:00:{end:02d}Z")
    )


def counts(spark, folder: Path):
    return (
        read_deliveries(spark, folder, SCHEMA)
        .withWatermark("event_time", "5 seconds")
        .groupBy(F.window("event_time", "10 seconds"))
        .count()
    )


@dataclass
class Run:
    spark: Any
    query: Any
    checkpoint: str
    reports: list[dict]  # the progress reports, read here as JSON


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    """The windowed count run to the end over every delivery (one Spark run for the module),
    into a memory table, which counts its output rows."""
    from streamlab.session import CHECKS_SESSION, spark_session

    spark = spark_session(**CHECKS_SESSION)  # the session of the ``spark`` fixture
    work = tmp_path_factory.mktemp("time_view")
    write_deliveries(work / "in", DELIVERIES)
    checkpoint = str(work / "checkpoint")
    query, reports = _count_every_delivery(spark, work / "in", "time_view_counts", checkpoint)
    yield Run(spark, query, checkpoint, reports)


def _count_every_delivery(spark, folder, name: str, checkpoint: str):
    """The windowed count of ``folder``'s deliveries run to its end (and stopped), with its
    progress reports."""
    query = (
        counts(spark, folder)
        .writeStream.format("memory")
        .queryName(name)
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    try:
        finish(query, within=300, what="the windowed count to read every delivery")
        return query, [json.loads(p.json) for p in query.recentProgress]
    finally:
        stop(query, what="the windowed count to stop")


def state_windows(spark, checkpoint: str, batch_id: int) -> set[StateWindow]:
    rows = (
        spark.read.format("statestore")
        .option("batchId", batch_id)
        .load(checkpoint)
        .select(
            F.unix_millis(F.col("key.window.start")).alias("start"),
            F.unix_millis(F.col("key.window.end")).alias("end"),
        )
        .collect()
    )
    return {StateWindow(r["start"], r["end"]) for r in rows}


def test_each_record_is_its_batchs_progress_report(finished):
    batches = time_batches(finished.query.recentProgress)
    reports = finished.reports
    assert [b.batch_id for b in batches] == [r["batchId"] for r in reports] == [0, 1, 2, 3]
    for batch, report in zip(batches, reports, strict=True):
        event_time = report["eventTime"]
        assert batch.watermark == event_time["watermark"]
        assert (batch.events_min, batch.events_max, batch.events_avg) == (
            event_time.get("min"),
            event_time.get("max"),
            event_time.get("avg"),
        )
        assert batch.input_rows == report["numInputRows"]
        assert batch.output_rows == report["sink"]["numOutputRows"]
        assert [
            (
                op.name,
                op.rows_total,
                op.rows_updated,
                op.rows_removed,
                op.dropped_by_watermark,
            )
            for op in batch.operators
        ] == [
            (
                op["operatorName"],
                op["numRowsTotal"],
                op["numRowsUpdated"],
                op["numRowsRemoved"],
                op["numRowsDroppedByWatermark"],
            )
            for op in report["stateOperators"]
        ]
    # The same records from the reports' JSON text and from dicts.
    assert time_batches(json.dumps(r) for r in reports) == batches
    assert time_batches(reports) == batches
    # Each batch runs with the watermark computed at the end of the one before it.
    assert [b.watermark for b in batches] == [
        "1970-01-01T00:00:00.000Z",
        "2026-11-22T09:59:57.000Z",
        "2026-11-22T10:00:26.000Z",
        "2026-11-22T10:00:40.000Z",
    ]


def test_the_late_row_is_dropped_in_the_batch_spark_says(finished):
    batches = time_batches(finished.reports)
    said = [
        r["batchId"]
        for r in finished.reports
        if sum(op["numRowsDroppedByWatermark"] for op in r["stateOperators"])
    ]
    assert said == [LATE_BATCH]
    assert [b.batch_id for b in batches if b.dropped_by_watermark] == [LATE_BATCH]
    late = batches[LATE_BATCH]
    assert (late.input_rows, late.dropped_by_watermark) == (1, 1)
    assert late.events_min == late.events_max == "2026-11-22T10:00:03.000Z"
    # It never reached its window: 10:00:00-10:00:10 was emitted with the first two rows only.
    emitted = finished.spark.table("time_view_counts").collect()
    assert {(r["window"]["start"].second, r["count"]) for r in emitted} == {
        (0, 2),
        (10, 1),
        (30, 1),
    }


def test_the_windows_in_state_are_the_state_readers(finished):
    spark, checkpoint = finished.spark, finished.checkpoint
    batches = time_batches(finished.reports, spark=spark, checkpoint=checkpoint)
    for batch in batches:
        assert set(batch.open_windows) == state_windows(spark, checkpoint, batch.batch_id)
        before = state_windows(spark, checkpoint, batch.batch_id - 1) if batch.batch_id else set()
        assert set(batch.closed_windows) == before - set(batch.open_windows)
        # What left the state is what Spark counts as removed.
        assert len(batch.closed_windows) == batch.operators[0].rows_removed
    assert [(b.open_windows, b.closed_windows) for b in batches] == [
        ((window(0, 10),), ()),
        ((window(0, 10), window(10, 20), window(30, 40)), ()),
        ((window(30, 40), window(40, 50)), (window(0, 10), window(10, 20))),
        ((window(40, 50),), (window(30, 40),)),
    ]
    # A window closes once the watermark its batch ran with has passed its end.
    for batch in batches:
        assert all(w.end_ms <= batch.watermark_ms for w in batch.closed_windows)
        assert all(w.end_ms > batch.watermark_ms for w in batch.open_windows)


def test_the_view_of_a_finished_query(finished):
    view = TimeView.of(finished.query, spark=finished.spark, checkpoint=finished.checkpoint)
    assert view.batches == time_batches(
        finished.reports, spark=finished.spark, checkpoint=finished.checkpoint
    )
    assert "the query has stopped" in view.heading.value
    assert "4 micro-batches" in view.heading.value
    assert view.widget.children == (view.heading, view.timeline, view.table)
    assert "streamlab-time-view" in view.widget._dom_classes


def test_a_view_without_state_shows_the_reports_alone():
    report = {
        "batchId": 7,
        "timestamp": "2026-11-22T10:01:00.000Z",
        "numInputRows": 0,
        "eventTime": {"watermark": "2026-11-22T10:00:40.000Z"},
        "stateOperators": [],
        "sink": {"numOutputRows": -1},
    }
    again = dict(report, numInputRows=3)  # the batch run again after a restart
    (batch,) = time_batches([report, again])
    assert (batch.batch_id, batch.input_rows, batch.output_rows) == (7, 3, None)
    assert batch.events_min is None and batch.open_windows is None
    view = TimeView([report])
    assert "data-batch='7'" in view.table.value
    assert "watermark 10:00:40" in view.timeline.value
    empty = TimeView()
    assert "no micro-batch yet" in empty.heading.value
    with pytest.raises(ValueError, match="TimeView.of"):
        empty.refresh()


class FakeReader:
    """``spark.read`` of a state reader that finds ``schema``, or fails as ``error``."""

    def __init__(self, schema=None, error: Exception | None = None) -> None:
        self.loads = 0
        self.schema, self.error = schema, error
        self.read = self

    def format(self, name):
        assert name == "statestore"
        return self

    def option(self, key, value):
        return self

    def load(self, path):
        self.loads += 1
        if self.error is not None:
            raise self.error
        return self


REPORTS = [
    {"batchId": b, "numInputRows": 1, "stateOperators": [{"operatorName": "dedupe"}]}
    for b in (4, 5)
]


def test_a_state_without_windows_is_read_once_and_shown_without():
    from pyspark.sql.types import StringType, StructField, StructType

    key = StructType([StructField("machine_name", StringType())])
    reader = FakeReader(StructType([StructField("key", key)]))
    cache: dict = {}
    batches = time_batches(REPORTS, spark=reader, checkpoint="ck", cache=cache)
    assert [(b.batch_id, b.open_windows, b.closed_windows) for b in batches] == [
        (4, None, None),
        (5, None, None),
    ]
    assert reader.loads == 1  # batch 3, before the first: no window in its key, so no more
    time_batches(REPORTS, spark=reader, checkpoint="ck", cache=cache)
    assert reader.loads == 1


def test_state_the_reader_cannot_read_is_asked_again():
    from pyspark.errors import PySparkException

    reader = FakeReader(error=PySparkException("no state for this batch"))
    cache: dict = {}
    batches = time_batches(REPORTS, spark=reader, checkpoint="ck", cache=cache)
    assert [b.open_windows for b in batches] == [None, None]
    assert cache == {}
    time_batches(REPORTS, spark=reader, checkpoint="ck", cache=cache)
    assert reader.loads == 6


def test_a_running_query_refreshed_and_followed(spark, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    checkpoint = str(tmp_path / "checkpoint")
    query = (
        counts(spark, folder)
        .writeStream.format("memory")
        .queryName("time_view_running")
        .outputMode("append")
        .option("checkpointLocation", checkpoint)
        .start()
    )
    view = TimeView.of(query, spark=spark, checkpoint=checkpoint)
    try:
        feed(query, folder, DELIVERIES[0])
        view.refresh()
        last = json.loads(query.lastProgress.json)
        assert view.batches[-1].batch_id == last["batchId"]
        assert view.batches[-1].open_windows == (window(0, 10),)

        view.follow(interval=0.2)
        feed(query, folder, DELIVERIES[1])
        newest = json.loads(query.lastProgress.json)["batchId"]
        wait_for(
            lambda: view.batches and view.batches[-1].batch_id >= newest,
            within=60,
            what=f"the followed view to show batch {newest}",
            query=query,
        )
        assert sum(b.input_rows for b in view.batches) == 4
        assert view.batches == time_batches(
            query.recentProgress, spark=spark, checkpoint=checkpoint
        )
        # The watermark moved to 10:00:26: Spark ran a batch without data that closed two.
        assert view.batches[-1].input_rows == 0
        assert view.batches[-1].open_windows == (window(30, 40),)
        assert view.batches[-1].closed_windows == (window(0, 10), window(10, 20))
    finally:
        view.stop()
        stop(query, what="the running windowed count to stop")
    assert view._thread is None


# -- in a browser ----------------------------------------------------------------------------


def test_a_browser_reads_the_progress_reports_numbers_from_the_view(browser, finished):
    spark, checkpoint = finished.spark, finished.checkpoint
    view = TimeView.of(finished.query, spark=spark, checkpoint=checkpoint)
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        began = time.monotonic()
        page.set_content(f"<!doctype html><html><body>{view.html()}</body></html>")
        for report in finished.reports:
            b = report["batchId"]
            row = page.locator(f"tr.streamlab-time-row[data-batch='{b}']")
            (operator,) = report["stateOperators"]
            dropped = operator["numRowsDroppedByWatermark"]
            assert int(row.locator(".streamlab-input-rows").inner_text()) == report["numInputRows"]
            assert int(row.locator(".streamlab-dropped").get_attribute("data-dropped")) == dropped
            assert row.locator(".streamlab-dropped").inner_text() == (
                f"{dropped} late" if dropped else "0"
            )
            state = row.locator(".streamlab-state[data-operator='stateStoreSave']")
            assert (
                int(state.locator(".streamlab-state-rows").inner_text())
                == (operator["numRowsTotal"])
            )
            assert (
                int(state.locator(".streamlab-state-removed").inner_text())
                == (operator["numRowsRemoved"])
            )
            assert (
                int(row.locator(".streamlab-output-rows").inner_text())
                == (report["sink"]["numOutputRows"])
            )
            watermark = report["eventTime"]["watermark"]
            assert row.locator(".streamlab-watermark").get_attribute("data-watermark") == watermark

            line = page.locator(f".streamlab-time-batch[data-batch='{b}']")
            marker = line.locator(".streamlab-watermark")
            if to_ms(watermark):
                assert marker.get_attribute("data-watermark") == watermark
                assert marker.inner_text() == f"watermark {watermark[11:19]}"
            else:
                assert marker.inner_text() == "no watermark yet"
            # Open and closed windows are said in words, and are the state reader's.
            held = state_windows(spark, checkpoint, b)
            drawn = line.locator(".streamlab-window-open")
            assert {
                StateWindow(
                    to_ms(w.get_attribute("data-start")), to_ms(w.get_attribute("data-end"))
                )
                for w in drawn.all()
            } == held
            assert all(w.inner_text().startswith("open ") for w in drawn.all())
            closed = line.locator(".streamlab-window-closed")
            assert all(w.inner_text().startswith("closed ") for w in closed.all())
            assert closed.count() == operator["numRowsRemoved"]
        assert page.locator(".streamlab-time-batch").count() == len(finished.reports)
        print(f"read back in {time.monotonic() - began:.1f} s")
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.locator(".streamlab-time-view").screenshot(path=str(ARTIFACTS / "time-view.png"))
    finally:
        page.close()


BORN_AND_CLOSED = [
    [beat("a", 1)],  # batch 0
    [beat("b", 31)],  # batch 1: ends with the watermark at 10:00:26
    # batch 2 runs with 10:00:26: the row at 10:00:15 is not late against the watermark batch
    # 1 ran with, so it opens 10:00:10-10:00:20, which the batch's own watermark closes at once
    [beat("a", 45), beat("a", 15)],
]


def test_a_window_opened_and_closed_in_one_batch_is_drawn_closed(spark, tmp_path):
    write_deliveries(tmp_path / "in", BORN_AND_CLOSED)
    checkpoint = str(tmp_path / "checkpoint")
    _, reports = _count_every_delivery(spark, tmp_path / "in", "born_and_closed", checkpoint)
    emitted = {
        (r["window"]["start"].second, r["window"]["end"].second)
        for r in spark.table("born_and_closed").collect()
    }
    assert (10, 20) in emitted  # Spark emitted it: it was opened and closed
    [batch] = [
        b for b in time_batches(reports, spark=spark, checkpoint=checkpoint) if b.batch_id == 2
    ]
    assert window(10, 20) in batch.closed_windows
    assert window(10, 20) not in (batch.open_windows or ())
    (operator,) = next(r for r in reports if r["batchId"] == 2)["stateOperators"]
    assert len(batch.closed_windows) == operator["numRowsRemoved"]
    page = TimeView(reports, spark=spark, checkpoint=checkpoint).html()
    assert 'data-state="closed" data-start="2026-11-22T10:00:10.000Z"' in page


#: Every element inside a time view's window box that reaches out of it, by its text.
LABELS_OUTSIDE = """() => [...document.querySelectorAll('.streamlab-time-view .streamlab-window')]
  .flatMap(box => {
  const outer = box.getBoundingClientRect();
  return [...box.querySelectorAll('*')].filter(label => {
    const r = label.getBoundingClientRect();
    return r.left < outer.left - 0.5 || r.right > outer.right + 0.5
        || r.top < outer.top - 0.5 || r.bottom > outer.bottom + 0.5;
  }).map(label => label.textContent);
})"""


def test_labels_stay_in_their_boxes_the_axis_has_ticks_and_rows_stay_short(browser, finished):
    view = TimeView.of(finished.query, spark=finished.spark, checkpoint=finished.checkpoint)
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    try:
        page.set_content(f"<!doctype html><html><body>{view.html()}</body></html>")
        labels = page.locator(".streamlab-window .streamlab-window-label")
        assert labels.count() == page.locator(".streamlab-window").count() > 0
        assert page.evaluate(LABELS_OUTSIDE) == []
        ticks = page.locator(".streamlab-axis-tick")
        assert ticks.count() >= 2
        for tick in ticks.all_inner_texts():
            assert len(tick) <= 8 and tick.count(":") >= 1, tick  # 10:00:20, no date
        start = page.locator(".streamlab-axis-start").inner_text()
        assert "2026" not in start and len(start) <= 8
        heights = [
            row.bounding_box()["height"] for row in page.locator("tr.streamlab-time-row").all()
        ]
        assert max(heights) < 2 * min(heights), heights  # the windows column adds no lines
        page.locator(".streamlab-time-view").screenshot(path=str(ARTIFACTS / "time-view-boxes.png"))
    finally:
        page.close()
