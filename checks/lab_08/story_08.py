"""What lab 08's checks share: heartbeats and status events on an in-process hub, the
hub's events as parquet files, and a query run to the end of its input.

No check sleeps, and every verdict depends on the data only: the processor stamps each
change with the heartbeats' enqueue times, which the checks choose or read back from the
hub.
"""

import functools
import threading

from azure.eventhub import EventData, EventHubConsumerClient, EventHubProducerClient

from streamlab.kit import (
    REPO_ROOT,
    CheckFailed,
    expect_that,
    heartbeat_line,
    registry,
    start_available,
)

HOUR_MS = 3_600_000


@functools.cache
def _lab05():
    from streamlab.monitor import reference_solution

    return reference_solution()


#: The solutions the trials of 8.5 and 8.6 run: lab 05's processor, lab 08's pipeline.
TRIAL_NOTEBOOKS = [registry.lab(n).notebook(REPO_ROOT / "solutions") for n in ("05", "08")]


def _processor(timeout_ms: int):
    """Lab 05's CatchUpProcessor, the processor every check's pipeline runs."""
    return _lab05().CatchUpProcessor(timeout_ms=timeout_ms)


def _heartbeat(machine: str, machine_time: str = "2026-11-22T10:00:00Z") -> tuple[str, bytes]:
    # Every heartbeat says 10:00:00 on the machine's clock: the pipeline must go by enqueue time.
    return machine, heartbeat_line(machine, machine_time).encode()


def _run_available(spark, writer) -> None:
    query = start_available(spark, writer)
    if not query.awaitTermination(300):
        query.stop()
        raise CheckFailed(
            "The query had not finished its input after 300 s.",
            expected="the query done with its input (trigger availableNow)",
            actual="still running after 300 s",
        )
    if query.exception():
        raise query.exception()


def _sortable(row: tuple) -> tuple:
    return tuple("" if value is None else str(value) for value in row)


def _no_query_started(spark, message: str) -> None:
    active = spark.streams.active
    if active:
        raise CheckFailed(
            message,
            expected="no active query",
            actual=f"{len(active)} active: {[q.name for q in active]}",
        )


def _send(connection_string: str, events: list[tuple[str, bytes]]) -> None:
    with EventHubProducerClient.from_connection_string(
        connection_string, eventhub_name="heartbeats"
    ) as producer:
        for key, body in events:
            batch = producer.create_batch(partition_key=key)
            batch.add(EventData(body))
            producer.send_batch(batch)


def _status_events(connection_string: str, timeout: float = 60) -> list:
    """Every event in the status hub now: as many as its partition says it holds."""
    client = EventHubConsumerClient.from_connection_string(
        connection_string, consumer_group="$Default", eventhub_name="status"
    )
    with client:
        props = client.get_partition_properties("0")
        count = 0 if props["is_empty"] else props["last_enqueued_sequence_number"] + 1
        received, done = [], threading.Event()

        def on_batch(context, events):
            received.extend(events)
            if len(received) >= count:
                done.set()

        if count:
            thread = threading.Thread(
                target=client.receive_batch,
                daemon=True,
                # A batch as large as the partition: the callback comes once every event is in,
                # not when max_wait_time has passed.
                kwargs=dict(
                    on_event_batch=on_batch,
                    starting_position="-1",
                    max_batch_size=count,
                    max_wait_time=1,
                ),
            )
            thread.start()
            done.wait(timeout)
    read = len(received)
    expect_that(
        read >= count,
        f"Could not read every event of the status hub in {timeout:.0f} s.",
        expected=f"{count} events (as many as its partition holds)",
        actual=f"{read} events read",
    )
    return received
