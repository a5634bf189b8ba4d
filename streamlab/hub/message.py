"""AMQP messages as Event Hubs uses them: events, batches, and request/response messages.

Events are kept as the raw bytes the producer sent. The server only rewrites the
message-annotations section, adding the broker annotations (sequence number, offset,
enqueued time, partition key), so every other section (delivery annotations, properties,
application properties, body) reaches the consumer byte for byte, as on the service.
"""

from __future__ import annotations

import uuid
from typing import Any, NamedTuple

from .codec import (
    DecodeError,
    Described,
    Raw,
    Symbol,
    Timestamp,
    ULong,
    decode,
    encode,
    skip,
    split_list,
    split_map,
)

BATCH_FORMAT = 0x80013700
HEADER, DELIVERY_ANNOTATIONS, MESSAGE_ANNOTATIONS, PROPERTIES = 0x70, 0x71, 0x72, 0x73
APPLICATION_PROPERTIES, DATA, AMQP_SEQUENCE, AMQP_VALUE, FOOTER = 0x74, 0x75, 0x76, 0x77, 0x78
_SECTION_NAMES = {
    "amqp:header:list": HEADER,
    "amqp:delivery-annotations:map": DELIVERY_ANNOTATIONS,
    "amqp:message-annotations:map": MESSAGE_ANNOTATIONS,
    "amqp:properties:list": PROPERTIES,
    "amqp:application-properties:map": APPLICATION_PROPERTIES,
    "amqp:data:binary": DATA,
    "amqp:amqp-sequence:list": AMQP_SEQUENCE,
    "amqp:amqp-value:*": AMQP_VALUE,
    "amqp:footer:map": FOOTER,
}

SEQUENCE_NUMBER = "x-opt-sequence-number"
OFFSET = "x-opt-offset"
ENQUEUED_TIME = "x-opt-enqueued-time"
PARTITION_KEY = "x-opt-partition-key"
_BROKER_KEYS = {SEQUENCE_NUMBER, OFFSET, ENQUEUED_TIME}


class Section(NamedTuple):
    """One message section: its code, its full raw bytes, and where its value starts."""

    code: int
    raw: bytes
    value_at: int


def split_sections(payload: bytes) -> list[Section]:
    """Split an encoded message into its sections (raises DecodeError when malformed)."""
    sections, pos = [], 0
    while pos < len(payload):
        if payload[pos] != 0x00:
            raise DecodeError("message section is not a described type")
        descriptor, value_at = decode(payload, pos + 1)
        code = (
            int(descriptor) if isinstance(descriptor, int) else _SECTION_NAMES.get(str(descriptor))
        )
        if code is None or not HEADER <= code <= FOOTER:
            raise DecodeError(f"unknown message section {descriptor!r}")
        end = skip(payload, value_at)
        sections.append(Section(code, bytes(payload[pos:end]), value_at - pos))
        pos = end
    return sections


def section(code: int, value: Any) -> bytes:
    """Encode one section with a small-ulong descriptor (the SDK decoder expects it)."""
    return encode(Described(ULong(code), value))


def _key_text(raw_key: bytes) -> str | None:
    key, _ = decode(raw_key, 0)
    return str(key) if isinstance(key, str) else None


class Event(NamedTuple):
    """A parsed event, ready to be stamped with its broker annotations."""

    head: bytes  # the header section, if any: it must stay first
    delivery: bytes  # the delivery-annotations section the producer set, if any
    annotations: list[tuple[bytes, bytes]]  # raw (key, value) pairs the producer set
    tail: bytes  # properties, application properties, body, footer
    partition_key: str | bytes | None


def parse_event(payload: bytes) -> Event:
    """Parse one event into the parts the broker keeps and the annotations it rewrites."""
    head, delivery, tail, pairs, key = b"", b"", bytearray(), [], None
    for sec in split_sections(payload):
        if sec.code == HEADER:
            head = sec.raw
        elif sec.code == DELIVERY_ANNOTATIONS:
            delivery = sec.raw
        elif sec.code == MESSAGE_ANNOTATIONS:
            for raw_key, raw_value in split_map(sec.raw, sec.value_at):
                name = _key_text(raw_key)
                if name in _BROKER_KEYS:
                    continue  # the broker's own values replace whatever a client put there
                if name == PARTITION_KEY:
                    key = decode(raw_value, 0)[0]
                pairs.append((raw_key, raw_value))
        else:
            tail += sec.raw
    return Event(head, delivery, pairs, bytes(tail), key if isinstance(key, (str, bytes)) else None)


def stamp(
    event: Event, seq: int, offset: int, enqueued_ms: int, batch_key: str | bytes | None
) -> tuple[bytes, int]:
    """Return (encoded event with broker annotations, where delivery annotations go).

    The position is that of the event's delivery-annotations section when it has one.
    """
    pairs = list(event.annotations)
    pairs.append((encode(Symbol(SEQUENCE_NUMBER)), encode(seq)))
    pairs.append((encode(Symbol(OFFSET)), encode(str(offset))))
    pairs.append((encode(Symbol(ENQUEUED_TIME)), encode(Timestamp(enqueued_ms))))
    if event.partition_key is None and batch_key is not None:
        pairs.append((encode(Symbol(PARTITION_KEY)), encode(batch_key)))
    body = b"".join(k + v for k, v in pairs)
    count = 2 * len(pairs)
    if len(body) + 1 < 256:
        mapped = bytes((0xC1, len(body) + 1, count)) + body
    else:
        mapped = b"\xd1" + (len(body) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + body
    annotations = b"\x00\x53\x72" + mapped
    return event.head + event.delivery + annotations + event.tail, len(event.head)


def unpack(payload: bytes, message_format: int) -> tuple[list[Event], str | bytes | None]:
    """Split a transfer into events; return (events, partition key of the whole message)."""
    if message_format != BATCH_FORMAT:
        event = parse_event(payload)
        return [event], event.partition_key
    outer = parse_event_envelope(payload)
    return [parse_event(data) for data in outer[0]], outer[1]


def parse_event_envelope(payload: bytes) -> tuple[list[bytes], str | bytes | None]:
    """A batch envelope: each data section holds one encoded event."""
    datas, key = [], None
    for sec in split_sections(payload):
        if sec.code == DATA:
            value, _ = decode(sec.raw, sec.value_at)
            if not isinstance(value, bytes):
                raise DecodeError("batch data section is not binary")
            datas.append(value)
        elif sec.code == MESSAGE_ANNOTATIONS:
            for raw_key, raw_value in split_map(sec.raw, sec.value_at):
                if _key_text(raw_key) == PARTITION_KEY:
                    value = decode(raw_value, 0)[0]
                    key = value if isinstance(value, (str, bytes)) else None
    return datas, key


def delivery_annotations(values: dict[str, Any]) -> bytes:
    """A delivery-annotations section (runtime metrics for consumers that ask for them)."""
    return section(DELIVERY_ANNOTATIONS, {Symbol(k): v for k, v in values.items()})


def add_delivery_annotations(body: bytes, da_pos: int, values: dict[str, Any]) -> bytes:
    """``body`` with ``values`` added to its delivery annotations at ``da_pos``.

    A message has at most one delivery-annotations section: when the producer set one,
    the values join it (the producer's own keys keep their values).
    """
    if body[da_pos : da_pos + 1] == b"\x00":
        first = split_sections(body[da_pos : skip(body, da_pos)])[0]
        if first.code == DELIVERY_ANNOTATIONS:
            pairs = split_map(first.raw, first.value_at)
            names = {_key_text(k) for k, _ in pairs}
            extra = [(encode(Symbol(k)), encode(v)) for k, v in values.items() if k not in names]
            merged = b"".join(k + v for k, v in pairs + extra)
            count = 2 * (len(pairs) + len(extra))
            mapped = (
                b"\xd1" + (len(merged) + 4).to_bytes(4, "big") + count.to_bytes(4, "big") + merged
            )
            return body[:da_pos] + b"\x00\x53\x71" + mapped + body[da_pos + len(first.raw) :]
    return body[:da_pos] + delivery_annotations(values) + body[da_pos:]


class Request(NamedTuple):
    """A request to $cbs or $management."""

    message_id: Raw | None  # raw encoded message-id, echoed as the response's correlation-id
    properties: dict[str, Any]  # application properties, keys as text
    body: Any


def parse_request(payload: bytes) -> Request:
    """Decode a request/response-pattern message."""
    message_id, props, body = None, {}, None
    for sec in split_sections(payload):
        if sec.code == PROPERTIES:
            fields = split_list(sec.raw, sec.value_at)
            if fields and fields[0] != b"\x40":
                message_id = Raw(fields[0])
        elif sec.code == APPLICATION_PROPERTIES:
            value, _ = decode(sec.raw, sec.value_at)
            if isinstance(value, dict):
                props = {str(k): v for k, v in value.items()}
        elif sec.code in (AMQP_VALUE, DATA):
            body, _ = decode(sec.raw, sec.value_at)
    return Request(message_id, props, body)


def response(correlation_id: Raw | None, status: int, description: str, body: Any) -> bytes:
    """Encode a response with both spellings of the status properties.

    The SDK reads ``status-code`` for both nodes, but the description from
    ``status-description`` on $cbs and ``statusDescription`` on $management.
    """
    properties = [
        uuid.uuid4(),
        None,
        None,
        None,
        None,
        correlation_id,
        None,
        None,
        None,
        None,
        None,
        None,
        None,
    ]
    app = {
        "status-code": status,
        "status-description": description,
        "statusCode": status,
        "statusDescription": description,
    }
    return (
        section(PROPERTIES, properties)
        + section(APPLICATION_PROPERTIES, app)
        + section(AMQP_VALUE, body)
    )
