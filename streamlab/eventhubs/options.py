"""The options of ``format("eventhubs")``, checked once with messages a learner can act on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NotRequired, TypedDict

from pyspark.sql.types import (
    BinaryType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

#: The row schema of the classic azure-event-hubs-spark connector.
SCHEMA = StructType(
    [
        StructField("body", BinaryType()),
        StructField("partition", StringType()),
        StructField("offset", StringType()),
        StructField("sequenceNumber", LongType()),
        StructField("enqueuedTime", TimestampType()),
        StructField("publisher", StringType()),
        StructField("partitionKey", StringType()),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)

#: The schema with ``.option("systemProperties", "true")``: one more map, as the classic
#: connector's ``systemProperties`` (see :mod:`streamlab.eventhubs.source` for its keys).
SYSTEM_SCHEMA = StructType(
    SCHEMA.fields
    + [
        StructField("systemProperties", MapType(StringType(), StringType())),
    ]
)


#: The values of ``receiveOn``: see :mod:`streamlab.eventhubs.source`.
RECEIVE_ON = ("driver", "executors")


class EventHubsOptionError(ValueError):
    """An option of the eventhubs source or sink is missing or malformed."""


class EventHubsUnavailable(RuntimeError):
    """The event hub could not be reached or does not exist."""


class EventHubsDataLoss(RuntimeError):
    """Events a query had still to read are gone: the hub's retention removed them."""


def _count(number: int) -> str:
    return f"{number:,}"


def lost_events(lost: dict[str, tuple[int, int]]) -> str:
    """``events 101 to 2,450 of partition 2``, for each partition's (first, last) lost event."""
    parts = [
        f"event {_count(first)} of partition {p}"
        if first == last
        else f"events {_count(first)} to {_count(last)} of partition {p}"
        for p, (first, last) in sorted(lost.items(), key=lambda item: (len(item[0]), item[0]))
    ]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]


def data_loss(options: EventHubsOptions, lost: dict[str, tuple[int, int]]) -> EventHubsDataLoss:
    """The sentence for events a query needs that the hub no longer holds, and what to do."""
    keys = " and ".join(
        f"lostFrom.{p}, lostTo.{p}" for p in sorted(lost, key=lambda p: (len(p), p))
    )
    return EventHubsDataLoss(
        f"{lost_events(lost)} of event hub {options.eventhub!r} were removed by the hub's "
        "retention before this query read them: the query was down, or behind, for longer "
        "than the hub keeps events. To read on from the oldest event the hub still holds, "
        'restart the query with .option("failOnDataLoss", "false"): it skips the lost events '
        "and records their range in the endOffset of the batch that skips them "
        f"({keys}), which the query's progress shows. To keep it from happening again, keep "
        "events in the hub for longer than the query can be down."
    )


def unavailable(options: EventHubsOptions, doing: str, error: Exception) -> EventHubsUnavailable:
    """One sentence for a failed call to the hub: what was tried, where, what the SDK said."""
    return EventHubsUnavailable(
        f"could not {doing} event hub {options.eventhub!r} at "
        f"{endpoint(options.connection_string)}: {type(error).__name__}: {error}. "
        "Is the hub running (`streamlab-hub`, or `nox -s lab`, which starts one) and is the "
        "event hub's name right?"
    )


def _settings(connection_string: str) -> dict[str, str]:
    """The connection string's ``key=value`` pairs, keys lower-cased, by azure-core's own
    parser (the SDK's rules); {} for a string that is not one."""
    from azure.core.utils import parse_connection_string

    parts = ";".join(p for p in connection_string.split(";") if p.strip())
    try:
        return {k.strip(): v.strip() for k, v in parse_connection_string(parts).items()}
    except ValueError:
        return {}


def entity_path(connection_string: str) -> str | None:
    """The event hub a connection string names (``EntityPath=``, any case), or None."""
    return _settings(connection_string).get("entitypath") or None


def endpoint(connection_string: str) -> str:
    """The ``sb://host:port`` part, for error messages (never the key)."""
    found = _settings(connection_string).get("endpoint")
    return found.rstrip("/") if found else "(no Endpoint in the connection string)"


def without_entity(connection_string: str) -> str:
    """The connection string without its ``EntityPath``: the namespace, for any event hub."""
    return ";".join(
        part
        for part in connection_string.split(";")
        if part.strip() and part.partition("=")[0].strip().lower() != "entitypath"
    )


def event_hub_named(
    connection_string: str, given: str | None, *, given_as: str = "the event hub asked for"
) -> str:
    """The event hub a client reaches: the string's ``EntityPath`` or ``given``.

    One rule everywhere: when both are there they must agree (the SDK alone would take
    ``given`` and ignore the string's, where Spark's options took the string's: one string and
    one name, two event hubs). ``given_as`` says where ``given`` came from, for the sentence.
    """
    named = entity_path(connection_string)
    if named and given and named != given:
        raise EventHubsOptionError(
            f"the connection string names event hub {named!r} (EntityPath) but {given_as} "
            f"is {given!r}: name the event hub in one place only"
        )
    name = named or given
    if not name:
        raise EventHubsOptionError(
            f"name the event hub with {given_as} or an EntityPath=... in the connection string"
        )
    return name


class ClientKwargs(TypedDict):
    """The arguments of the SDK's ``from_connection_string`` that name what a client reaches."""

    conn_str: str
    eventhub_name: NotRequired[str]  # absent when the string has an EntityPath


def client_kwargs(connection_string: str, eventhub: str | None) -> ClientKwargs:
    """Arguments for the SDK's ``from_connection_string``, for every client the course makes."""
    name = event_hub_named(connection_string, eventhub)
    if entity_path(connection_string) is not None:
        return {"conn_str": connection_string}
    return {"conn_str": connection_string, "eventhub_name": name}


@dataclass(frozen=True)
class EventHubsOptions:
    connection_string: str
    eventhub: str
    consumer_group: str = "$Default"
    starting_position: str = "latest"
    max_events_per_trigger: int | None = None
    #: How long the source waits for the hub before it gives up with an error.
    timeout_seconds: float = 30.0
    #: Add the ``systemProperties`` column.
    system_properties: bool = False
    #: Where events are received: ``driver`` (long-lived receivers) or ``executors`` (per task).
    receive_on: str = "driver"
    #: With ``receiveOn=driver``, a batch of at most this many events is read by one task.
    events_per_task: int = 10_000
    #: Fail when events the query has still to read are gone (True), or skip them and say so.
    fail_on_data_loss: bool = True

    @property
    def client_kwargs(self) -> ClientKwargs:
        """Arguments for ``from_connection_string``: the hub name unless the string has it."""
        return client_kwargs(self.connection_string, self.eventhub)

    def starting_sequence_numbers(self) -> dict[str, int] | None:
        """The JSON map form of ``startingPosition``, or None for earliest / latest."""
        if self.starting_position in ("earliest", "latest"):
            return None
        try:
            parsed = json.loads(self.starting_position)
            return {str(p): int(s) for p, s in parsed.items()}
        except (ValueError, AttributeError, TypeError):
            raise EventHubsOptionError(
                f"startingPosition must be earliest, latest or a JSON map of partition to "
                f"sequence number such as '{{\"0\": 42}}'; got {self.starting_position!r}"
            ) from None


def _one_of(lowered: dict, name: str, default: str, allowed, said: str = "true or false") -> str:
    """Option ``name`` (lower-cased, trimmed), which must be one of ``allowed``."""
    value = lowered.get(name.lower(), default)
    if value.strip().lower() not in allowed:
        raise EventHubsOptionError(f"{name} must be {said}; got {value!r}")
    return value.strip().lower()


def parse_options(options: Mapping[str, str]) -> EventHubsOptions:
    """Validate the options given to ``.option(...)`` (case-insensitive keys)."""
    lowered = {k.lower(): v for k, v in options.items()}
    connection_string = lowered.get("connectionstring")
    if not connection_string:
        raise EventHubsOptionError(
            'the eventhubs source and sink need .option("connectionString", ...): the string '
            "`streamlab-hub` prints, or the one from the Azure portal"
        )
    eventhub = event_hub_named(
        connection_string, lowered.get("eventhubname"), given_as='.option("eventHubName", ...)'
    )
    limit = lowered.get("maxeventspertrigger")
    try:
        max_events = int(limit) if limit is not None else None
    except ValueError:
        max_events = -1
    if max_events is not None and max_events <= 0:
        raise EventHubsOptionError(f"maxEventsPerTrigger must be a positive number; got {limit!r}")
    system = _one_of(lowered, "systemProperties", "false", ("true", "false"))
    receive_on = _one_of(lowered, "receiveOn", "driver", RECEIVE_ON, "driver or executors")
    fail = _one_of(lowered, "failOnDataLoss", "true", ("true", "false"))
    per_task = lowered.get("eventspertask", "10000")
    try:
        events_per_task = int(per_task)
    except ValueError:
        events_per_task = -1
    if events_per_task < 0:
        raise EventHubsOptionError(
            f"eventsPerTask must be a whole number, 0 or more; got {per_task!r}"
        )
    parsed = EventHubsOptions(
        connection_string=connection_string,
        eventhub=eventhub,
        consumer_group=lowered.get("consumergroup", "$Default"),
        starting_position=lowered.get("startingposition", "latest").strip(),
        max_events_per_trigger=max_events,
        timeout_seconds=float(lowered.get("timeoutseconds", 30)),
        system_properties=system == "true",
        receive_on=receive_on,
        events_per_task=events_per_task,
        fail_on_data_loss=fail == "true",
    )
    parsed.starting_sequence_numbers()  # fail early on a malformed map
    return parsed
