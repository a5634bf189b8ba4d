"""The Event Hubs model: event hubs, partitions, routing, start positions, management data.

Nothing here knows about sockets: the AMQP layer calls ``publish``, ``open_cursor`` and
the property methods, and subscribes to partitions to be woken when events arrive.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .codec import DecodeError, Timestamp
from .conditions import Condition
from .message import stamp, unpack
from .storage import PartitionLog, Policy, Record, StorageError

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,255}")
_SELECTOR = re.compile(
    r"\s*amqp\.annotation\.(x-opt-offset|x-opt-sequence-number|x-opt-enqueued-time)"
    r"\s*(>=|>|=)\s*'([^']*)'\s*"
)


#: The management type that lists an event hub's receivers (the emulator's own; Azure has none).
RECEIVERS = "com.streamlab:receivers"


class BrokerError(Exception):
    """An error the client should see as an AMQP error (condition + description)."""

    def __init__(self, condition: Condition, description: str) -> None:
        super().__init__(description)
        self.condition, self.description = condition, description


def partition_for_key(key: str | bytes, partitions: int) -> int:
    """Stable partition for a partition key (unlike ``hash()``, identical in every process)."""
    data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") % partitions


def parse_address(address: str) -> tuple[str, str | None, str | None]:
    """``[amqp[s]://host]/hub[/ConsumerGroups/cg]/Partitions/id`` -> (hub, cg, partition)."""
    if "://" in address:
        address = address.split("://", 1)[1].partition("/")[2]
    parts = [p for p in address.strip("/").split("/") if p]
    if len(parts) == 1:
        return parts[0], None, None
    if len(parts) == 3 and parts[1].lower() == "partitions":
        return parts[0], None, parts[2]
    if (
        len(parts) == 5
        and parts[1].lower() == "consumergroups"
        and parts[3].lower() == "partitions"
    ):
        return parts[0], parts[2], parts[4]
    raise BrokerError(Condition.NOT_FOUND, f"The messaging entity '{address}' could not be found.")


@dataclass
class Cursor:
    """Where a receiver starts: a sequence number, and a test for the first event.

    The test matters only when the requested position lies beyond the events that
    exist (an offset or time in the future): later events are skipped until one passes.
    """

    seq: int
    accept: Callable[[Record], bool] | None = None


@dataclass
class Partition:
    """One partition: its log and the callbacks to run when events are appended."""

    hub: str
    id: str
    log: PartitionLog
    listeners: set[Callable[[], None]] = field(default_factory=set)
    # Ownership for exclusive (epoch) receivers, per consumer group.
    owners: dict[str, dict[object, tuple[int | None, Callable[[str], None]]]] = field(
        default_factory=dict
    )
    # Where each receiver stands, for the management interface: token -> (group, cursor).
    readers: dict[object, tuple[str, Cursor]] = field(default_factory=dict)

    def notify(self) -> None:
        for listener in list(self.listeners):
            listener()


@dataclass
class EventHub:
    name: str
    created_ms: int
    partitions: list[Partition]
    next_round_robin: int = 0


class Broker:
    """All event hubs of one emulator, stored under ``data_dir``."""

    def __init__(self, data_dir: Path, eventhubs: dict[str, int], policy: Policy) -> None:
        self.data_dir, self.policy = Path(data_dir), policy
        self.hubs: dict[str, EventHub] = {}
        for name, count in eventhubs.items():
            if not _NAME.fullmatch(name) or not 1 <= int(count) <= 1024:
                raise ValueError(f"invalid event hub {name!r} with {count!r} partitions")
            self.hubs[name.lower()] = self._open_hub(name, int(count))

    def _open_hub(self, name: str, count: int) -> EventHub:
        directory = self.data_dir / name.lower()
        directory.mkdir(parents=True, exist_ok=True)
        meta = directory / "hub.json"
        try:
            created = int(json.loads(meta.read_text())["created_at_ms"])
        except (OSError, ValueError, KeyError, TypeError):
            created = int(time.time() * 1000)
            meta.write_text(json.dumps({"name": name, "created_at_ms": created}))
        parts = [
            Partition(name, str(i), PartitionLog(directory / str(i), self.policy))
            for i in range(count)
        ]
        return EventHub(name, created, parts)

    # ---------------------------------------------------------------- lookup

    def hub(self, name: str) -> EventHub:
        try:
            return self.hubs[name.lower()]
        except KeyError:
            raise BrokerError(
                Condition.NOT_FOUND,
                f"The messaging entity '{name}' could not be found. "
                f"Known event hubs: {', '.join(h.name for h in self.hubs.values())}.",
            ) from None

    def partition(self, hub_name: str, partition_id: str) -> Partition:
        hub = self.hub(hub_name)
        for part in hub.partitions:
            if part.id == str(partition_id).strip():
                return part
        raise BrokerError(
            Condition.NOT_FOUND,
            f"Partition '{partition_id}' of event hub '{hub.name}' "
            f"does not exist (partitions 0..{len(hub.partitions) - 1}).",
        )

    # ---------------------------------------------------------------- publish

    def publish(
        self, hub_name: str, partition_id: str | None, payload: bytes, message_format: int
    ) -> tuple[str, int, int] | None:
        """Store one transfer (an event or a batch); return (partition, first, last seq)."""
        hub = self.hub(hub_name)
        try:
            events, key = unpack(payload, message_format)
        except DecodeError as exc:
            raise BrokerError(Condition.DECODE_ERROR, f"malformed event: {exc}") from None
        if not events:
            return None
        if partition_id is not None:
            part = self.partition(hub_name, partition_id)
        elif key is not None:
            part = hub.partitions[partition_for_key(key, len(hub.partitions))]
        else:  # no key: spread whole messages (a batch stays together) round robin
            part = hub.partitions[hub.next_round_robin % len(hub.partitions)]
            hub.next_round_robin += 1
        builders = [lambda s, o, t, e=event: stamp(e, s, o, t, key) for event in events]
        segments_before = len(part.log.segments)
        try:
            first, last = part.log.append(builders, int(time.time() * 1000))
        except StorageError as exc:
            raise BrokerError(Condition.INTERNAL_ERROR, str(exc)) from None
        if len(part.log.segments) != segments_before:  # a new segment: check size limits
            part.log.enforce_retention(int(time.time() * 1000))
        part.notify()
        return part.id, first, last

    # ---------------------------------------------------------------- consume

    def open_cursor(self, part: Partition, selector: str | None) -> Cursor:
        """Translate an Event Hubs selector filter into a starting Cursor."""
        log = part.log
        if not selector:
            return Cursor(log.begin_seq)
        match = _SELECTOR.fullmatch(selector)
        if not match:
            raise BrokerError(
                Condition.ARGUMENT_ERROR, f"unsupported selector filter: {selector!r}"
            )
        name, op, text = match.groups()
        inclusive = op != ">"
        try:
            if name == "x-opt-offset":
                if text == "@latest":
                    return Cursor(log.next_seq)
                offset = int(text)
                if offset < 0:  # "-1": the beginning of the partition
                    return Cursor(log.begin_seq)
                return Cursor(
                    log.seq_at_offset(offset, inclusive),
                    (lambda r: r.offset >= offset) if inclusive else (lambda r: r.offset > offset),
                )
            value = int(text)
        except ValueError:
            raise BrokerError(
                Condition.ARGUMENT_ERROR, f"invalid value in selector {selector!r}"
            ) from None
        if name == "x-opt-sequence-number":
            return Cursor(max(value if inclusive else value + 1, log.begin_seq))
        return Cursor(
            log.seq_at_time(value, inclusive),
            (lambda r: r.enqueued_ms >= value) if inclusive else (lambda r: r.enqueued_ms > value),
        )

    def claim(
        self,
        part: Partition,
        group: str,
        epoch: int | None,
        token: object,
        on_stolen: Callable[[str], None],
        cursor: Cursor | None = None,
    ) -> None:
        """Register a receiver; apply Event Hubs' exclusive (epoch) receiver rules.

        ``cursor``: where the receiver reads, shown by :meth:`receivers`."""
        owners = part.owners.setdefault(group.lower(), {})
        epochs = [e for e, _ in owners.values() if e is not None]
        top = max(epochs) if epochs else None
        where = f"partition {part.id} of '{part.hub}' in consumer group '{group}'"
        if top is not None and (epoch is None or epoch < top):
            raise BrokerError(
                Condition.LINK_STOLEN, f"A receiver with epoch {top} already owns {where}."
            )
        if epoch is not None:
            for other, (other_epoch, stolen) in list(owners.items()):
                if other_epoch is None or other_epoch < epoch:
                    del owners[other]
                    stolen(f"New receiver with higher epoch {epoch} was created for {where}.")
        owners[token] = (epoch, on_stolen)
        if cursor is not None:
            part.readers[token] = (group, cursor)

    def release(self, part: Partition, group: str, token: object) -> None:
        part.owners.get(group.lower(), {}).pop(token, None)
        part.readers.pop(token, None)

    # ---------------------------------------------------------------- management

    def eventhub_properties(self, name: str) -> dict[str, Any]:
        hub = self.hub(name)
        return {
            "name": hub.name,
            "type": "com.microsoft:eventhub",
            "created_at": Timestamp(hub.created_ms),
            "partition_count": len(hub.partitions),
            "partition_ids": [p.id for p in hub.partitions],
        }

    def partition_properties(self, name: str, partition_id: str) -> dict[str, Any]:
        part = self.partition(name, partition_id)
        last = part.log.last()
        seq, offset, enqueued = last if last else (-1, -1, 0)
        return {
            "name": part.hub,
            "type": "com.microsoft:partition",
            "partition": part.id,
            "begin_sequence_number": part.log.begin_seq,
            "last_enqueued_sequence_number": seq,
            "last_enqueued_offset": str(offset),
            "last_enqueued_time_utc": Timestamp(enqueued),
            "is_partition_empty": part.log.is_empty,
        }

    def receivers(self, name: str) -> dict[str, Any]:
        """Each open receiver of an event hub: its partition, consumer group and the sequence
        number it delivers next (everything before it has left the hub for that receiver)."""
        hub = self.hub(name)
        found: list[dict[str, Any]] = [
            {"partition": part.id, "consumer_group": group, "next_sequence_number": cursor.seq}
            for part in hub.partitions
            for group, cursor in part.readers.values()
        ]
        found.sort(key=lambda r: (int(r["partition"]), r["consumer_group"].lower()))
        return {"name": hub.name, "type": RECEIVERS, "receivers": found}

    def runtime_metrics(self, part: Partition) -> dict[str, Any]:
        """Delivery annotations for consumers that track the last enqueued event."""
        last = part.log.last()
        seq, offset, enqueued = last if last else (-1, -1, 0)
        return {
            "last_enqueued_sequence_number": seq,
            "last_enqueued_offset": str(offset),
            "last_enqueued_time_utc": Timestamp(enqueued),
            "runtime_info_retrieval_time_utc": Timestamp(int(time.time() * 1000)),
        }

    # ---------------------------------------------------------------- upkeep

    def enforce_retention(self) -> None:
        now = int(time.time() * 1000)
        for hub in self.hubs.values():
            for part in hub.partitions:
                part.log.enforce_retention(now)

    def close(self) -> None:
        for hub in self.hubs.values():
            for part in hub.partitions:
                part.log.close()
