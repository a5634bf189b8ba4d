"""Backlog from the source: the hub's end in every progress report, and events behind per partition."""

from __future__ import annotations

import json

import pytest
from eventhub_clients import send, wait_for
from heartbeat_queries import start_reading

from streamlab.deadlines import drain
from streamlab.eventhubs.options import parse_options
from streamlab.eventhubs.source import EventHubsStreamReader
from streamlab.progress import as_dict, backlog, offsets

ZERO = {"0": 0, "1": 0, "2": 0, "3": 0}
# 7 events in partition 0 and 3 in partition 1, read 4 per batch: 2 + 2, then 3 + 1, then 2.
EXPECTED = [{"0": 5, "1": 1, "2": 0, "3": 0}, {"0": 2, "1": 0, "2": 0, "3": 0}, ZERO]


def _recorded(latest, end=None) -> dict:
    # A source entry as a report's own JSON has it: offsets as objects.
    return {
        "batchId": 3,
        "sources": [
            {
                "description": "eventhubs",
                "startOffset": {"0": 0, "1": 0},
                "endOffset": end or {"0": 4, "1": 2},
                "latestOffset": latest,
            }
        ],
    }


def test_backlog_is_latest_minus_end_per_partition_in_partition_order():
    report = _recorded({"10": 3, "9": 2, "0": 9, "1": 2}, {"10": 3, "9": 0, "0": 4, "1": 2})
    assert list(backlog(report)) == ["0", "1", "9", "10"]
    assert backlog(report) == {"0": 5, "1": 0, "9": 2, "10": 0}


def test_backlog_reads_offsets_given_as_json_text_as_a_live_query_gives_them():
    report = _recorded(json.dumps({"0": 9, "1": 2}), json.dumps({"0": 4, "1": 2}))
    assert backlog(report) == {"0": 5, "1": 0}
    assert backlog(json.dumps(_recorded({"0": 4, "1": 3}))) == {"0": 0, "1": 1}


@pytest.mark.parametrize("latest", [None, "null"])
def test_a_source_without_a_latest_offset_gets_a_sentence(latest):
    with pytest.raises(ValueError, match="reports no latestOffset: only a source that implements"):
        backlog(_recorded(latest))


def test_a_file_source_offset_is_refused_with_a_sentence():
    with pytest.raises(ValueError, match="not a map of partition to sequence number"):
        offsets({"logOffset": 3, "batchWatermarkMs": True})
    with pytest.raises(ValueError, match="there is no source 1"):
        backlog(_recorded({"0": 1}), source=1)
    with pytest.raises(ValueError, match="no progress report yet"):
        as_dict(None)


def test_reporting_the_latest_offset_asks_the_hub_nothing_more(hub, monkeypatch):
    # Spark calls reportLatestOffset right after latestOffset, every trigger: it must answer
    # from what latestOffset learnt, not with a management call of its own.
    import streamlab.eventhubs.source as source

    send(hub.connection_string, [f"a{i}" for i in range(7)], partition_id="0")
    reader = EventHubsStreamReader(
        parse_options(
            {
                "connectionString": hub.connection_string,
                "eventHubName": "heartbeats",
                "receiveOn": "executors",
                "startingPosition": "earliest",
                "maxEventsPerTrigger": "4",
            }
        )
    )
    calls = []
    real = source.partition_bounds
    monkeypatch.setattr(source, "partition_bounds", lambda *a: calls.append(a) or real(*a))
    assert reader.reportLatestOffset() is None  # nothing planned yet: nothing to say
    start = reader.initialOffset()
    assert len(calls) == 1
    end = reader.latestOffset(start, reader.getDefaultReadLimit())
    assert end == {"0": 4, "1": 0, "2": 0, "3": 0} and len(calls) == 2
    assert reader.reportLatestOffset() == {"0": 7, "1": 0, "2": 0, "3": 0}
    assert len(calls) == 2


def _backlogs(query) -> list[dict[str, int]]:
    return [backlog(p) for p in query.recentProgress if p["numInputRows"] > 0]


def _ends(query) -> list[dict[str, int]]:
    return [offsets(p["sources"][0]["endOffset"]) for p in query.recentProgress]


def test_available_now_reports_exactly_the_events_left_after_each_batch(spark, hub, tmp_path):
    send(hub.connection_string, [f"a{i}" for i in range(7)], partition_id="0")
    send(hub.connection_string, [f"b{i}" for i in range(3)], partition_id="1")
    query = start_reading(spark, hub, tmp_path / "ckpt", trigger={"availableNow": True})
    query.awaitTermination(300)
    assert _backlogs(query) == EXPECTED
    last = as_dict(query.lastProgress)["sources"][0]
    assert last["latestOffset"] == last["endOffset"] == {"0": 7, "1": 3, "2": 0, "3": 0}


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_a_running_query_reports_its_backlog_until_it_has_caught_up(
    spark, hub, tmp_path, receive_on
):
    send(hub.connection_string, [f"a{i}" for i in range(7)], partition_id="0")
    send(hub.connection_string, [f"b{i}" for i in range(3)], partition_id="1")
    query = start_reading(
        spark,
        hub,
        tmp_path / "ckpt",
        trigger={"processingTime": "100 milliseconds"},
        receiveOn=receive_on,
    )
    try:
        drain(query, within=300, what="the query to read the backlog")
        assert _backlogs(query) == EXPECTED
        # New events while it runs: the next batch reads them, and says it is level again.
        send(hub.connection_string, [f"c{i}" for i in range(2)], partition_id="3")
        # With receiveOn=driver the source knows of them once its receiver has them, a moment
        # after the send: processAllAvailable alone could return before that.
        wait_for(lambda: _ends(query)[-1]["3"] == 2, what="a batch that reads the new events")
        drain(query, within=300, what="the query to read the backlog")
    finally:
        query.stop()
    assert _backlogs(query)[-1] == ZERO
    assert _ends(query)[-1] == {"0": 7, "1": 3, "2": 0, "3": 2}
