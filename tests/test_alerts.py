"""Alerts from progress reports: each rule on hand-made reports, then provoked on real Spark.

The real queries read JSON files one per micro-batch (``maxFilesPerTrigger=1``) with
``trigger(availableNow=True)``: the same files give the same batches, so the same alerts.
"""

from __future__ import annotations

import json
import os
from contextlib import contextmanager

from eventhub_clients import Receiver, wait_for
from pyspark.sql import functions as F

from streamlab.alerts import (
    DROPPED_BY_WATERMARK,
    SLOW_BATCHES,
    STATE_GROWING,
    WATERMARK_LAG,
    Alert,
    Alerter,
    AlertListener,
    Thresholds,
    check,
    dropped_by_watermark,
    slow_batches,
    state_growing,
    watermark_lag,
)
from streamlab.hub import Hub

# -- the rules on hand-made reports -----------------------------------------------------------


def report(batch, rows=1, *, total=None, dropped=0, wm=None, newest=None, took=100, name="q"):
    """A progress report as its JSON has it, with only what the rules read."""
    event_time = {}
    if wm is not None:
        event_time["watermark"] = f"2026-11-22T10:{wm}Z"
    if newest is not None:
        event_time["max"] = f"2026-11-22T10:{newest}Z"
    operators = []
    if total is not None:
        operators = [
            {
                "operatorName": "stateStoreSave",
                "numRowsTotal": total,
                "numRowsDroppedByWatermark": dropped,
            }
        ]
    return {
        "id": "id-" + name,
        "name": name,
        "batchId": batch,
        "timestamp": f"2026-11-22T11:00:{batch:02d}.000Z",
        "numInputRows": rows,
        "eventTime": event_time,
        "stateOperators": operators,
        "durationMs": {"triggerExecution": took},
    }


def test_watermark_lag_measures_from_the_newest_event_time_seen_in_any_report():
    history = [report(0, newest="05:00.000"), report(1, wm="00:00.000", newest="01:00.000")]
    alert = watermark_lag(history, max_lag_s=299)
    assert alert.rule == WATERMARK_LAG and alert.batch_id == 1 and alert.value == 300
    assert "is 300 s behind the newest event time (2026-11-22 10:05:00 UTC)" in alert.message
    assert watermark_lag(history, max_lag_s=300) is None  # exactly the limit is not over it


def test_no_watermark_yet_is_no_lag():
    assert watermark_lag([report(0, newest="05:00.000")], 1) is None
    epoch = report(0, newest="05:00.000")
    epoch["eventTime"]["watermark"] = "1970-01-01T00:00:00.000Z"
    assert watermark_lag([epoch], 1) is None
    assert watermark_lag([], 1) is None


def test_rows_dropped_must_go_on_batch_after_batch_that_read_rows():
    dropping = [report(b, total=1, dropped=2) for b in range(3)]
    alert = dropped_by_watermark(dropping, batches=3)
    assert (alert.rule, alert.batch_id, alert.value) == (DROPPED_BY_WATERMARK, 2, 6)
    # A batch that read nothing drops nothing and does not break the run; one that read rows
    # and dropped none does.
    idle = report(3, rows=0, total=1)
    assert dropped_by_watermark([*dropping, idle], batches=3).batch_id == 2
    clean = report(3, total=1, dropped=0)
    assert dropped_by_watermark([*dropping, clean], batches=3) is None
    assert dropped_by_watermark(dropping[:2], batches=3) is None


def test_state_growing_needs_a_rise_in_each_of_the_last_batches():
    rising = [report(b, total=t) for b, t in enumerate([5, 10, 20, 40])]
    alert = state_growing(rising, batches=3)
    assert (alert.rule, alert.batch_id, alert.value) == (STATE_GROWING, 3, 35)
    assert "from 5 to 40 rows" in alert.message
    assert state_growing(rising, batches=4) is None  # four rises need five batches
    flat = [report(b, total=t) for b, t in enumerate([5, 10, 10, 40])]
    assert state_growing(flat, batches=3) is None
    assert state_growing([report(b) for b in range(6)], batches=3) is None  # stateless


def test_slow_batches_counts_every_report_in_a_row():
    reports = [report(b, took=t) for b, t in enumerate([900, 600, 700, 800])]
    alert = slow_batches(reports, trigger_ms=500, batches=3)
    assert (alert.rule, alert.batch_id, alert.value, alert.limit) == (SLOW_BATCHES, 3, 800, 500)
    assert slow_batches(reports, trigger_ms=600, batches=3) is None  # 600 is not over 600
    assert slow_batches(reports[:2], trigger_ms=1, batches=3) is None


def test_slow_batches_is_checked_only_when_the_trigger_is_known():
    reports = [report(b, took=10_000) for b in range(5)]
    assert check(reports, Thresholds()) == []
    assert [a.rule for a in check(reports, Thresholds(trigger_ms=500))] == [SLOW_BATCHES]


def test_the_alerter_raises_an_alert_once_while_its_rule_keeps_firing():
    alerter = Alerter(Thresholds(dropped_batches=2))
    raised = [
        alerter.observe(report(b, total=1, dropped=d)) for b, d in enumerate([1, 1, 1, 0, 1, 1])
    ]
    assert [[a.batch_id for a in alerts] for alerts in raised] == [[], [1], [], [], [], [5]]
    # Each query has its own history.
    other = Alerter(Thresholds(dropped_batches=2))
    assert other.observe(report(0, total=1, dropped=1, name="a")) == []
    assert other.observe(report(0, total=1, dropped=1, name="b")) == []


def test_an_alert_travels_as_json():
    alert = dropped_by_watermark([report(b, total=1, dropped=1) for b in range(2)], 2)
    assert Alert.from_json(alert.to_json()) == alert
    assert json.loads(alert.to_json())["at"] == "2026-11-22T11:00:01.000Z"


# -- provoked on real Spark -------------------------------------------------------------------

SCHEMA = "k STRING, t TIMESTAMP"


def _write(folder, files: list[list[tuple[str, str]]]) -> str:
    folder.mkdir(parents=True)
    for number, rows in enumerate(files):
        lines = [json.dumps({"k": k, "t": f"2026-11-22T{t}Z"}) for k, t in rows]
        path = folder / f"{number:03d}.json"
        path.write_text("\n".join(lines) + "\n")
        # The file source reads the oldest file first: files written within the same second
        # would come in any order.
        os.utime(path, (1_700_000_000 + number, 1_700_000_000 + number))
    return str(folder)


def _read(spark, folder: str):
    return spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(folder)


def _run(df, name: str, checkpoint, mode: str = "append") -> list[dict]:
    query = (
        df.writeStream.format("noop")
        .queryName(name)
        .outputMode(mode)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    assert query.exception() is None, query.exception()
    return [json.loads(p.json) for p in query.recentProgress]


def _alerts(reports, **thresholds) -> list[tuple[str, int]]:
    alerter = Alerter(Thresholds(**thresholds))
    return [(a.rule, a.batch_id) for r in reports for a in alerter.observe(r)]


def _count_per_key(spark, tmp_path, files, name):
    df = _read(spark, _write(tmp_path / name, files)).groupBy("k").count()
    return _run(df, name, tmp_path / f"ckpt-{name}", mode="update")


def test_state_that_only_grows_is_reported_and_state_that_is_updated_is_not(spark, tmp_path):
    new_keys = [[(f"m{f}-{i}", "10:00:00") for i in range(10)] for f in range(5)]
    same_keys = [[(f"m{i}", "10:00:00") for i in range(10)] for _ in range(5)]
    growing = _count_per_key(spark, tmp_path, new_keys, "growing")
    assert [r["stateOperators"][0]["numRowsTotal"] for r in growing] == [10, 20, 30, 40, 50]
    assert _alerts(growing, growing_batches=3) == [(STATE_GROWING, 3)]
    steady = _count_per_key(spark, tmp_path, same_keys, "steady")
    assert _alerts(steady, growing_batches=3) == []
    # A real batch takes far longer than a 1 ms trigger, and less than ten minutes.
    assert _alerts(steady, trigger_ms=1, slow_batches=3) == [(SLOW_BATCHES, 2)]
    assert _alerts(steady, trigger_ms=600_000, slow_batches=3) == []


def _late_files(late: bool) -> list[list[tuple[str, str]]]:
    # One on-time event per file, 100 s apart; with `late`, one more an hour old.
    files = [[("m", "10:00:00")]]
    for minute in range(1, 5):
        on_time = ("m", f"10:{minute * 100 // 60:02d}:{minute * 100 % 60:02d}")
        files.append([on_time, ("m", "09:00:00")] if late else [on_time])
    return files


def _windowed(spark, tmp_path, name, late: bool):
    df = (
        _read(spark, _write(tmp_path / name, _late_files(late)))
        .withWatermark("t", "10 seconds")
        .groupBy(F.window("t", "10 seconds"))
        .count()
    )
    return _run(df, name, tmp_path / f"ckpt-{name}")


def test_rows_dropped_batch_after_batch_are_reported(spark, tmp_path):
    reports = _windowed(spark, tmp_path, "late", late=True)
    # Late rows are filtered with the previous batch's watermark: batch 1 still lets the
    # first one in (batch 0 left the watermark at 0); batches 2, 3 and 4 drop theirs.
    data = [r for r in reports if r["numInputRows"] > 0]
    dropped = [r["stateOperators"][0]["numRowsDroppedByWatermark"] > 0 for r in data]
    assert dropped == [False, False, True, True, True]
    # (Each file moves event time on by 100 s: allow for that much watermark lag.)
    assert _alerts(reports, dropped_batches=3, max_watermark_lag_s=200) == [
        (DROPPED_BY_WATERMARK, 4)
    ]
    on_time = _windowed(spark, tmp_path, "on-time", late=False)
    assert _alerts(on_time, dropped_batches=3, max_watermark_lag_s=200) == []


@contextmanager
def _session_setting(spark, key: str, value: str):
    saved = spark.conf.get(key)
    spark.conf.set(key, value)
    try:
        yield
    finally:
        spark.conf.set(key, saved)


def _two_inputs(spark, tmp_path, name: str, policy: str):
    # Input a moves on 2 minutes a file; input b sends one event and goes quiet.
    moving = [[("a", f"10:{2 * i:02d}:00")] for i in range(4)]
    a = _read(spark, _write(tmp_path / name / "a", moving))
    b = _read(spark, _write(tmp_path / name / "b", [[("b", "10:00:00")]]))
    both = a.withWatermark("t", "10 seconds").unionByName(b.withWatermark("t", "10 seconds"))
    counts = both.groupBy(F.window("t", "10 seconds")).count()
    with _session_setting(spark, "spark.sql.streaming.multipleWatermarkPolicy", policy):
        return _run(counts, name, tmp_path / f"ckpt-{name}")


def test_a_quiet_input_holding_the_watermark_back_is_reported(spark, tmp_path):
    held = _two_inputs(spark, tmp_path, "held", "min")
    # The watermark stays at b's 10:00:00 less 10 s while a's events reach 10:06.
    assert {r["eventTime"]["watermark"] for r in held[1:]} == {"2026-11-22T09:59:50.000Z"}
    assert _alerts(held, max_watermark_lag_s=200) == [(WATERMARK_LAG, 2)]
    followed = _two_inputs(spark, tmp_path, "followed", "max")
    assert _alerts(followed, max_watermark_lag_s=200) == []


def test_the_listener_sends_each_alert_to_the_course_hubs_alerts(spark, tmp_path):
    with Hub(port=0) as hub:  # the course's hub serves `alerts` by default
        listener = AlertListener(
            Thresholds(dropped_batches=3, max_watermark_lag_s=200),
            connection_string=hub.connection_string,
        )
        spark.streams.addListener(listener)
        try:
            reports = _windowed(spark, tmp_path, "listened", late=True)
            wait_for(lambda: listener.reports >= len(reports), what="the listener's reports")
        finally:
            spark.streams.removeListener(listener)
            listener.close()
        assert listener.errors == []
        assert [(a.rule, a.batch_id) for a in listener.alerts] == [(DROPPED_BY_WATERMARK, 4)]
        with Receiver(hub.connection_string, eventhub="alerts", starting_position="-1") as got:
            (event,) = got.wait_count(1)
        assert Alert.from_json(event.body_as_str()) == listener.alerts[0]
        assert event.partition_key == b"listened"


def test_a_failed_send_is_kept_not_raised():
    def refuse(alerts):
        raise ConnectionError("hub unreachable")

    listener = AlertListener(Thresholds(dropped_batches=1), send=refuse)

    class Event:
        progress = report(0, total=1, dropped=1)

    listener.onQueryProgress(Event())
    assert listener.errors == ["ConnectionError: hub unreachable"] and listener.reports == 1
