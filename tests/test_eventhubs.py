"""The `eventhubs` Spark source and sink against the real emulator and the real SDK."""

from __future__ import annotations

import json
import pickle
import socket

import pytest
from eventhub_clients import Receiver, send

from streamlab.deadlines import drain
from streamlab.eventhubs import SCHEMA, SYSTEM_SCHEMA, EventHubsOptionError
from streamlab.eventhubs.options import endpoint, parse_options
from streamlab.eventhubs.receivers import (
    RECEIVE_LOG,
    SOCKET_TIMEOUT_ENV,
    SOCKET_TIMEOUT_S,
    Receivers,
    ReceiveTimeout,
)
from streamlab.eventhubs.source import EventHubsStreamReader, RangePartition, apply_limit
from streamlab.hub import partition_for_key


def _stream(spark, hub, **options):
    reader = (
        spark.readStream.format("eventhubs")
        .option("connectionString", hub.connection_string)
        .option("eventHubName", "heartbeats")
    )
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _run_to_parquet(df, output, checkpoint):
    query = (
        df.writeStream.format("parquet")
        .option("path", str(output))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination(300)
    return query


def _heartbeats(machines, seconds):
    return [
        json.dumps({"machine_name": m, "machine_time": f"2026-11-22T10:00:{s:02d}Z"})
        for s in range(seconds)
        for m in machines
    ]


def test_limit_is_shared_fairly_between_partitions():
    start = {"0": 0, "1": 10, "2": 5}
    latest = {"0": 100, "1": 12, "2": 5}
    assert apply_limit(start, latest, 10) == {"0": 8, "1": 12, "2": 5}
    assert apply_limit(start, latest, 1000) == latest
    assert sum(apply_limit(start, latest, 7)[p] - start[p] for p in start) == 7


def test_the_limit_never_leaves_a_partition_with_events_out_of_a_batch():
    # A partition left out would look as if it had nothing to read.
    start = {"0": 0, "1": 0, "2": 0, "3": 7}
    latest = {"0": 50, "1": 3, "2": 9, "3": 7}
    granted = apply_limit(start, latest, 2)
    assert {p: granted[p] - start[p] for p in start} == {"0": 1, "1": 1, "2": 1, "3": 0}


def test_system_properties_say_how_far_each_partition_was_read(spark, hub, tmp_path):
    send(hub.connection_string, [f"a{i}" for i in range(7)], partition_id="0")
    send(hub.connection_string, [f"b{i}" for i in range(2)], partition_id="1")
    df = _stream(
        spark, hub, startingPosition="earliest", maxEventsPerTrigger=4, systemProperties="true"
    )
    assert df.schema == SYSTEM_SCHEMA and SYSTEM_SCHEMA.fieldNames()[:-1] == SCHEMA.fieldNames()
    _run_to_parquet(df, tmp_path / "out", tmp_path / "ckpt")
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert len(rows) == 9
    # Every batch knew the partition's end, however much of it the limit let it read.
    ends = {(r.partition, r.systemProperties["lastEnqueuedSequenceNumber"]) for r in rows}
    assert ends == {("0", "6"), ("1", "1")}
    assert _stream(spark, hub).schema == SCHEMA  # without the option, the connector's columns


def test_a_query_started_on_a_backlog_plans_its_first_batch_to_the_hubs_end(spark, hub, tmp_path):
    # A receiver that has just connected has delivered nothing yet: the first batch must not be
    # planned from its empty buffer, or a consumer would take "no rows" for "nothing to read".
    send(hub.connection_string, [f"e{i}" for i in range(2000)])
    sizes: list[int] = []
    query = (
        _stream(spark, hub, startingPosition="earliest")
        .writeStream.foreachBatch(lambda df, batch_id: sizes.append(df.count()))
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(processingTime="200 milliseconds")
        .start()
    )
    try:
        drain(query, within=300, what="the query to read what the hub holds")
    finally:
        query.stop()
    assert sizes and sizes[0] == 2000, sizes


def test_events_arrive_with_the_connector_schema(spark, hub, tmp_path):
    machines = [f"machine-{i}" for i in range(6)]
    for machine in machines:
        send(
            hub.connection_string,
            _heartbeats([machine], 3),
            partition_key=machine,
            properties={"kind": "heartbeat"},
        )
    df = _stream(spark, hub, startingPosition="earliest")
    assert df.schema == SCHEMA
    _run_to_parquet(df, tmp_path / "out", tmp_path / "ckpt")
    rows = spark.read.parquet(str(tmp_path / "out")).collect()
    assert len(rows) == 18
    for row in rows:
        body = json.loads(row.body)
        # The same key always lands on the same partition: the emulator's rule, as Azure's.
        assert row.partitionKey == body["machine_name"]
        assert row.partition == str(partition_for_key(row.partitionKey, 4))
        assert row.properties == {"kind": "heartbeat"}
        assert row.enqueuedTime is not None and row.offset is not None
    for partition in {r.partition for r in rows}:
        sequence = sorted(r.sequenceNumber for r in rows if r.partition == partition)
        assert sequence == list(range(len(sequence)))


def test_a_restarted_query_reads_every_event_exactly_once(spark, hub, tmp_path):
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"
    send(hub.connection_string, [f"first-{i}" for i in range(40)])
    _run_to_parquet(_stream(spark, hub, startingPosition="earliest"), output, checkpoint)
    send(hub.connection_string, [f"second-{i}" for i in range(25)])
    _run_to_parquet(_stream(spark, hub, startingPosition="earliest"), output, checkpoint)
    bodies = [r.body.decode() for r in spark.read.parquet(str(output)).collect()]
    assert sorted(bodies) == sorted(
        [f"first-{i}" for i in range(40)] + [f"second-{i}" for i in range(25)]
    )


def test_max_events_per_trigger_bounds_each_batch(spark, hub, tmp_path):
    send(hub.connection_string, [f"e{i}" for i in range(45)])
    query = _run_to_parquet(
        _stream(spark, hub, startingPosition="earliest", maxEventsPerTrigger=10),
        tmp_path / "out",
        tmp_path / "ckpt",
    )
    sizes = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert sum(sizes) == 45 and max(sizes) <= 10 and len(sizes) >= 5


def test_starting_positions(spark, hub, tmp_path):
    send(hub.connection_string, ["old-0", "old-1", "old-2"], partition_id="0")
    # "latest" is fixed when the query first runs: nothing before it is read, all after it is.
    latest_out, latest_ckpt = tmp_path / "latest", tmp_path / "ckpt-latest"
    first = _run_to_parquet(_stream(spark, hub, startingPosition="latest"), latest_out, latest_ckpt)
    assert all(p["numInputRows"] == 0 for p in first.recentProgress)
    send(hub.connection_string, ["new-0"], partition_id="0")
    _run_to_parquet(_stream(spark, hub, startingPosition="latest"), latest_out, latest_ckpt)
    assert [r.body.decode() for r in spark.read.parquet(str(latest_out)).collect()] == ["new-0"]
    # A JSON map starts each named partition at that sequence number, inclusive.
    _run_to_parquet(
        _stream(spark, hub, startingPosition=json.dumps({"0": 1})),
        tmp_path / "explicit",
        tmp_path / "ckpt-explicit",
    )
    bodies = sorted(
        r.body.decode() for r in spark.read.parquet(str(tmp_path / "explicit")).collect()
    )
    assert bodies == ["new-0", "old-1", "old-2"]


def test_the_sink_sends_rows_that_the_sdk_receives(spark, hub, tmp_path):
    send(hub.connection_string, [f"m{i % 3}" for i in range(9)])
    transitions = _stream(spark, hub, startingPosition="earliest").selectExpr(
        "CAST(body AS STRING) AS partitionKey",
        "to_json(named_struct('machine_name', CAST(body AS STRING), "
        "'seq', sequenceNumber)) AS body",
    )
    with Receiver(hub.connection_string, eventhub="status", starting_position="-1") as receiver:
        query = (
            transitions.writeStream.format("eventhubs")
            .option("connectionString", hub.connection_string)
            .option("eventHubName", "status")
            .option("checkpointLocation", str(tmp_path / "ckpt"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination(300)
        events = receiver.wait_count(9)
    received = sorted(
        (
            e.partition_key.decode() if isinstance(e.partition_key, bytes) else e.partition_key,
            json.loads(e.body_as_str())["machine_name"],
        )
        for e in events
    )
    assert received == sorted((f"m{i % 3}", f"m{i % 3}") for i in range(9))


def test_a_failed_send_fails_the_batch_and_commits_nothing(spark, hub, tmp_path):
    send(hub.connection_string, ["m1", "m2"])
    bodies = _stream(spark, hub, startingPosition="earliest").selectExpr(
        "CAST(body AS STRING) AS body"
    )
    query = (
        bodies.writeStream.format("eventhubs")
        .option("connectionString", hub.connection_string)
        .option("eventHubName", "no-such-hub")
        .option("checkpointLocation", str(tmp_path / "ckpt"))
        .trigger(availableNow=True)
        .start()
    )
    with pytest.raises(Exception) as error:
        query.awaitTermination(300)
    message = str(error.value)
    assert (
        f"could not send to event hub 'no-such-hub' at {endpoint(hub.connection_string)}" in message
    )
    assert "could not be found" in message and "is the event hub's name right?" in message
    assert "SharedAccessKey=" not in message
    # The batch is not committed: a restart with the right hub sends its rows again.
    assert (tmp_path / "ckpt" / "offsets" / "0").exists()
    assert not (tmp_path / "ckpt" / "commits" / "0").exists()


def test_an_unreachable_hub_fails_the_query_with_a_sentence(spark, tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dead = (
        f"Endpoint=sb://127.0.0.1:{port};SharedAccessKeyName=x;SharedAccessKey=y;"
        "UseDevelopmentEmulator=true"
    )
    df = (
        spark.readStream.format("eventhubs")
        .option("connectionString", dead)
        .option("eventHubName", "heartbeats")
        .load()
    )
    query = df.writeStream.format("memory").queryName("dead_hub").trigger(availableNow=True).start()
    with pytest.raises(Exception) as error:
        query.awaitTermination(300)
    assert "Is the hub running" in str(error.value)
    assert f"sb://127.0.0.1:{port}" in str(error.value) and "SharedAccessKey=y" not in str(
        error.value
    )


@pytest.mark.parametrize(
    "options, words",
    [
        ({}, "connectionString"),
        (
            {
                "connectionString": "Endpoint=sb://127.0.0.1:1;SharedAccessKeyName=a;SharedAccessKey=b"
            },
            "eventHubName",
        ),
        (
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "startingPosition": "yesterday"},
            "startingPosition must be",
        ),
        (
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "maxEventsPerTrigger": "0"},
            "maxEventsPerTrigger",
        ),
        (
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "systemProperties": "yes"},
            "systemProperties must be true or false",
        ),
        (
            {"connectionString": "Endpoint=sb://h:1;EntityPath=x", "receiveOn": "workers"},
            "receiveOn must be driver or executors; got 'workers'",
        ),
    ],
)
def test_bad_options_are_named(options, words):
    from streamlab.eventhubs.options import parse_options

    with pytest.raises(EventHubsOptionError, match=words):
        parse_options(options)


def _rows(spark, path):
    # Every column the hub decides; systemProperties depends on when a batch was planned.
    return sorted(tuple(r)[: len(SCHEMA.fields)] for r in spark.read.parquet(str(path)).collect())


def test_on_executors_a_partition_is_a_range_its_task_reads_with_a_receiver_of_its_own(hub):
    send(hub.connection_string, [f"e{i}" for i in range(10)], partition_id="0")
    options = parse_options(
        {
            "connectionString": hub.connection_string,
            "eventHubName": "heartbeats",
            "receiveOn": "executors",
            "timeoutSeconds": "2",
        }
    )
    reader = EventHubsStreamReader(options)
    # Planned from the hub's ends (one management call), with no receiver on the driver.
    latest = reader.latestOffset({"0": 2, "1": 0}, reader.getDefaultReadLimit())
    assert latest == {"0": 10, "1": 0} and reader._receivers is None
    (partition,) = reader.partitions({"0": 2, "1": 0}, {"0": 7, "1": 0})
    assert isinstance(partition, RangePartition) and not hasattr(partition, "rows")
    # The task gets a pickled copy of the reader and reads exactly [first, last).
    task = pickle.loads(pickle.dumps(reader))
    rows = list(task.read(pickle.loads(pickle.dumps(partition))))
    assert [(r[1], r[3], r[0]) for r in rows] == [("0", i, f"e{i}".encode()) for i in range(2, 7)]
    reader.commit(latest)
    assert reader._receivers is None
    # Events that do not arrive fail the task with the driver mode's sentence.
    with pytest.raises(
        ReceiveTimeout,
        match=r"partition 0 has events up to 9, needs up to 11.*"
        r"Is the hub running\?",
    ):
        list(task.read(RangePartition("0", 8, 12, None)))


def test_the_receive_log_stamps_each_event_when_the_receiver_gets_it(hub, tmp_path, monkeypatch):
    import time

    log = tmp_path / "received.log"
    monkeypatch.setenv(RECEIVE_LOG, str(log))
    sent_after = time.time()
    send(hub.connection_string, [f"e{i}" for i in range(5)], partition_id="1")
    receivers = Receivers(
        parse_options({"connectionString": hub.connection_string, "eventHubName": "heartbeats"})
    )
    try:
        receivers.ensure({"1": 0})
        rows = receivers.take("1", 0, 5, 10)
        taken = time.time()
    finally:
        receivers.close()
    lines = [line.split() for line in log.read_text().splitlines()]
    assert (
        [(p, int(s)) for p, s, _, _ in lines]
        == [("1", r[3]) for r in rows]
        == [("1", i) for i in range(5)]
    )
    for (_, _, enqueued, received), row in zip(lines, rows):
        assert float(enqueued) == pytest.approx(row[4].timestamp(), abs=1e-3)
        assert sent_after - 1 <= float(enqueued) <= float(received) <= taken


def test_without_the_receive_log_nothing_is_written(hub, tmp_path, monkeypatch):
    monkeypatch.delenv(RECEIVE_LOG, raising=False)
    monkeypatch.delenv(SOCKET_TIMEOUT_ENV, raising=False)
    here = tmp_path / "cwd"
    here.mkdir()
    monkeypatch.chdir(here)
    send(hub.connection_string, ["e0"], partition_id="1")
    receivers = Receivers(
        parse_options({"connectionString": hub.connection_string, "eventHubName": "heartbeats"})
    )
    try:
        receivers.ensure({"1": 0})
        assert len(receivers.take("1", 0, 1, 10)) == 1
        # The SDK hands events over only after its socket read times out: not its 0.2 s.
        assert receivers._partitions["1"].client._config.socket_timeout == SOCKET_TIMEOUT_S <= 0.02
    finally:
        receivers.close()
    assert list(here.iterdir()) == []


def test_on_executors_available_now_reads_what_the_driver_mode_reads_exactly_once(
    spark, hub, tmp_path
):
    machines = [f"machine-{i}" for i in range(6)]
    for machine in machines:
        send(
            hub.connection_string,
            _heartbeats([machine], 3),
            partition_key=machine,
            properties={"kind": "heartbeat"},
        )
    modes = {
        "driver": _stream(spark, hub, startingPosition="earliest", systemProperties="true"),
        "executors": _stream(
            spark,
            hub,
            startingPosition="earliest",
            systemProperties="true",
            receiveOn="executors",
            maxEventsPerTrigger=7,
        ),
    }
    assert modes["executors"].schema == modes["driver"].schema == SYSTEM_SCHEMA
    for mode, df in modes.items():
        _run_to_parquet(df, tmp_path / mode, tmp_path / f"ckpt-{mode}")
    send(hub.connection_string, [f"late-{i}" for i in range(25)])
    for mode, df in modes.items():  # a restart on the same checkpoint
        _run_to_parquet(df, tmp_path / mode, tmp_path / f"ckpt-{mode}")
    rows = {mode: _rows(spark, tmp_path / mode) for mode in modes}
    events = {(r[1], r[3]) for r in rows["executors"]}  # (partition, sequenceNumber)
    assert len(rows["executors"]) == len(events) == 18 + 25
    assert rows["executors"] == rows["driver"]
    for row in spark.read.parquet(str(tmp_path / "executors")).collect():
        assert int(row.systemProperties["lastEnqueuedSequenceNumber"]) >= row.sequenceNumber


def test_on_executors_a_processing_time_query_reads_every_event_once_across_a_restart(
    spark, hub, tmp_path
):
    output, checkpoint = tmp_path / "out", tmp_path / "ckpt"

    def run() -> None:
        query = (
            _stream(spark, hub, startingPosition="earliest", receiveOn="executors")
            .writeStream.format("parquet")
            .option("path", str(output))
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="200 milliseconds")
            .start()
        )
        try:
            drain(query, within=300, what="the query to read what the hub holds")
        finally:
            query.stop()

    send(hub.connection_string, [f"first-{i}" for i in range(40)])
    run()
    send(hub.connection_string, [f"second-{i}" for i in range(25)])
    run()
    bodies = [r.body.decode() for r in spark.read.parquet(str(output)).collect()]
    assert sorted(bodies) == sorted(
        [f"first-{i}" for i in range(40)] + [f"second-{i}" for i in range(25)]
    )
