"""Checks of exercise 1.6 · Predict where each machine's heartbeats land.

The learner's prediction against the partitions and sequence numbers a fresh emulator gives the
heartbeats of ``HEARTBEAT_ROUNDS``, read back with the hub explorer.
"""

import logging

from azure.eventhub import EventData, EventHubProducerClient
from story_01 import (
    PARTITIONS,
    body,
)

from streamlab.hub import Hub
from streamlab.hub_explorer import explore
from streamlab.kit import (
    CheckFailed,
    exercise,
    expect_equal,
    expect_keys,
    spark_facts,
)


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
