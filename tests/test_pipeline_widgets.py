"""The backlog meter and the alert feed, against real Spark and a real emulator."""

from __future__ import annotations

from eventhub_clients import send, wait_for
from heartbeat_queries import start_reading

from streamlab.alerts import DROPPED_BY_WATERMARK, Alert, AlertListener, Thresholds
from streamlab.deadlines import drain
from streamlab.hub import Hub
from streamlab.widgets import AlertFeed, BacklogMeter

ZERO = {"0": 0, "1": 0, "2": 0, "3": 0}


def _report(latest) -> dict:
    return {
        "batchId": 7,
        "sources": [
            {"description": "eventhubs", "endOffset": {"0": 4, "1": 2}, "latestOffset": latest}
        ],
    }


def _shown(meter: BacklogMeter) -> dict[str, str]:
    import re

    return dict(re.findall(r'data-partition="(\w+)" data-behind="(\d+)"', meter.widget.value))


def test_the_meter_shows_each_partitions_backlog_and_the_total():
    meter = BacklogMeter()
    assert meter.update(_report({"0": 9, "1": 2})) == {"0": 5, "1": 0}
    assert _shown(meter) == {"0": "5", "1": "0"}
    assert "<b>Events behind</b>: 5 after batch 7" in meter.widget.value


def test_the_meter_says_why_when_the_source_tells_no_backlog():
    meter = BacklogMeter()
    assert meter.update(_report(None)) is None and meter.behind is None
    assert "reports no latestOffset" in meter.widget.value and _shown(meter) == {}


def test_the_meter_follows_a_running_query_until_it_has_caught_up(spark, hub, tmp_path):
    send(hub.connection_string, [f"a{i}" for i in range(9)], partition_id="2")
    query = start_reading(
        spark, hub, tmp_path / "ckpt", trigger={"processingTime": "200 milliseconds"}
    )
    meter = BacklogMeter()
    meter.follow(query, interval=0.05)
    try:
        drain(query, within=300, what="the query to process what the hub holds")
        wait_for(lambda: meter.behind == ZERO, what="the meter at zero")
    finally:
        meter.stop()
        query.stop()
    assert _shown(meter) == {p: "0" for p in ZERO}
    assert f"after batch {query.lastProgress['batchId']}" in meter.widget.value


def _alert(rule: str, batch: int) -> Alert:
    return Alert(
        rule, "monitor", batch, 3.0, 0.0, f"query monitor: {rule} <now>", "2026-11-22T11:00:00Z"
    )


def test_the_feed_shows_alerts_newest_first_and_escaped():
    feed = AlertFeed()
    assert "none so far" in feed.widget.value
    feed.add([_alert("state_growing", 3), _alert("slow_batches", 4)])
    html = feed.widget.value
    assert html.index("slow_batches") < html.index("state_growing")
    assert "&lt;now&gt;" in html and "<now>" not in html
    assert "(batch 4)" in html


def test_the_feed_says_a_stall_came_before_the_first_batch():
    feed = AlertFeed()
    feed.add([_alert("stalled", -1)])
    assert "(before its first batch)" in feed.widget.value
    assert "batch -1" not in feed.widget.value


def test_a_listener_shows_its_alerts_on_a_feed_without_a_hub():
    feed = AlertFeed()
    listener = AlertListener(Thresholds(dropped_batches=1), send=feed.add)

    class Event:
        progress = {
            "id": "id-monitor",
            "name": "monitor",
            "batchId": 0,
            "numInputRows": 2,
            "stateOperators": [{"numRowsTotal": 1, "numRowsDroppedByWatermark": 1}],
        }

    listener.onQueryProgress(Event())
    assert listener.errors == []
    assert [(a.rule, a.query) for a in feed.alerts] == [(DROPPED_BY_WATERMARK, "monitor")]
    assert 'data-rule="dropped_by_watermark"' in feed.widget.value


def test_the_feed_follows_the_alerts_hub_and_ignores_what_is_not_an_alert(tmp_path):
    with Hub(port=0, eventhubs={"alerts": 1}) as hub:
        sent = _alert("dropped_by_watermark", 4)
        send(hub.connection_string, [sent.to_json(), "not an alert"], eventhub="alerts")
        feed = AlertFeed()
        feed.follow_eventhub(hub.connection_string)
        try:
            wait_for(lambda: list(feed.alerts) == [sent] and feed.ignored == 1, what="the alert")
        finally:
            feed.stop()
    assert 'data-rule="dropped_by_watermark"' in feed.widget.value
