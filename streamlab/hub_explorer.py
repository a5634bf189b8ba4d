"""Look inside an event hub namespace: partitions, sequence numbers, recent events, readers.

:func:`explore` asks the hub through the public ``azure-eventhub`` SDK (event hub and partition
properties, then a consumer that reads each partition's newest events from a sequence number)
and, on the course's emulator, its ``$management`` node for where each open receiver stands.
It never reads the hub's files, so it works on any hub the connection string reaches.
:func:`describe` prints the result; ``nox -s hub`` and :class:`streamlab.widgets.HubExplorer`
show it.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from streamlab.eventhubs.options import endpoint, entity_path, without_entity
from streamlab.hub.broker import RECEIVERS
from streamlab.hub.server import DEFAULT_EVENTHUBS

#: How many of each partition's newest events are shown unless asked otherwise.
RECENT = 5


class HubUnreachable(RuntimeError):
    """Nothing answers at the connection string's endpoint."""


class SdkChanged(RuntimeError):
    """The installed azure-eventhub lacks a member of its client the explorer relies on."""


#: The members of the SDK's client (not its public API) that ask the hub for its readers.
_SDK_MEMBERS = ("_amqp_transport", "_management_request")


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("azure-eventhub")


@dataclass(frozen=True)
class Event:
    """One stored event, as a consumer receives it."""

    partition: str
    sequence_number: int
    enqueued_time: datetime
    partition_key: str | None
    body: str  # the body as text; bytes that are not UTF-8 as their Python repr


@dataclass(frozen=True)
class Partition:
    id: str
    first_sequence_number: int  # the oldest event the hub still holds
    last_sequence_number: int  # the newest one; -1 while the partition has never held one
    last_enqueued_time: datetime | None
    is_empty: bool
    recent: tuple[Event, ...]  # the newest events, oldest first


@dataclass(frozen=True)
class Reader:
    """An open receiver: it has been sent every event before ``next_sequence_number``."""

    partition: str
    consumer_group: str
    next_sequence_number: int


@dataclass(frozen=True)
class EventHub:
    name: str
    partitions: tuple[Partition, ...]
    readers: tuple[Reader, ...] | None  # None: this hub does not say (Azure does not)


@dataclass(frozen=True)
class HubView:
    endpoint: str
    eventhubs: tuple[EventHub, ...]
    missing: tuple[str, ...]  # asked for, but the namespace has no such event hub


def explore(
    connection_string: str,
    eventhubs: Iterable[str] | None = None,
    *,
    recent: int = RECENT,
    consumer_group: str = "$Default",
    timeout: float = 15.0,
) -> HubView:
    """What the hub holds now. ``eventhubs``: the names to look at; by default the one the
    connection string's ``EntityPath`` names, else the course's (``DEFAULT_EVENTHUBS``: the
    SDK has no call that lists a namespace's event hubs)."""
    if recent < 0:
        raise ValueError(f"recent must be 0 or more, not {recent}")
    endpoint = _endpoint(connection_string)
    _reachable(endpoint)
    if eventhubs is not None:
        names = list(eventhubs)
    else:
        entity = entity_path(connection_string)
        names = [entity] if entity else list(DEFAULT_EVENTHUBS)
    # One client per event hub, side by side: each management call is a round trip of its own.
    with ThreadPoolExecutor(max_workers=max(1, len(names))) as pool:
        hubs = list(
            pool.map(
                lambda n: _explore_one(connection_string, n, recent, consumer_group, timeout), names
            )
        )
    found = [hub for hub in hubs if hub is not None]
    missing = [name for name, hub in zip(names, hubs, strict=True) if hub is None]
    return HubView(endpoint, tuple(found), tuple(missing))


def _explore_one(
    connection_string: str, name: str, recent: int, consumer_group: str, timeout: float
) -> EventHub | None:
    from azure.eventhub import EventHubConsumerClient
    from azure.eventhub.exceptions import EventHubError

    base = without_entity(connection_string)
    client = EventHubConsumerClient.from_connection_string(
        base, consumer_group=consumer_group, eventhub_name=name, retry_total=0
    )
    with client:
        try:
            ids = client.get_partition_ids()
        except EventHubError as error:
            if "could not be found" in str(error):
                return None
            raise
        properties = [client.get_partition_properties(p) for p in ids]
        readers = _readers(client, name)  # before our own receiver joins them
    wanted = {
        p["id"]: (
            max(p["beginning_sequence_number"], p["last_enqueued_sequence_number"] - recent + 1),
            p["last_enqueued_sequence_number"],
        )
        for p in properties
        if not p["is_empty"] and recent
    }
    events = _receive(base, name, consumer_group, wanted, timeout) if wanted else {}
    partitions = tuple(
        Partition(
            id=p["id"],
            first_sequence_number=p["beginning_sequence_number"],
            last_sequence_number=p["last_enqueued_sequence_number"],
            last_enqueued_time=None if p["is_empty"] else p["last_enqueued_time_utc"],
            is_empty=p["is_empty"],
            recent=tuple(events.get(p["id"], ())),
        )
        for p in properties
    )
    return EventHub(name, partitions, readers)


def _readers(client: Any, name: str) -> tuple[Reader, ...] | None:
    """The emulator's receivers of ``name``, through the SDK's management link; None where the
    hub does not answer this type (Azure Event Hubs keeps no such list)."""
    from azure.eventhub.exceptions import EventHubError

    missing = [member for member in _SDK_MEMBERS if not hasattr(client, member)]
    if missing:
        raise SdkChanged(
            f"This azure-eventhub ({_sdk_version()}) has no {', '.join(missing)}: the hub "
            "explorer asks the hub for its readers through these members of the SDK's client, "
            "which a release may change. Install the course's pinned packages (nox -s lab "
            "reinstalls them from requirements.lock)."
        )
    try:
        message = client._amqp_transport.build_message(application_properties={"name": name})
        answer = client._management_request(message, op_type=RECEIVERS.encode()).value
    except EventHubError:  # the hub refuses the request: it keeps no such list
        return None
    return tuple(
        Reader(
            _text(row[b"partition"]),
            _text(row[b"consumer_group"]),
            int(row[b"next_sequence_number"]),
        )
        for row in answer[b"receivers"]
    )


def _receive(
    connection_string: str,
    name: str,
    consumer_group: str,
    wanted: dict[str, tuple[int, int]],
    timeout: float,
) -> dict[str, list[Event]]:
    """Each partition's events ``first..last`` (inclusive), read from ``first``."""
    # A receiver per partition, side by side: the SDK starts one much sooner than a receiver
    # of the whole event hub, which first balances partitions among its instances.
    with ThreadPoolExecutor(max_workers=len(wanted)) as pool:
        return dict(
            pool.map(
                lambda item: (
                    item[0],
                    _receive_one(connection_string, name, consumer_group, item, timeout),
                ),
                wanted.items(),
            )
        )


def _receive_one(
    connection_string: str,
    name: str,
    consumer_group: str,
    wanted: tuple[str, tuple[int, int]],
    timeout: float,
) -> list[Event]:
    from azure.eventhub import EventHubConsumerClient

    partition, (first, last) = wanted
    client = EventHubConsumerClient.from_connection_string(
        without_entity(connection_string), consumer_group=consumer_group, eventhub_name=name
    )
    got: dict[int, Event] = {}
    done = threading.Event()

    def on_batch(context: Any, batch: list[Any]) -> None:
        for event in batch:
            if first <= event.sequence_number <= last:
                got[event.sequence_number] = _event(partition, event)
        if len(got) == last - first + 1:
            done.set()

    thread = threading.Thread(
        target=client.receive_batch,
        kwargs={
            "on_event_batch": on_batch,
            "partition_id": partition,
            "starting_position": first,
            "starting_position_inclusive": True,
            "max_batch_size": 100,
            "max_wait_time": 1,
        },
        name="streamlab-hub-explorer",
        daemon=True,
    )
    thread.start()
    done.wait(timeout)
    client.close()
    thread.join(timeout)
    return [got[s] for s in sorted(got)]


def _event(partition: str, event: Any) -> Event:
    raw = b"".join(event.body) if not isinstance(event.body, bytes) else event.body
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError:
        body = repr(raw)
    key = event.partition_key
    return Event(
        partition,
        event.sequence_number,
        event.enqueued_time,
        _text(key) if key is not None else None,
        body,
    )


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, bytes) else str(value)


def _endpoint(connection_string: str) -> str:
    """``host:port`` of the connection string's ``Endpoint=sb://host:port``."""
    address = endpoint(connection_string)
    if not address.lower().startswith("sb://"):
        raise ValueError(
            "this is not an Event Hubs connection string: it has no Endpoint=sb://host:port"
        )
    return address[len("sb://") :]


def _reachable(endpoint: str, wait: float = 3.0) -> None:
    where = urlsplit(f"sb://{endpoint}")
    host, port = where.hostname or endpoint, where.port or 5671
    try:
        socket.create_connection((host, port), timeout=wait).close()
    except OSError:
        raise HubUnreachable(
            f"No Event Hubs emulator is running at {endpoint}: start one with `nox -s lab` "
            "(or `python -m streamlab.hub`), then ask again."
        ) from None


def describe(view: HubView, *, width: int = 72) -> str:
    """The view as text, one block per event hub."""
    lines = [f"Event hubs at {view.endpoint}"]
    for hub in view.eventhubs:
        held = sum(p.last_sequence_number - p.first_sequence_number + 1 for p in hub.partitions)
        lines += ["", f"{hub.name}: {len(hub.partitions)} partition(s), {held:,} event(s) held"]
        for part in hub.partitions:
            if part.is_empty:
                lines.append(f"  partition {part.id}: empty")
                continue
            lines.append(
                f"  partition {part.id}: sequence numbers {part.first_sequence_number}"
                f"..{part.last_sequence_number}, last enqueued {when(part.last_enqueued_time)}"
            )
            for event in part.recent:
                body = event.body if len(event.body) <= width else event.body[: width - 3] + "..."
                lines.append(
                    f"    #{event.sequence_number}  {when(event.enqueued_time)}"
                    f"  key={event.partition_key!r}  {body}"
                )
        lines += [f"  {sentence}" for sentence in readers_said(hub)]
    for name in view.missing:
        lines += ["", f"{name}: no such event hub here"]
    return "\n".join(lines)


def readers_said(hub: EventHub) -> list[str]:
    """What the explorer says of an event hub's open readers: a sentence each, or one for none."""
    if hub.readers is None:
        return ["readers: this hub does not say"]
    if not hub.readers:
        return ["readers: none open"]
    return [
        f"reader in consumer group {reader.consumer_group!r} on partition {reader.partition}: "
        f"sent everything before #{reader.next_sequence_number}"
        for reader in hub.readers
    ]


def when(moment: datetime | None) -> str:
    """A time as the explorer shows it, to the millisecond, in UTC (the hub's clock)."""
    return "-" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def main(argv: list[str] | None = None) -> int:
    """``nox -s hub``: the course's running hub, or the one a connection string names."""
    import argparse
    import os
    import sys

    from streamlab.hub.api import HUB_ENV
    from streamlab.hub.server import connection_string

    parser = argparse.ArgumentParser(prog="nox -s hub --", description=main.__doc__)
    parser.add_argument("--connection-string", help="default: the hub `nox -s lab` runs")
    parser.add_argument("--port", type=int, default=5672, help="the emulator's port (5672)")
    parser.add_argument("--recent", type=int, default=RECENT, help="events shown per partition")
    parser.add_argument("eventhubs", nargs="*", help=f"default: {', '.join(DEFAULT_EVENTHUBS)}")
    args = parser.parse_args(argv)
    logging.getLogger("azure").setLevel(logging.ERROR)  # reconnect warnings say nothing here
    target = (
        args.connection_string
        or os.environ.get(HUB_ENV)
        or connection_string("127.0.0.1", args.port)
    )
    try:
        view = explore(target, args.eventhubs or None, recent=args.recent)
    except (HubUnreachable, ValueError) as error:
        print(error, file=sys.stderr)
        return 1
    print(describe(view))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
