"""AMQP 1.0 frames and performatives: parse what clients send, build what the server sends.

Every performative the server sends carries its *full* field list (nulls included):
the azure-eventhub SDK's pure-Python decoder reads fields by position and fails with
IndexError when trailing fields are omitted, even though AMQP allows omitting them.
"""

from __future__ import annotations

import struct
from typing import Any, NamedTuple

from .codec import (
    DecodeError,
    Described,
    Raw,
    Symbol,
    SymbolArray,
    UByte,
    UInt,
    ULong,
    UShort,
    decode,
    encode,
    skip,
    split_list,
)
from .conditions import Condition

AMQP_HEADER = b"AMQP\x00\x01\x00\x00"
SASL_HEADER = b"AMQP\x03\x01\x00\x00"
FRAME_HEADER = struct.Struct(">IBBH")  # size, data offset (in 4-byte words), type, channel
AMQP_FRAME, SASL_FRAME = 0, 1

OPEN, BEGIN, ATTACH, FLOW, TRANSFER, DISPOSITION, DETACH, END, CLOSE = range(0x10, 0x19)
SASL_MECHANISMS, SASL_INIT, SASL_CHALLENGE, SASL_RESPONSE, SASL_OUTCOME = range(0x40, 0x45)
ERROR, ACCEPTED, REJECTED, RELEASED, MODIFIED = 0x1D, 0x24, 0x25, 0x26, 0x27
SOURCE, TARGET = 0x28, 0x29
ROLE_SENDER, ROLE_RECEIVER = False, True

# Descriptors may also be sent as symbols; map the ones a client could use to codes.
_SYMBOLIC = {
    "amqp:open:list": OPEN,
    "amqp:begin:list": BEGIN,
    "amqp:attach:list": ATTACH,
    "amqp:flow:list": FLOW,
    "amqp:transfer:list": TRANSFER,
    "amqp:disposition:list": DISPOSITION,
    "amqp:detach:list": DETACH,
    "amqp:end:list": END,
    "amqp:close:list": CLOSE,
    "amqp:sasl-init:list": SASL_INIT,
    "amqp:sasl-response:list": SASL_RESPONSE,
    "amqp:source:list": SOURCE,
    "amqp:target:list": TARGET,
}


#: The fields a source and a target both begin with.
_TERMINUS = ("address", "durable", "expiry_policy", "timeout", "dynamic", "dynamic_node_properties")
#: The fields of each performative and terminus, in the order AMQP 1.0 lists them (spec
#: sections 2.7, 3.5.3-3.5.4 and 5.3.3). Fields travel by position; code names them.
FIELDS: dict[int, tuple[str, ...]] = {
    OPEN: (
        "container_id",
        "hostname",
        "max_frame_size",
        "channel_max",
        "idle_time_out",
        "outgoing_locales",
        "incoming_locales",
        "offered_capabilities",
        "desired_capabilities",
        "properties",
    ),
    BEGIN: (
        "remote_channel",
        "next_outgoing_id",
        "incoming_window",
        "outgoing_window",
        "handle_max",
        "offered_capabilities",
        "desired_capabilities",
        "properties",
    ),
    ATTACH: (
        "name",
        "handle",
        "role",
        "snd_settle_mode",
        "rcv_settle_mode",
        "source",
        "target",
        "unsettled",
        "incomplete_unsettled",
        "initial_delivery_count",
        "max_message_size",
        "offered_capabilities",
        "desired_capabilities",
        "properties",
    ),
    FLOW: (
        "next_incoming_id",
        "incoming_window",
        "next_outgoing_id",
        "outgoing_window",
        "handle",
        "delivery_count",
        "link_credit",
        "available",
        "drain",
        "echo",
        "properties",
    ),
    TRANSFER: (
        "handle",
        "delivery_id",
        "delivery_tag",
        "message_format",
        "settled",
        "more",
        "rcv_settle_mode",
        "state",
        "resume",
        "aborted",
        "batchable",
    ),
    DISPOSITION: ("role", "first", "last", "settled", "state", "batchable"),
    DETACH: ("handle", "closed", "error"),
    END: ("error",),
    CLOSE: ("error",),
    SASL_MECHANISMS: ("sasl_server_mechanisms",),
    SASL_INIT: ("mechanism", "initial_response", "hostname"),
    SASL_OUTCOME: ("code", "additional_data"),
    SOURCE: (
        *_TERMINUS,
        "distribution_mode",
        "filter",
        "default_outcome",
        "outcomes",
        "capabilities",
    ),
    TARGET: (*_TERMINUS, "capabilities"),
    ERROR: ("condition", "description", "info"),
}
_POSITION = {code: {name: i for i, name in enumerate(names)} for code, names in FIELDS.items()}


def field_of(code: int, values: list, name: str, default: Any = None) -> Any:
    """Field ``name`` of a ``code`` value's fields, or ``default`` when absent or null."""
    index = _POSITION[code][name]
    if index < len(values) and values[index] is not None:
        return values[index]
    return default


def fields(code: int, /, **values: Any) -> list:
    """The full field list of ``code``, by name: fields not given are null."""
    position = _POSITION[code]
    unknown = set(values) - set(position)
    if unknown:
        raise ValueError(f"no field {', '.join(sorted(unknown))} in 0x{code:x}")
    return [values.get(name) for name in FIELDS[code]]


class ProtocolError(Exception):
    """The client broke the protocol; the connection is closed with this condition."""

    def __init__(self, condition: Condition, description: str) -> None:
        super().__init__(description)
        self.condition, self.description = condition, description


class Performative(NamedTuple):
    """A decoded performative: its code, decoded fields, raw fields, and any payload."""

    code: int
    fields: list
    raw: list[bytes]
    payload: bytes

    def field(self, name: str, default: Any = None) -> Any:
        """Field ``name`` or ``default`` when absent or null (trailing fields may be omitted)."""
        return field_of(self.code, self.fields, name, default)

    def raw_field(self, name: str) -> bytes | None:
        """Field ``name`` as the client encoded it, or None when absent."""
        index = _POSITION[self.code][name]
        return self.raw[index] if index < len(self.raw) else None

    def get(self, index: int, default: Any = None) -> Any:
        """Field number ``index`` or ``default`` when absent or null."""
        if index < len(self.fields) and self.fields[index] is not None:
            return self.fields[index]
        return default


def descriptor_code(descriptor: Any) -> int | None:
    """Numeric code of a descriptor given as a ulong or a symbolic name."""
    if isinstance(descriptor, int) and not isinstance(descriptor, bool):
        return int(descriptor)
    if isinstance(descriptor, str):
        return _SYMBOLIC.get(descriptor)
    return None


def parse_body(body: bytes) -> Performative:
    """Decode a frame body (after the extended header) into a Performative."""
    if not body or body[0] != 0x00:
        raise DecodeError("frame body is not a described performative")
    descriptor, pos = decode(body, 1)
    code = descriptor_code(descriptor)
    if code is None:
        raise DecodeError(f"unknown performative descriptor {descriptor!r}")
    raw = split_list(body, pos)
    # A second pass with skip() would be cheaper, but fields are small and few.
    values = [decode(item, 0)[0] for item in raw]
    end = skip(body, pos)  # whatever follows the field list is the payload (transfers)
    return Performative(code, values, raw, bytes(body[end:]))


def frame(
    channel: int, code: int, values: list, payload: bytes = b"", frame_type: int = AMQP_FRAME
) -> bytes:
    """Encode one frame carrying performative ``code`` with the field list ``values``."""
    body = encode(Described(ULong(code), list(values)))
    size = FRAME_HEADER.size + len(body) + len(payload)
    return FRAME_HEADER.pack(size, 2, frame_type, channel) + body + payload


def performative(channel: int, code: int, frame_type: int = AMQP_FRAME, /, **values: Any) -> bytes:
    """A frame carrying performative ``code``, its fields given by name (the rest null)."""
    return frame(channel, code, fields(code, **values), frame_type=frame_type)


def error(condition: Condition, description: str | None = None) -> Described:
    """An AMQP error value (condition symbol, description, info)."""
    return Described(
        ULong(ERROR), fields(ERROR, condition=Symbol(condition), description=description)
    )


def accepted() -> Described:
    """The Accepted outcome."""
    return Described(ULong(ACCEPTED), [])


def rejected(condition: Condition, description: str) -> Described:
    """The Rejected outcome with an error."""
    return Described(ULong(REJECTED), [error(condition, description)])


# ------------------------------------------------------------------ outgoing performatives


def open_frame(
    container_id: str, max_frame_size: int, channel_max: int, idle_timeout_ms: int | None = None
) -> bytes:
    return performative(
        0,
        OPEN,
        container_id=container_id,
        max_frame_size=UInt(max_frame_size),
        channel_max=UShort(channel_max),
        idle_time_out=None if idle_timeout_ms is None else UInt(idle_timeout_ms),
    )


def begin_frame(
    channel: int,
    remote_channel: int,
    next_outgoing_id: int,
    incoming_window: int,
    outgoing_window: int,
    handle_max: int,
) -> bytes:
    return performative(
        channel,
        BEGIN,
        remote_channel=UShort(remote_channel),
        next_outgoing_id=UInt(next_outgoing_id),
        incoming_window=UInt(incoming_window),
        outgoing_window=UInt(outgoing_window),
        handle_max=UInt(handle_max),
    )


def attach_frame(
    channel: int,
    name: str,
    handle: int,
    *,
    role: bool,
    source: Raw | None,
    target: Raw | None,
    initial_delivery_count: int | None = None,
    max_message_size: int | None = None,
    offered: list[str] | None = None,
    snd_settle_mode: int = 2,
    rcv_settle_mode: int = 0,
) -> bytes:
    return performative(
        channel,
        ATTACH,
        name=name,
        handle=UInt(handle),
        role=role,
        snd_settle_mode=UByte(snd_settle_mode),
        rcv_settle_mode=UByte(rcv_settle_mode),
        source=source,
        target=target,
        incomplete_unsettled=False,
        initial_delivery_count=None
        if initial_delivery_count is None
        else UInt(initial_delivery_count),
        max_message_size=None if max_message_size is None else ULong(max_message_size),
        offered_capabilities=SymbolArray(Symbol(s) for s in offered) if offered else None,
    )


def flow_frame(
    channel: int,
    next_incoming_id: int | None,
    incoming_window: int,
    next_outgoing_id: int,
    outgoing_window: int,
    handle: int | None = None,
    delivery_count: int | None = None,
    link_credit: int | None = None,
    available: int | None = None,
    drain: bool = False,
    echo: bool = False,
) -> bytes:
    def u(v: int | None) -> UInt | None:
        return None if v is None else UInt(v & 0xFFFFFFFF)

    return performative(
        channel,
        FLOW,
        next_incoming_id=u(next_incoming_id),
        incoming_window=u(incoming_window),
        next_outgoing_id=u(next_outgoing_id),
        outgoing_window=u(outgoing_window),
        handle=u(handle),
        delivery_count=u(delivery_count),
        link_credit=u(link_credit),
        available=u(available),
        drain=drain,
        echo=echo,
    )


def transfer_frame(
    channel: int,
    handle: int,
    delivery_id: int,
    delivery_tag: bytes,
    payload: bytes,
    settled: bool = True,
    more: bool = False,
    message_format: int = 0,
) -> bytes:
    """Encode a transfer quickly: this is the hot path of every delivery."""
    fields = bytearray()
    fields += b"\x70" + struct.pack(">I", handle)
    fields += b"\x70" + struct.pack(">I", delivery_id & 0xFFFFFFFF)
    fields += bytes((0xA0, len(delivery_tag))) + delivery_tag
    fields += b"\x70" + struct.pack(">I", message_format)
    fields += b"\x41" if settled else b"\x42"
    fields += b"\x41" if more else b"\x42"
    fields += b"\x40\x40\x42\x42\x42"  # rcv-settle-mode, state, resume, aborted, batchable
    body = b"\x00\x53\x14\xd0" + struct.pack(">II", len(fields) + 4, 11) + bytes(fields)
    size = FRAME_HEADER.size + len(body) + len(payload)
    return FRAME_HEADER.pack(size, 2, AMQP_FRAME, channel) + body + payload


def disposition_frame(
    channel: int,
    first: int,
    last: int,
    state: Described,
    role: bool = ROLE_RECEIVER,
    settled: bool = True,
) -> bytes:
    return performative(
        channel,
        DISPOSITION,
        role=role,
        first=UInt(first),
        last=UInt(last),
        settled=settled,
        state=state,
        batchable=False,
    )


def detach_frame(
    channel: int, handle: int, closed: bool = True, err: Described | None = None
) -> bytes:
    return performative(channel, DETACH, handle=UInt(handle), closed=closed, error=err)


def end_frame(channel: int, err: Described | None = None) -> bytes:
    return performative(channel, END, error=err)


def close_frame(err: Described | None = None) -> bytes:
    return performative(0, CLOSE, error=err)


def sasl_mechanisms_frame(mechanisms: list[str]) -> bytes:
    mechanisms_array = SymbolArray(Symbol(m) for m in mechanisms)
    return performative(0, SASL_MECHANISMS, SASL_FRAME, sasl_server_mechanisms=mechanisms_array)


def sasl_outcome_frame(code: int) -> bytes:
    return performative(0, SASL_OUTCOME, SASL_FRAME, code=UByte(code))
