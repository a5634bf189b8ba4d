"""Events the hub's retention removed before a query read them: the source says so.

A query's checkpoint holds, per partition, the next sequence number to read. When the query
is down for longer than the hub keeps events, the oldest of them are gone by the time it
restarts. By default (``failOnDataLoss=true``, as Spark's Kafka source) the restarted query
fails, naming the event hub, the partition and the range that is gone; with
``failOnDataLoss=false`` it reads on from the oldest event the hub kept and records the range
it skipped in the end offset of the batch that skipped it, which the query's progress shows.

The hub here keeps little: segments of 4 KiB and at most 8 KiB per partition. A batch of 100
events is one append, and an append that starts a new segment drops the oldest ones beyond
8 KiB: after 10 events and then 300 more in batches of 100, partition 2 keeps events 210 to
309, and 10 to 209 are gone.
"""

from __future__ import annotations

import json
import pickle

import pytest
from eventhub_clients import send
from pyspark.sql.streaming.datasource import ReadMaxRows

from streamlab.deadlines import finish
from streamlab.eventhubs import EventHubsDataLoss, EventHubsOptionError
from streamlab.eventhubs.options import parse_options
from streamlab.eventhubs.receivers import close_kept_receivers
from streamlab.eventhubs.source import EventHubsStreamReader, RangePartition
from streamlab.hub import Hub, Policy

#: Room for about one batch of 100 small events per segment, two segments per partition.
SMALL = Policy(segment_bytes=4096, retention_bytes=8192)

#: What the module docstring's sends leave in partition 2: events 10 to 209 are gone.
READ_BEFORE, SENT, FIRST_KEPT = 10, 310, 210


@pytest.fixture
def small_hub(tmp_path):
    """The emulator with a retention of a few KiB per partition."""
    with Hub(data_dir=tmp_path / "hub", port=0, eventhubs={"heartbeats": 4}, policy=SMALL) as hub:
        yield hub


def _outlast_retention(hub) -> None:
    """Send what the module docstring says, after a query read the first 10 events."""
    send(hub.connection_string, [f"late-{i}" for i in range(READ_BEFORE, SENT)], partition_id="2")


def _options(hub, **extra) -> dict:
    return {"connectionString": hub.connection_string, "eventHubName": "heartbeats", **extra}


def _run(spark, hub, tmp_path, **extra):
    """One availableNow life of a query that writes the hub's events to parquet."""
    reader = spark.readStream.format("eventhubs")
    for key, value in _options(hub, startingPosition="earliest", **extra).items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("parquet")
        .option("path", str(tmp_path / "out"))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="an availableNow read of the small hub")
    return query


def _sequence_numbers(spark, tmp_path) -> list[int]:
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    return sorted(r.sequenceNumber for r in rows if r.partition == "2")


def _read_the_first_ten(spark, hub, tmp_path) -> None:
    send(hub.connection_string, [f"early-{i}" for i in range(READ_BEFORE)], partition_id="2")
    _run(spark, hub, tmp_path)
    assert _sequence_numbers(spark, tmp_path) == list(range(READ_BEFORE))


#: What a learner reads when a restart finds its events gone.
LOST = (
    "events 10 to 209 of partition 2 of event hub 'heartbeats' were removed by the hub's "
    "retention before this query read them"
)


def test_a_restart_after_retention_removed_its_events_fails_naming_partition_and_range(
    spark, small_hub, tmp_path
):
    _read_the_first_ten(spark, small_hub, tmp_path)
    _outlast_retention(small_hub)
    try:
        _run(spark, small_hub, tmp_path)
    except Exception as error:  # Spark wraps the source's error in its own
        message = str(error)
    else:
        read = _sequence_numbers(spark, tmp_path)
        pytest.fail(
            f"the restart read on in silence: partition 2 went from sequence number "
            f"{READ_BEFORE - 1} to {read[READ_BEFORE]}, {read[READ_BEFORE] - READ_BEFORE} events "
            "skipped with no error"
        )
    assert LOST in message, message
    assert 'option("failOnDataLoss", "false")' in message, message
    assert "SharedAccessKey=" not in message
    # Nothing was planned past the gap: the checkpoint still holds the position it had.
    assert not (tmp_path / "ckpt" / "offsets" / "1").exists()
    assert _sequence_numbers(spark, tmp_path) == list(range(READ_BEFORE))


def test_without_fail_on_data_loss_the_query_reads_on_and_its_progress_shows_the_gap(
    spark, small_hub, tmp_path
):
    _read_the_first_ten(spark, small_hub, tmp_path)
    _outlast_retention(small_hub)
    query = _run(spark, small_hub, tmp_path, failOnDataLoss="false")
    assert _sequence_numbers(spark, tmp_path) == list(range(READ_BEFORE)) + list(
        range(FIRST_KEPT, SENT)
    )
    ends = [_offset(p["sources"][0]["endOffset"]) for p in query.recentProgress]
    skipped = [end for end in ends if "lostFrom.2" in end]
    assert skipped, f"no batch's endOffset records the skipped events: {ends}"
    assert skipped[0]["lostFrom.2"] == READ_BEFORE and skipped[0]["lostTo.2"] == FIRST_KEPT - 1
    assert skipped[0]["2"] == SENT
    # The record is in the checkpoint too, with the batch that skipped the events.
    planned = (tmp_path / "ckpt" / "offsets" / "1").read_text().splitlines()[-1]
    assert json.loads(planned)["lostTo.2"] == FIRST_KEPT - 1
    # The next life reads on from there; its batches record nothing more.
    send(small_hub.connection_string, ["after"], partition_id="2")
    query = _run(spark, small_hub, tmp_path, failOnDataLoss="false")
    assert _sequence_numbers(spark, tmp_path)[-2:] == [SENT - 1, SENT]
    assert all(
        "lostFrom.2" not in _offset(p["sources"][0]["endOffset"]) for p in query.recentProgress
    )


def _offset(text) -> dict:
    return json.loads(text) if isinstance(text, str) else dict(text)


@pytest.mark.parametrize("value", ["yes", "", "0"])
def test_fail_on_data_loss_must_be_true_or_false(value):
    with pytest.raises(
        EventHubsOptionError, match=f"failOnDataLoss must be true or false; got {value!r}"
    ):
        parse_options(
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "failOnDataLoss": value}
        )
    default = parse_options({"connectionString": "Endpoint=sb://h:1;EntityPath=x"})
    assert default.fail_on_data_loss is True
    relaxed = {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "FAILONDATALOSS": "False"}
    assert parse_options(relaxed).fail_on_data_loss is False


def _reader(hub, **extra) -> EventHubsStreamReader:
    return EventHubsStreamReader(parse_options(_options(hub, timeoutSeconds="20", **extra)))


#: Where a stopped query's checkpoint left the four partitions.
CHECKPOINT = {"0": 0, "1": 0, "2": READ_BEFORE, "3": 0}


@pytest.fixture
def gone(small_hub):
    """Partition 2 after a query read its first 10 events and retention took the next 200."""
    send(small_hub.connection_string, ["e"] * READ_BEFORE, partition_id="2")
    _outlast_retention(small_hub)
    yield small_hub
    close_kept_receivers()


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_planning_past_the_gap_fails_in_either_receive_mode(gone, receive_on):
    reader = _reader(gone, receiveOn=receive_on)
    try:
        with pytest.raises(EventHubsDataLoss, match=LOST):
            reader.latestOffset(CHECKPOINT, reader.getDefaultReadLimit())
    finally:
        reader.stop()


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_without_fail_on_data_loss_the_plan_skips_the_gap_and_records_it(gone, receive_on):
    reader = _reader(gone, receiveOn=receive_on, failOnDataLoss="false")
    try:
        # The limit counts the events that exist: five of them, from the oldest kept.
        planned = reader.latestOffset(CHECKPOINT, ReadMaxRows(5))
        assert planned == {
            **CHECKPOINT,
            "2": FIRST_KEPT + 5,
            "lostFrom.2": READ_BEFORE,
            "lostTo.2": FIRST_KEPT - 1,
        }
        assert reader.reportLatestOffset() == {**CHECKPOINT, "2": SENT}
        rows = [r[3] for p in reader.partitions(CHECKPOINT, planned) for r in reader.read(p)]
        assert rows == list(range(FIRST_KEPT, FIRST_KEPT + 5))
        reader.commit(planned)
        # The next batch starts from that offset, record and all, and records nothing more;
        # once all is read, the offset stays as it was: Spark sees no news, runs no batch.
        following = reader.latestOffset(planned, reader.getDefaultReadLimit())
        assert following == {**CHECKPOINT, "2": SENT}
        assert reader.latestOffset(following, reader.getDefaultReadLimit()) == following
        settled = {**following, "lostFrom.2": READ_BEFORE, "lostTo.2": FIRST_KEPT - 1}
        assert reader.latestOffset(settled, reader.getDefaultReadLimit()) == settled
    finally:
        reader.stop()


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_a_batch_replayed_after_its_events_went_fails_when_read(gone, receive_on):
    # offsets/N planned events 10 to 49; the query died before it committed them, and by the
    # restart the hub had let them go. A replay reads the plan: no latestOffset, no hub's begin.
    reader = _reader(gone, receiveOn=receive_on)
    try:
        with pytest.raises(EventHubsDataLoss, match=LOST):
            for partition in reader.partitions({"2": READ_BEFORE}, {"2": 50}):
                task = pickle.loads(pickle.dumps(reader))
                list(task.read(pickle.loads(pickle.dumps(partition))))
    finally:
        reader.stop()


@pytest.mark.parametrize("receive_on", ["driver", "executors"])
def test_a_replayed_batch_that_recorded_its_gap_reads_the_same_events_again(gone, receive_on):
    reader = _reader(gone, receiveOn=receive_on, failOnDataLoss="false")
    planned = {"2": 250, "lostFrom.2": READ_BEFORE, "lostTo.2": FIRST_KEPT - 1}
    try:
        read = []
        for partition in reader.partitions({"2": READ_BEFORE}, planned):
            if isinstance(partition, RangePartition):
                assert (partition.first, partition.last) == (FIRST_KEPT, 250)
            task = pickle.loads(pickle.dumps(reader))
            read += [row[3] for row in task.read(pickle.loads(pickle.dumps(partition)))]
        assert read == list(range(FIRST_KEPT, 250))
    finally:
        reader.stop()
