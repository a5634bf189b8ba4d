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


class ProtocolError(Exception):
    """The client broke the protocol; the connection is closed with this condition."""

    def __init__(self, condition: str, description: str) -> None:
        super().__init__(description)
        self.condition, self.description = condition, description


class Performative(NamedTuple):
    """A decoded performative: its code, decoded fields, raw fields, and any payload."""

    code: int
    fields: list
    raw: list[bytes]
    payload: bytes

    def get(self, index: int, default: Any = None) -> Any:
        """Field ``index`` or ``default`` when absent or null (trailing fields may be omitted)."""
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
    fields = [decode(item, 0)[0] for item in raw]
    end = skip(body, pos)  # whatever follows the field list is the payload (transfers)
    return Performative(code, fields, raw, bytes(body[end:]))


def frame(
    channel: int, code: int, fields: list, payload: bytes = b"", frame_type: int = AMQP_FRAME
) -> bytes:
    """Encode one frame carrying performative ``code`` with ``fields``."""
    body = encode(Described(ULong(code), list(fields)))
    size = FRAME_HEADER.size + len(body) + len(payload)
    return FRAME_HEADER.pack(size, 2, frame_type, channel) + body + payload


def error(condition: str, description: str | None = None) -> Described:
    """An AMQP error value (condition symbol, description, info)."""
    return Described(ULong(ERROR), [Symbol(condition), description, None])


def accepted() -> Described:
    """The Accepted outcome."""
    return Described(ULong(ACCEPTED), [])


def rejected(condition: str, description: str) -> Described:
    """The Rejected outcome with an error."""
    return Described(ULong(REJECTED), [error(condition, description)])


# ------------------------------------------------------------------ outgoing performatives


def open_frame(
    container_id: str, max_frame_size: int, channel_max: int, idle_timeout_ms: int | None = None
) -> bytes:
    return frame(
        0,
        OPEN,
        [
            container_id,
            None,
            UInt(max_frame_size),
            UShort(channel_max),
            None if idle_timeout_ms is None else UInt(idle_timeout_ms),
            None,
            None,
            None,
            None,
            None,
        ],
    )


def begin_frame(
    channel: int,
    remote_channel: int,
    next_outgoing_id: int,
    incoming_window: int,
    outgoing_window: int,
    handle_max: int,
) -> bytes:
    return frame(
        channel,
        BEGIN,
        [
            UShort(remote_channel),
            UInt(next_outgoing_id),
            UInt(incoming_window),
            UInt(outgoing_window),
            UInt(handle_max),
            None,
            None,
            None,
        ],
    )


def attach_frame(
    channel: int,
    name: str,
    handle: int,
    role: bool,
    source: Raw | None,
    target: Raw | None,
    initial_delivery_count: int | None,
    max_message_size: int | None,
    offered: list[str] | None = None,
    snd_settle_mode: int = 2,
    rcv_settle_mode: int = 0,
) -> bytes:
    return frame(
        channel,
        ATTACH,
        [
            name,
            UInt(handle),
            role,
            UByte(snd_settle_mode),
            UByte(rcv_settle_mode),
            source,
            target,
            None,
            False,
            None if initial_delivery_count is None else UInt(initial_delivery_count),
            None if max_message_size is None else ULong(max_message_size),
            SymbolArray(Symbol(s) for s in offered) if offered else None,
            None,
            None,
        ],
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

    return frame(
        channel,
        FLOW,
        [
            u(next_incoming_id),
            u(incoming_window),
            u(next_outgoing_id),
            u(outgoing_window),
            u(handle),
            u(delivery_count),
            u(link_credit),
            u(available),
            drain,
            echo,
            None,
        ],
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
    return frame(channel, DISPOSITION, [role, UInt(first), UInt(last), settled, state, False])


def detach_frame(
    channel: int, handle: int, closed: bool = True, err: Described | None = None
) -> bytes:
    return frame(channel, DETACH, [UInt(handle), closed, err])


def end_frame(channel: int, err: Described | None = None) -> bytes:
    return frame(channel, END, [err])


def close_frame(err: Described | None = None) -> bytes:
    return frame(0, CLOSE, [err])


def sasl_mechanisms_frame(mechanisms: list[str]) -> bytes:
    return frame(
        0, SASL_MECHANISMS, [SymbolArray(Symbol(m) for m in mechanisms)], frame_type=SASL_FRAME
    )


def sasl_outcome_frame(code: int) -> bytes:
    return frame(0, SASL_OUTCOME, [UByte(code), None], frame_type=SASL_FRAME)
