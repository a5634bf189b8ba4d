"""The capstone end to end, once, with every real part.

The local hub, a producer fleet sending one heartbeat a second, lab 08's solution query (its
``monitor_settings`` and ``monitor_writer``, loaded from the notebook the way the grader loads
it, with lab 05's ``CatchUpProcessor``) writing to the ``status`` event hub, a ``StatusBoard``
following that hub with ``EventHubConsumerClient``, and a second query landing lab 08's
``monitor_transitions`` in a Delta table with ``streamlab.delta``. A paused machine must turn
Unhealthy on the board, stamped exactly its last heartbeat's enqueue time + the 5 s timeout,
and Healthy again once it resumes, while the others stay Healthy; the Delta table must hold
each of those transitions exactly once, and lab 08's ``decode_status`` must read the same story
from the status hub.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from azure.eventhub import EventHubConsumerClient
from eventhub_clients import Receiver, wait_for

from streamlab.delta import delta_writer, read_table
from streamlab.fleet import Fleet
from streamlab.hub import partition_for_key
from streamlab.solutions import load_solution
from streamlab.widgets import StatusBoard

MACHINES = ["m1", "m2", "m3"]
PAUSED = "m2"
TIMEOUT_MS = 5_000


@pytest.fixture(scope="module")
def lab08():
    return load_solution("08")


def _chain(board: StatusBoard, machine: str) -> list[str]:
    return [t.status for t in reversed(board.transitions) if t.machine_name == machine]


def _ms(at: datetime) -> int:
    return round(at.timestamp() * 1000)


def _heartbeats_of(connection_string: str, machine: str) -> list[datetime]:
    """The enqueue times of every heartbeat ``machine`` sent, read back from the hub."""
    partition = str(partition_for_key(machine, 4))
    client = EventHubConsumerClient.from_connection_string(
        connection_string, consumer_group="$Default", eventhub_name="heartbeats"
    )
    with client:
        props = client.get_partition_properties(partition)
    count = 0 if props["is_empty"] else props["last_enqueued_sequence_number"] + 1
    with Receiver(connection_string, partition_id=partition, starting_position="-1") as receiver:
        events = receiver.wait_count(count)
    key = machine.encode()
    return sorted(e.enqueued_time for e in events if e.partition_key in (machine, key))


def _status_hub(connection_string: str) -> list:
    """Every event of the one-partition status hub, from its beginning."""
    client = EventHubConsumerClient.from_connection_string(
        connection_string, consumer_group="$Default", eventhub_name="status"
    )
    with client:
        props = client.get_partition_properties("0")
    count = 0 if props["is_empty"] else props["last_enqueued_sequence_number"] + 1
    with Receiver(
        connection_string, eventhub="status", partition_id="0", starting_position="-1"
    ) as receiver:
        return receiver.wait_count(count)


def _lake_rows(lake) -> list[dict]:
    try:
        return read_table(lake).to_pylist()
    except FileNotFoundError:
        return []


def test_a_paused_machine_turns_red_on_the_board_and_recovers(spark, hub, tmp_path, lab08):
    cs = hub.connection_string
    fleet = Fleet(cs)
    board = StatusBoard(fleet=fleet)
    lab05 = load_solution("05")
    lake = tmp_path / "lake" / "transitions"
    query = lake_query = None
    try:
        for name in MACHINES:
            fleet.add(name)
        settings = lab08.monitor_settings(cs, len(MACHINES), str(tmp_path))
        started_at = datetime.now(UTC)
        query = lab08.monitor_writer(
            spark, settings, lab05.CatchUpProcessor(timeout_ms=TIMEOUT_MS)
        ).start()
        hub_rows = (
            spark.readStream.format("eventhubs")
            .options(**settings["source"])
            .option("systemProperties", "true")
            .load()
        )
        lake_query = (
            lab08.monitor_transitions(hub_rows, lab05.CatchUpProcessor(timeout_ms=TIMEOUT_MS))
            .writeStream.foreachBatch(delta_writer(lake))
            .option("checkpointLocation", str(tmp_path / "lake-checkpoint"))
            .trigger(processingTime="1 second")
            .start()
        )
        board.follow_eventhub(cs, "status", starting_position=started_at)

        def running() -> None:
            for q in (query, lake_query):
                if not q.isActive:
                    raise AssertionError(f"a query stopped: {q.exception()}")

        def statuses_are(expected: dict):
            def check():
                running()
                return all(board.statuses.get(m) == s for m, s in expected.items())

            return check

        wait_for(
            statuses_are(dict.fromkeys(MACHINES, "Healthy")),
            timeout=120,
            what="every machine Healthy",
        )
        fleet.pause(PAUSED)
        wait_for(
            statuses_are({PAUSED: "Unhealthy"}), timeout=30, what=f"{PAUSED} Unhealthy on the board"
        )
        fleet.resume(PAUSED)
        wait_for(statuses_are({PAUSED: "Healthy"}), timeout=30, what=f"{PAUSED} Healthy again")

        def lake_has_the_return() -> bool:
            running()
            return sum(r["machine_name"] == PAUSED for r in _lake_rows(lake)) >= 4

        wait_for(lake_has_the_return, timeout=60, what=f"{PAUSED}'s return in the Delta table")
    finally:
        for q in (query, lake_query):
            if q is not None:
                q.stop()
        board.stop()
        fleet.stop()

    assert _chain(board, PAUSED) == ["Initializing", "Healthy", "Unhealthy", "Healthy"]
    for machine in set(MACHINES) - {PAUSED}:
        assert _chain(board, machine) == ["Initializing", "Healthy"], (
            machine,
            _chain(board, machine),
        )

    # The Unhealthy row is stamped with the moment the machine changed: its last heartbeat
    # before the pause, as the hub enqueued it, + the timeout. Exact, whatever the load.
    went_red = next(
        t for t in board.transitions if t.machine_name == PAUSED and t.status == "Unhealthy"
    )
    red_ms = round(went_red.changed_at * 1000)
    last_beat = max(at for at in _heartbeats_of(cs, PAUSED) if _ms(at) < red_ms)
    assert red_ms == _ms(last_beat) + TIMEOUT_MS, (went_red, last_beat)

    # The Delta table: each transition exactly once, the same story as the board.
    rows = _lake_rows(lake)
    keys = [
        (r["machine_name"], r["previous_status"], r["status"], _ms(r["last_status_change_time"]))
        for r in rows
    ]
    repeated = [key for key, n in Counter(keys).items() if n > 1]
    assert not repeated, f"transitions written more than once to the Delta table: {repeated}"
    rows.sort(key=lambda r: (r["last_status_change_time"], r["machine_name"]))
    lake_chain = {m: [r["status"] for r in rows if r["machine_name"] == m] for m in MACHINES}
    assert lake_chain == {m: _chain(board, m) for m in MACHINES}, lake_chain
    lake_red = next(r for r in rows if r["machine_name"] == PAUSED and r["status"] == "Unhealthy")
    assert _ms(lake_red["last_status_change_time"]) == red_ms, lake_red
    late = [
        r
        for r in rows
        if r["noticed_time"] < r["last_status_change_time"] - timedelta(milliseconds=1)
    ]
    assert not late, f"transitions noticed before they happened: {late}"

    # A consumer of the status hub, lab 08's decode_status, reads the board's story, each
    # change once, whatever the hub held before this run.
    decoded, quarantined = lab08.decode_status(_status_hub(cs), set())
    ours = [t for t in decoded if t["last_status_change_time"] >= started_at - timedelta(seconds=5)]
    assert not quarantined, quarantined
    assert {m: [t["status"] for t in ours if t["machine_name"] == m] for m in MACHINES} == {
        m: _chain(board, m) for m in MACHINES
    }
