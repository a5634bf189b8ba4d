"""Alerts from progress reports: each rule on hand-made reports, then provoked on real Spark.

The real queries read JSON files one per micro-batch (``maxFilesPerTrigger=1``) with
``trigger(availableNow=True)``: the same files give the same batches, so the same alerts.
A stalled query is one whose ``foreachBatch`` waits on an event the test holds; the stall rule
reads the time from a clock the test moves, so no test waits for a bound to pass.
"""

from __future__ import annotations

import json
import os
import threading
import time
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

from conftest import FakeClock
from eventhub_clients import Receiver, wait_for
from pyspark.sql import functions as F

from streamlab import deadlines
from streamlab.alerts import (
    DROPPED_BY_WATERMARK,
    FAILED,
    SLOW_BATCHES,
    STALLED,
    STATE_GROWING,
    WATERMARK_LAG,
    Alert,
    Alerter,
    AlertListener,
    Thresholds,
    check,
    dropped_by_watermark,
    error_summary,
    failed,
    slow_batches,
    stalled,
    state_growing,
    watermark_lag,
)
from streamlab.hub import Hub
from streamlab.session import LOG_FILE

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


# -- a query that stops reporting: the stall and failure rules, on an injected clock -----------

T0 = datetime(2026, 11, 22, 11, 0, 0, tzinfo=UTC)  # report(b) was triggered at T0 + b seconds


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def test_the_stall_bound_follows_the_trigger_unless_set():
    assert Thresholds(trigger_ms=500).stall_bound_ms() == 30_000  # at least 30 s
    assert Thresholds(trigger_ms=5_000).stall_bound_ms() == 50_000  # ten triggers
    assert Thresholds(trigger_ms=500, stall_after_ms=2_000).stall_bound_ms() == 2_000
    assert Thresholds(stall_after_ms=2_000).stall_bound_ms() == 2_000
    assert Thresholds().stall_bound_ms() is None  # a quiet spell lasts as long as the trigger


def test_a_stall_is_measured_from_the_last_sign_of_progress():
    history = [report(0, took=100), report(1, took=500)]  # batch 1 finished at 11:00:01.500
    assert stalled(history, at(31.5), 30_000) is None  # exactly the bound is not over it
    alert = stalled(history, at(32), 30_000)
    assert (alert.rule, alert.query, alert.batch_id) == (STALLED, "q", 2)
    assert (alert.value, alert.limit, alert.at) == (30_500, 30_000, "2026-11-22T11:00:32.000Z")
    assert alert.message == (
        "query q: no progress for 30.5 s, more than the 30 s allowed: batch 2 has not finished "
        f"(last sign of progress at 2026-11-22 11:00:01 UTC); Spark's log may say where it "
        f"waits: {LOG_FILE}"
    )
    # An idle event (the query waits for data) or a restart is a sign of progress too.
    assert stalled(history, at(32), 30_000, alive_at=at(20)) is None
    assert stalled(history, at(51), 30_000, alive_at=at(20)).value == 31_000


def test_a_query_that_never_finished_a_batch_stalls_from_its_start():
    alert = stalled([], at(11), 10_000, alive_at=at(0), query="fresh")
    assert (alert.query, alert.batch_id, alert.value) == ("fresh", -1, 11_000)
    assert "it has not finished a micro-batch since it started" in alert.message
    assert stalled([], at(11), 10_000) is None  # nothing known of the query: no alert


# Spark's text of a foreachBatch function's error, as a QueryTerminatedEvent carries it.
PYTHON_ERROR = """py4j.Py4JException: An exception was raised by the Python Proxy. Return \
Message: Traceback (most recent call last):
  File "/venv/site-packages/pyspark/sql/utils.py", line 163, in call
    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)
  File "/work/sink.py", line 13, in write
    raise ValueError("the sink refused batch 1")
ValueError: the sink refused batch 1

\tat py4j.Protocol.getReturnValue(Protocol.java:476)
\tat py4j.reflection.PythonProxyHandler.invoke(PythonProxyHandler.java:108)"""
JVM_ERROR = """java.io.FileNotFoundException: /data/in/3.json (No such file or directory)
\tat java.base/java.io.FileInputStream.open0(Native Method)"""


def test_a_failed_query_is_reported_with_the_line_that_says_why():
    assert error_summary(PYTHON_ERROR) == "ValueError: the sink refused batch 1"
    # As the StreamingQueryException that awaitTermination() raises says it.
    raised = PYTHON_ERROR.split("\n\n")[0] + "\n SQLSTATE: 39000\n=== Streaming Query ===\n"
    assert error_summary(raised) == "ValueError: the sink refused batch 1"
    assert error_summary(JVM_ERROR) == (
        "java.io.FileNotFoundException: /data/in/3.json (No such file or directory)"
    )
    alert = failed([report(0)], PYTHON_ERROR, at(2))
    assert (alert.rule, alert.query, alert.batch_id, alert.at) == (
        FAILED,
        "q",
        1,
        "2026-11-22T11:00:02.000Z",
    )
    assert alert.message == (
        "query q: stopped with an error in batch 1: ValueError: the sink refused batch 1; "
        f"Spark's log has the whole trace: {LOG_FILE}"
    )
    first = failed([], JVM_ERROR, at(2), query="fresh")
    assert "query fresh: stopped with an error before it finished a micro-batch" in first.message
    assert failed([report(0)], None, at(2)) is None  # stopped, not failed


def test_the_alerter_raises_one_stall_alert_per_stall():
    alerter = Alerter(Thresholds(stall_after_ms=10_000))
    alerter.started("id-q", "q", at(0))
    assert alerter.watch(at(5)) == []
    assert [(a.rule, a.batch_id) for a in alerter.watch(at(11))] == [(STALLED, -1)]
    assert alerter.watch(at(12)) == []  # the same stall goes on: no second alert
    alerter.observe(report(20, took=500))  # progress at last: the stall is over
    assert [(a.rule, a.batch_id) for a in alerter.watch(at(31))] == [(STALLED, 21)]
    assert alerter.watch(at(35)) == []
    alerter.idle("id-q", at(40))  # waits for data: alive, a new stall can come
    assert [a.batch_id for a in alerter.watch(at(51))] == [21]
    alerter.idle("id-q", at(52))
    assert alerter.watch(at(57)) == []  # 5 s after the idle event: not stalled
    alerter.observe(report(52, took=500))
    assert alerter.watch(at(55)) == []  # a look between the report and the next stall
    assert [a.batch_id for a in alerter.watch(at(63))] == [53]
    # A query that ended cannot stall; one that failed raises its own alert.
    assert alerter.ended("id-q", None, at(64)) == []
    assert alerter.watch(at(100)) == []
    alerter.started("id-q", "q", at(200))  # restarted on its checkpoint
    assert [a.batch_id for a in alerter.watch(at(211))] == [53]
    (gone,) = alerter.ended("id-q", PYTHON_ERROR, at(212))
    assert (gone.rule, gone.batch_id) == (FAILED, 53)


def test_a_first_batch_gets_longer_than_the_default_bound_before_it_is_a_stall():
    alerter = Alerter(Thresholds(trigger_ms=500))  # default bound: 30 s
    alerter.started("id-q", "q", at(0))
    assert alerter.watch(at(60)) == []  # Python workers starting on a loaded machine
    assert [(a.rule, a.limit) for a in alerter.watch(at(121))] == [(STALLED, 120_000.0)]
    alerter.observe(report(59, took=500))  # the first batch, at last: the usual bound again
    assert [(a.rule, a.limit) for a in alerter.watch(at(95))] == [(STALLED, 30_000.0)]


def test_the_stall_rule_needs_a_bound():
    alerter = Alerter(Thresholds())
    alerter.started("id-q", "q", at(0))
    assert alerter.watch(at(10_000)) == []


class Started:
    def __init__(self, name: str, when: datetime) -> None:
        self.id, self.runId, self.name = f"id-{name}", f"run-{name}", name
        self.timestamp = when.strftime("%Y-%m-%dT%H:%M:%S.000Z")


class Terminated:
    def __init__(self, name: str, exception: str | None) -> None:
        self.id, self.runId, self.exception = f"id-{name}", f"run-{name}", exception


def test_the_listeners_watchdog_notices_a_stall_on_its_own_clock():
    clock = FakeClock(T0.timestamp())
    sent = []
    listener = AlertListener(Thresholds(trigger_ms=500), send=sent.extend, clock=clock, every=0.01)
    try:
        assert not listener.watching  # no query heard of yet
        listener.onQueryStarted(Started("q", T0))
        assert listener.watching
        checks = listener.checks
        wait_for(lambda: listener.checks > checks + 2, what="the watchdog's rounds")
        assert listener.alerts == []
        clock.now += 121  # past the bound of a query with no batch yet (120 s)
        wait_for(lambda: listener.alerts, what="the watchdog's stall alert")
        checks = listener.checks
        wait_for(lambda: listener.checks > checks + 2, what="the watchdog's next rounds")
        assert [(a.rule, a.query) for a in listener.alerts] == [(STALLED, "q")]
        assert sent == listener.alerts and listener.errors == []
    finally:
        listener.close()
    assert not listener.watching


def test_the_listener_raises_a_failure_when_a_query_ends_with_an_error():
    sent = []
    listener = AlertListener(Thresholds(), send=sent.extend, clock=FakeClock(at(5).timestamp()))
    listener.onQueryStarted(Started("q", T0))
    assert not listener.watching  # no stall bound: nothing to watch
    listener.onQueryTerminated(Terminated("q", None))
    assert listener.alerts == []
    listener.onQueryStarted(Started("q", T0))
    listener.onQueryTerminated(Terminated("q", PYTHON_ERROR))
    assert [(a.rule, a.query, a.at) for a in sent] == [(FAILED, "q", "2026-11-22T11:00:05.000Z")]


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


# -- a stall and a failure on real Spark -------------------------------------------------------


def _rate(spark):
    return spark.readStream.format("rate").option("rowsPerSecond", 1).load()


def test_a_batch_held_on_purpose_raises_a_stall_alert(spark):
    """A foreachBatch that waits on an event is a stalled query: no report comes."""
    entered, release = threading.Event(), threading.Event()

    def hold_batch_1(df, batch_id: int) -> None:
        if batch_id == 1:
            entered.set()
            release.wait(120)  # bounded: a failing test still ends

    clock = FakeClock(time.time())  # stands still until the test moves it
    listener = AlertListener(Thresholds(trigger_ms=200), clock=clock, every=0.05)
    spark.streams.addListener(listener)
    query = None
    try:
        query = (
            _rate(spark)
            .writeStream.queryName("held")
            .foreachBatch(hold_batch_1)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        deadlines.wait_for(entered.is_set, within=120, what="batch 1 to start", query=query)
        wait_for(lambda: listener.reports >= 1, what="batch 0's report")
        checks = listener.checks
        wait_for(lambda: listener.checks > checks + 2, what="the watchdog's rounds")
        assert listener.alerts == []  # the clock has not moved: no bound has passed
        clock.now = time.time() + 31  # 31 s later, by the listener's clock: over the 30 s bound
        wait_for(lambda: listener.alerts, what="the listener's stall alert")
        (alert,) = listener.alerts
        assert (alert.rule, alert.query, alert.batch_id) == (STALLED, "held", 1), alert
        assert "batch 1 has not finished" in alert.message
        checks = listener.checks
        wait_for(lambda: listener.checks > checks + 2, what="the watchdog's next rounds")
        assert len(listener.alerts) == 1  # one alert per stall
    finally:
        release.set()
        if query is not None:
            deadlines.stop(query, within=60, what="the held query to stop")
        spark.streams.removeListener(listener)
        listener.close()
    assert listener.errors == []


def test_a_query_whose_batch_raises_raises_a_failure_alert(spark):
    def refuse_batch_1(df, batch_id: int) -> None:
        if batch_id == 1:
            raise ValueError("the sink refused batch 1")

    listener = AlertListener(Thresholds(trigger_ms=200))
    spark.streams.addListener(listener)
    try:
        query = (
            _rate(spark)
            .writeStream.queryName("refused")
            .foreachBatch(refuse_batch_1)
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        wait_for(lambda: listener.alerts, timeout=120, what="the listener's failure alert")
        assert not query.isActive
    finally:
        spark.streams.removeListener(listener)
        listener.close()
    (alert,) = listener.alerts
    assert (alert.rule, alert.query, alert.batch_id) == (FAILED, "refused", 1), alert
    assert alert.message == (
        "query refused: stopped with an error in batch 1: ValueError: the sink refused batch 1; "
        f"Spark's log has the whole trace: {LOG_FILE}"
    )
