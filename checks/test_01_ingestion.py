"""Checks for lab 01 · Stateless ingestion from Event Hubs.

Spark throughout: batch DataFrames with the ``eventhubs`` row schema for the parsing rules,
and streams over parquet files with that exact schema, written by the check the way the hub
would store the events (partition from ``streamlab.hub.partition_for_key``, sequence numbers
per partition). The predictions are compared with what Spark does on the notebook's input:
``from_json`` on the same bodies (1.1), and the ``eventhubs`` source reading a fresh
emulator twice on one checkpoint (1.5), and the partitions and sequence numbers a fresh
emulator gives the heartbeats of ``HEARTBEAT_ROUNDS``, read back with the hub explorer (1.6).
"""

import json
import logging
import os
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from azure.eventhub import EventData, EventHubProducerClient
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from streamlab.deadlines import finish
from streamlab.eventhubs import SCHEMA as EVENTHUBS_SCHEMA
from streamlab.hub import Hub, partition_for_key
from streamlab.hub_explorer import explore
from streamlab.kit import (
    HUB_ARROW_SCHEMA,
    START,
    CheckFailed,
    exercise,
    expect_dataframe,
    expect_equal,
    expect_keys,
    expect_that,
    heartbeat_line,
    spark_facts,
)

EVENT_COLUMNS = EVENTHUBS_SCHEMA.fieldNames()
HEARTBEAT_COLUMNS = ["machine_name", "machine_time", "event_time", "partition", "sequence_number"]
PARTITIONS = 4


def body(machine, second, skew=0) -> bytes:
    sent = (START + timedelta(seconds=second + skew)).isoformat()
    return heartbeat_line(machine, sent).encode()


class HubFiles:
    """Stores events like the hub: partition from the key, sequence numbers per partition."""

    def __init__(self):
        self.sequence = defaultdict(int)
        self.events: list[dict] = []

    def send(self, key, payload, second, partition=None) -> dict:
        partition = str(partition_for_key(key, PARTITIONS) if partition is None else partition)
        number = self.sequence[partition]
        self.sequence[partition] += 1
        event = {
            "body": payload,
            "partition": partition,
            "offset": str(number * 128),
            "sequenceNumber": number,
            "enqueuedTime": START + timedelta(seconds=second),
            "publisher": None,
            "partitionKey": key,
            "properties": [("source", "check")],
        }
        self.events.append(event)
        return event

    def batch(self, spark) -> DataFrame:
        rows = [
            (
                e["body"],
                e["partition"],
                e["offset"],
                e["sequenceNumber"],
                e["enqueuedTime"],
                e["publisher"],
                e["partitionKey"],
                dict(e["properties"]),
            )
            for e in self.events
        ]
        return spark.createDataFrame(rows, EVENTHUBS_SCHEMA)

    def write(self, folder: Path, name: str) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        pq.write_table(
            pa.Table.from_pylist(self.events, schema=HUB_ARROW_SCHEMA), folder / f".{name}.parquet"
        )
        os.replace(folder / f".{name}.parquet", folder / f"{name}.parquet")
        self.events = []


def stream(spark, folder: Path) -> DataFrame:
    return spark.readStream.schema(EVENTHUBS_SCHEMA).parquet(str(folder))


def run_to_table(df: DataFrame, table: str, checkpoint_dir: str, outcome: str) -> None:
    query = (
        df.writeStream.format("memory")
        .queryName(table)
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your parsing to read its input")
    error = query.exception()
    if error is not None:
        raise CheckFailed(
            f"The {outcome} stream failed.",
            expected="the stream to read its input and end",
            actual=str(error),
        )


def heartbeat_rows(df: DataFrame) -> list[tuple]:
    """Heartbeats as tuples, timestamps as UTC strings, sorted."""
    rows = df.select(
        "machine_name",
        F.col("machine_time").cast("string"),
        F.col("event_time").cast("string"),
        "partition",
        "sequence_number",
    )
    return sorted(
        (tuple(r) for r in rows.collect()), key=lambda r: (r[2] or "", r[0] or "", r[4] or 0)
    )


def stamp(second) -> str:
    return (START + timedelta(seconds=second)).strftime("%Y-%m-%d %H:%M:%S")


def needs(nb, exercise_id: str, name: str, here: str) -> None:
    problem = nb.problem_for(exercise_id)
    if problem is not None:
        raise CheckFailed(
            f"Exercise {here} uses {name} from exercise {exercise_id}, which does not run yet.",
            expected=f"exercise {exercise_id} to run",
            actual=problem.sentence(),
        )


# --- Spark: parsing -----------------------------------------------------------------------


def _parsed(nb, events):
    return expect_dataframe(nb.parse_heartbeats(events), "parse_heartbeats", HEARTBEAT_COLUMNS)


@exercise("1.2", timeout=120)
def test_parse_heartbeats_on_a_batch(nb, spark):
    hub = HubFiles()
    # The machine's clock is 30 s slow: event_time must come from the hub, not the body.
    first = hub.send("m1", body("m1", 0, skew=-30), 0)
    second = hub.send("m2", body("m2", 1), 1)
    third = hub.send("m2", b"not json", 2)
    got = heartbeat_rows(_parsed(nb, hub.batch(spark)))
    expected = [
        ("m1", stamp(-30), stamp(0), first["partition"], first["sequenceNumber"]),
        ("m2", stamp(1), stamp(1), second["partition"], second["sequenceNumber"]),
        (None, None, stamp(2), third["partition"], third["sequenceNumber"]),
    ]
    if any(r[0] == "m1" and r[2] == stamp(-30) for r in got):
        raise CheckFailed(
            "event_time should be the event's enqueuedTime (the hub's clock), not the "
            f"machine_time from the body (m1's clock is 30 s slow); for m1 it is {stamp(-30)}.",
            expected=expected,
            actual=got,
        )
    expect_equal(
        got,
        expected,
        "Expected these heartbeats (an event whose body is not JSON gives nulls, it is not "
        "dropped here).",
    )


@exercise("1.2", timeout=60)
def test_parse_heartbeats_on_a_stream(nb, spark, tmp_path, checkpoint_dir):
    hub = HubFiles()
    sent = [
        hub.send(machine, body(machine, s), s) for s in range(2) for machine in ("m1", "m2", "m3")
    ]
    hub.write(tmp_path / "hub", "0")
    parsed = _parsed(nb, stream(spark, tmp_path / "hub"))
    run_to_table(parsed, "check_1_2", checkpoint_dir, "parsed")
    got = heartbeat_rows(spark.table("check_1_2"))
    expect_that(
        len(got) == 6 and all(r[0] and r[1] for r in got),
        "Six heartbeats went in; expected six parsed rows with a machine_name and a machine_time.",
        expected="six rows, each with a machine_name and a machine_time",
        actual=got,
    )
    numbers = sorted((r[0], r[3], r[4]) for r in got)
    expected = sorted((e["partitionKey"], e["partition"], e["sequenceNumber"]) for e in sent)
    expect_equal(
        numbers,
        expected,
        "partition and sequence_number should be each event's partition and sequenceNumber, "
        "shown as (machine, partition, number).",
    )


# --- Spark: quarantine --------------------------------------------------------------------

MAX_BODY_BYTES = 1024


def padded(payload: bytes, size: int) -> bytes:
    """A JSON body grown to exactly ``size`` bytes with a field the schema does not name."""
    document = json.loads(payload)
    document["padding"] = ""
    document["padding"] = "x" * (size - len(json.dumps(document).encode()))
    return json.dumps(document).encode()


BAD = [  # (body, expected reason)
    (b"", "empty body"),
    (None, "empty body"),
    (b'{"machine_name": "m1", "pad": "' + b"x" * 1100 + b'"}', "oversized body"),
    (
        padded(b'{"machine_name": "m1", "machine_time": "2026-11-22T10:00:05+00:00"}', 1025),
        "oversized body",
    ),
    (b"y" * 1500, "oversized body"),
    (b"machine_name=m1", "not JSON"),
    (b'{"machine_name": "m1", "machine_time": ', "not JSON"),
    (b'{"machine_time": "2026-11-22T10:00:05+00:00"}', "missing machine_name"),
    (
        b'{"machine_name": "  ", "machine_time": "2026-11-22T10:00:05+00:00"}',
        "missing machine_name",
    ),
    (b"[1, 2]", "missing machine_name"),
    (b'{"machine_name": "m1", "machine_time": "yesterday"}', "bad timestamp"),
    (b'{"machine_name": "m1"}', "bad timestamp"),
]


def _split(nb, events):
    needs(nb, "1.2", "parse_heartbeats", "1.3")
    result = nb.split_heartbeats(events)
    expect_that(
        isinstance(result, tuple) and len(result) == 2,
        "split_heartbeats() should return a pair (heartbeats, quarantine).",
        expected="a tuple of 2",
        actual=f"{type(result).__name__}"
        f"{f' of {len(result)}' if isinstance(result, (tuple, list)) else ''}",
    )
    heartbeats, quarantine = result
    for name, df in (("heartbeats", heartbeats), ("quarantine", quarantine)):
        expect_that(
            isinstance(df, DataFrame),
            f"The {name} half of split_heartbeats() should be a DataFrame.",
            expected="a DataFrame",
            actual=type(df).__name__,
        )
    expect_equal(
        heartbeats.columns,
        HEARTBEAT_COLUMNS,
        "The heartbeats should have these columns (parse_heartbeats' output).",
    )
    expect_equal(
        quarantine.columns,
        EVENT_COLUMNS + ["reason"],
        "The quarantine should keep every event column and add reason.",
    )
    return heartbeats, quarantine


@exercise("1.3", timeout=90)
def test_each_bad_event_gets_its_reason(nb, spark):
    hub = HubFiles()
    for i, (payload, _) in enumerate(BAD):
        hub.send("bad", payload, i, partition=0)  # sequence number i identifies the event
    hub.send("m1", body("m1", 20), 20)
    hub.send("m2", padded(body("m2", 21), MAX_BODY_BYTES), 21)  # exactly at the limit: good
    heartbeats, quarantine = _split(nb, hub.batch(spark))
    got = {
        r["sequenceNumber"]: r["reason"]
        for r in quarantine.select("sequenceNumber", "reason").collect()
    }
    wrong = []  # (body as shown, reason expected, reason given)
    for i, (payload, reason) in enumerate(BAD):
        if got.get(i) != reason:
            shown = (
                "null"
                if payload is None
                else repr(payload[:45].decode() + ("..." if len(payload) > 45 else ""))
            )
            wrong.append((shown, reason, got.get(i)))
    expect_that(
        not wrong,
        f"{len(wrong)} of the {len(BAD)} bad events were not quarantined with their reason "
        "(shown as body: reason; None: not in the quarantine).",
        expected="\n".join(f"body {shown}: {reason!r}" for shown, reason, _ in wrong),
        actual="\n".join(f"body {shown}: {given!r}" for shown, _, given in wrong),
    )
    expect_equal(
        [r[0] for r in heartbeat_rows(heartbeats)],
        ["m1", "m2"],
        "The two good heartbeats should come out in heartbeats, and nothing else; m2's body is "
        f"exactly {MAX_BODY_BYTES} bytes long, which is not over the limit.",
        hint="A body is oversized only when it is longer than MAX_BODY_BYTES.",
    )


@exercise("1.3", timeout=90)
def test_quarantine_keeps_the_event_as_it_came(nb, spark):
    hub = HubFiles()
    hub.send("m7", b"oops", 3)
    _, quarantine = _split(nb, hub.batch(spark))
    rows = quarantine.collect()
    expect_equal(len(rows), 1, "One bad event went in; the quarantine should hold one row.")
    row = rows[0]
    expect_that(
        bytes(row["body"]) == b"oops"
        and row["partitionKey"] == "m7"
        and row["properties"] == {"source": "check"},
        "The quarantined row should be the event unchanged (body, partitionKey, properties, ...).",
        expected="body b'oops', partitionKey 'm7', properties {'source': 'check'}, ...",
        actual=row.asDict(),
    )


@exercise("1.3", timeout=90)
def test_a_stream_with_bad_events_keeps_running(nb, spark, tmp_path):
    hub = HubFiles()
    for s in range(3):
        hub.send("m1", body("m1", s), s)
        hub.send("m2", BAD[s * 3][0], s)
    hub.write(tmp_path / "hub", "0")
    heartbeats, quarantine = _split(nb, stream(spark, tmp_path / "hub"))
    run_to_table(heartbeats, "check_1_3_good", str(tmp_path / "ck-good"), "heartbeats")
    run_to_table(quarantine, "check_1_3_bad", str(tmp_path / "ck-bad"), "quarantine")
    good = spark.table("check_1_3_good").count()
    reasons = sorted(r["reason"] for r in spark.table("check_1_3_bad").collect())
    expected = sorted(reason for _, reason in (BAD[0], BAD[3], BAD[6]))
    expect_equal(
        (good, reasons),
        (3, expected),
        "Three good and three bad events went into the stream: expected 3 heartbeats and the "
        "reasons of the 3 bad events, shown as (heartbeats, reasons).",
    )


# --- Spark: partitions --------------------------------------------------------------------


def _spread(nb, events) -> dict:
    result = expect_dataframe(nb.partitions_per_key(events), "partitions_per_key")
    expect_that(
        sorted(result.columns) == ["partitionKey", "partitions"],
        "partitions_per_key() should return the columns partitionKey and partitions.",
        expected="partitionKey and partitions, in any order",
        actual=result.columns,
    )
    rows = result.collect()
    keys = [r["partitionKey"] for r in rows]
    expect_that(
        len(keys) == len(set(keys)),
        "partitions_per_key() should return one row per partitionKey; these keys have repeats.",
        expected="each partitionKey once",
        actual=keys,
    )
    return {r["partitionKey"]: r["partitions"] for r in rows}


@exercise("1.4", timeout=90)
def test_each_key_lands_on_one_partition(nb, spark):
    hub = HubFiles()
    for s in range(4):
        for machine in ("Producer 1", "Producer 2", "Producer 3", "Producer 4"):
            hub.send(machine, body(machine, s), s)
    got = _spread(nb, hub.batch(spark))
    expected = {
        m: [str(partition_for_key(m, PARTITIONS))]
        for m in ("Producer 1", "Producer 2", "Producer 3", "Producer 4")
    }
    expect_equal(
        got, expected, "Each producer's 4 events were stored on the partition its key hashes to."
    )


@exercise("1.4", timeout=90)
def test_a_key_on_several_partitions_shows_them_all(nb, spark):
    hub = HubFiles()
    for s, partition in enumerate(["3", "1", "3", "0"]):  # no key guarantee: spread around
        hub.send("rogue", body("rogue", s), s, partition=partition)
    got = _spread(nb, hub.batch(spark))
    expect_equal(
        got,
        {"rogue": ["0", "1", "3"]},
        "Events of one key stored on partitions 3, 1, 3 and 0 should give the sorted distinct "
        "partitions.",
    )


# --- Spark: what the parser makes of odd bodies -------------------------------------------


def _parsed_by_spark(spark, bodies: list[bytes]) -> list[tuple]:
    parsed = F.from_json(
        F.col("body").cast("string"), "machine_name STRING, machine_time TIMESTAMP"
    )
    rows = (
        spark.createDataFrame([(i, b) for i, b in enumerate(bodies)], "i INT, body BINARY")
        .select("i", parsed["machine_name"], parsed["machine_time"].cast("string"))
        .orderBy("i")
        .collect()
    )
    return [(name, time) for _, name, time in rows]


@exercise("1.1", timeout=120)
def test_parse_prediction_matches_spark(nb, spark):
    bodies, predicted = nb.ODD_BODIES, nb.PARSED
    if not isinstance(predicted, list | tuple) or len(predicted) != len(bodies):
        raise CheckFailed(
            f"PARSED should be a list of {len(bodies)} pairs (machine_name, machine_time), one "
            f"per body of ODD_BODIES; it is {predicted!r}."
        )
    answer = [tuple(pair) for pair in predicted]
    spark_says = spark_facts(
        "1.1 parsed",
        lambda: _parsed_by_spark(spark, list(bodies)),
        check=__file__,
        given=list(bodies),
    )
    wrong = [i for i, (a, b) in enumerate(zip(answer, spark_says)) if a != b]
    hint = ""
    if any(bodies[i].startswith(b"{") and answer[i][1] is None for i in wrong):
        hint = (
            "You wrote null for a time Spark reads: a timestamp field takes more than one form "
            "of value. For each such body, ask what the schema's type can make of the value "
            "before you write null."
        )
    elif wrong:
        hint = (
            "For each wrong body, ask how strictly the schema's field names are compared with "
            "the body's, and what the schema's type makes of a value of another JSON type."
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against what F.from_json with HEARTBEAT_BODY_SCHEMA gives for each "
        f"body of ODD_BODIES (wrong: {', '.join(f'body {i}' for i in wrong) or 'none'}).",
        hint=hint,
    )


# --- Spark: where a restarted query resumes -----------------------------------------------


def _send_to(connection_string: str, partition: str, count: int) -> None:
    with EventHubProducerClient.from_connection_string(
        connection_string, eventhub_name="heartbeats"
    ) as producer:
        batch = producer.create_batch(partition_id=partition)
        for second in range(count):
            batch.add(EventData(body("m1", second)))
        producer.send_batch(batch)


def _read_all(spark, connection_string: str, checkpoint_dir: str) -> list[dict]:
    query = (
        spark.readStream.format("eventhubs")
        .option("connectionString", connection_string)
        .option("eventHubName", "heartbeats")
        .option("startingPosition", "earliest")
        .load()
        .writeStream.format("noop")
        .option("checkpointLocation", checkpoint_dir)
        .trigger(availableNow=True)
        .start()
    )
    finish(query, within=240, what="the check's query over your quarantine to read its input")
    return query.recentProgress


def _offsets(text):
    return json.loads(text) if isinstance(text, str) else text


def _restart_in_spark(spark, tmp_path: Path, checkpoint_dir: str) -> dict:
    """Two runs over a hub of two partitions: the second run's progress report."""
    logging.getLogger("azure").setLevel(logging.ERROR)
    with Hub(data_dir=tmp_path / "hub", eventhubs={"heartbeats": 2}) as hub:
        _send_to(hub.connection_string, "0", 3)
        _send_to(hub.connection_string, "1", 2)
        _read_all(spark, hub.connection_string, checkpoint_dir)
        _send_to(hub.connection_string, "1", 4)
        [report] = _read_all(spark, hub.connection_string, checkpoint_dir)
    source = report["sources"][0]
    return {
        "batchId": report["batchId"],
        "endOffset": _offsets(source["endOffset"]),
        "numInputRows": report["numInputRows"],
        "startOffset": _offsets(source["startOffset"]),
    }


@exercise("1.5", timeout=240)
def test_restart_prediction_matches_spark(nb, spark, tmp_path, checkpoint_dir):
    keys = ["batchId", "endOffset", "numInputRows", "startOffset"]
    predicted = expect_keys(nb.RESTART, "RESTART", keys)
    spark_says = spark_facts(
        "1.5 the restart",
        lambda: _restart_in_spark(spark, tmp_path, checkpoint_dir),
        check=__file__,
    )
    answer = {key: predicted[key] for key in keys}
    hint = ""
    if answer["batchId"] != spark_says["batchId"]:
        hint = "Batch ids carry on across restarts: the checkpoint remembers the last one."
    elif answer["endOffset"] != spark_says["endOffset"]:
        hint = (
            "An offset is the next sequence number to read: after events 0 to 5 of a partition, 6."
        )
    expect_equal(
        answer,
        spark_says,
        "Your prediction against the progress report of the second run.",
        hint=hint,
    )


# --- The hub: where each machine's heartbeats land ------------------------------------------


def _landing_on_a_fresh_hub(rounds) -> dict:
    """Send the rounds as the notebook does; what the hub stored, machine by machine."""
    logging.getLogger("azure").setLevel(logging.ERROR)
    with Hub(eventhubs={"heartbeats": PARTITIONS}) as hub:
        with EventHubProducerClient.from_connection_string(
            hub.connection_string, eventhub_name="heartbeats"
        ) as producer:
            for second, machines in enumerate(rounds):
                for machine in machines:
                    batch = producer.create_batch(partition_key=machine)
                    batch.add(EventData(body(machine, second)))
                    producer.send_batch(batch)
        sent = sum(len(machines) for machines in rounds)
        [heartbeats] = explore(hub.connection_string, ["heartbeats"], recent=sent).eventhubs
    landing: dict = {}
    for partition in heartbeats.partitions:
        for event in partition.recent:
            landing.setdefault(event.partition_key, (partition.id, []))[1].append(
                event.sequence_number
            )
    return landing


@exercise("1.6", timeout=120)
def test_landing_prediction_matches_the_hub(nb):
    predicted, rounds = nb.LANDING, nb.HEARTBEAT_ROUNDS
    machines = sorted({machine for machines in rounds for machine in machines})
    expect_keys(
        predicted,
        "LANDING",
        machines,
        hint="LANDING has one entry per machine of HEARTBEAT_ROUNDS.",
    )
    try:
        answer = {m: (str(predicted[m][0]), list(predicted[m][1])) for m in machines}
    except (TypeError, IndexError, KeyError):
        raise CheckFailed(
            "Each entry of LANDING should be a pair (partition, sequence_numbers), for example "
            f'("3", [0, 1]); got {predicted!r}.'
        ) from None
    hub_says = spark_facts(
        "1.6 the landing",
        lambda: _landing_on_a_fresh_hub(rounds),
        check=__file__,
        given=[list(machines) for machines in rounds],
    )
    hint = ""
    if any(answer[m][0] != hub_says[m][0] for m in machines):
        hint = "The partition comes from the key alone: partition_for_key(name, 4)."
    elif answer != hub_says:
        hint = (
            "Sequence numbers count a partition's events, whoever sent them: machines that "
            "share a partition share its count."
        )
    expect_equal(
        answer,
        hub_says,
        "Your prediction against the partition and sequence numbers the hub gave each "
        "machine's heartbeats.",
        hint=hint,
    )
